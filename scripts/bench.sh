#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# bench.sh: make bench. Boots one L2 per kernel (KERNELS, default 6.12) and runs every
# benchmark row on the same backing device in that boot (bench/l2-bench.sh), then
# writes results/<date>-<kernel>/: fio's JSON per run, table.md, cost.tsv, plots.
# QUICK=1: null_blk only, the target rows, fewer workloads, one of them measured
# again in a new L3 boot (REPEAT_ROW@2; about 10 minutes).
# REPS=N (default 3), ROWS="...", BACKENDS="nullb nullb-lat file nbd" restrict what runs,
# WORKLOADS="name ..." (e.g. 4k-randread-qd16-j8) the fio workloads, IOS=N the I/Os
# of each fio run (default 8192, aio-stress 8 x IOS; IOS_QD1 at queue depth 1, default 2048), BASE_REPS
# the counted base runs of each workload (default 3, QUICK=1: 1; benchmarks.rst).
# L3_CPUS (default L2_CPUS - 1, at least 1; 2 on a host with KVM): the L3
# guests' vCPUs and their devices' queues;
# L2_CPUS (default 2): L2's vCPUs. PROFILE=1: where each counted run's
# instructions went, by function (scripts/bench-profile.py: profile.md;
# slower, exits perturbed). PIN=0: L3's threads not pinned in L2; PIN_CPU: the
# L2 CPU of the backend's threads (bench/l2-bench.sh). BENCH_L2_BOOTS (default 6): L2 boots a pass
# may take after the nested-KVM flake (below); BENCH_L2_SECS (default 14400): the limit of one L2 boot.
# RESUME=results/DIR: go on with a run that stopped before its end (its L2 boots
# used up, or make bench itself stopped): each pass not finished there starts a
# fresh L2 at the row and workload where it stopped, with that run's settings
# (the variables above but BENCH_L2_BOOTS and BENCH_L2_SECS are then its own,
# not the caller's), and the report is
# made again over all of it. Only on the sources the run started with
# (DIR/source; RESUME_FORCE=1 goes on all the same and says so there).
#
# Counting (Documentation/benchmarks.rst): when L2 runs under TCG, its QEMU
# loads the vbcount plugin (tools/cost-plugin), and every fio run is a counted
# window: instructions and L3 exits of the whole machine. A full run (not
# QUICK) then boots a second L2 (pass 2, results in pass2/) that measures the
# target rows and workloads again, for the spread of the counts across boots;
# PASSES=1 leaves it out.
#
# On a host where KVM works (the canary boot of scripts/vm.sh), there is no L2:
# as root, bench.sh builds both modules for the running kernel, loads vhost_blk
# (and null_blk, brd for the backing devices), makes a guest image from the
# running kernel, and runs bench/l2-bench.sh, the script L2 runs here, on the
# host itself (HOST_MODE=1, in a private /tmp), each guest under KVM. Its
# figures are IOPS, latency and KVM's own counters (no instruction counts:
# Documentation/benchmarks.rst). BENCH_NESTED=1 keeps the L2 VM there too.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TOP"

# pass_env: the environment of a pass's L2 (the caller's settings), the
# first lines of its run.sh.
pass_env() {
	echo "export QUICK=${QUICK:-0} REPS=${REPS:-3}"
	[ -n "${ROWS:-}" ] && echo "export ROWS='$ROWS'"
	[ -n "${BACKENDS:-}" ] && echo "export BACKENDS='$BACKENDS'"
	[ -n "${L3_CPUS:-}" ] && echo "export L3_CPUS='$L3_CPUS'"
	[ -n "${WORKLOADS:-}" ] && echo "export WORKLOADS='$WORKLOADS'"
	[ -n "${RUNTIME:-}" ] && echo "export RUNTIME='$RUNTIME'"
	[ -n "${IOS:-}" ] && echo "export IOS='$IOS'"
	[ -n "${IOS_QD1:-}" ] && echo "export IOS_QD1='$IOS_QD1'"
	[ -n "${BASE_REPS:-}" ] && echo "export BASE_REPS='$BASE_REPS'"
	[ -n "${REPEAT_ROW+set}" ] && echo "export REPEAT_ROW='$REPEAT_ROW'"
	[ -n "${REPEAT_PARAMS:-}" ] && echo "export REPEAT_PARAMS='$REPEAT_PARAMS'"
	[ -n "${REPEAT_WORKLOADS+set}" ] && echo "export REPEAT_WORKLOADS='$REPEAT_WORKLOADS'"
	[ -n "${PARAMS:-}" ] && echo "export PARAMS='$PARAMS'"
	[ -n "${PIN:-}" ] && echo "export PIN='$PIN'"
	[ -n "${PIN_CPU:-}" ] && echo "export PIN_CPU='$PIN_CPU'"
	[ -n "${QEMU_POLL_NS:-}" ] && echo "export QEMU_POLL_NS='$QEMU_POLL_NS'"
	[ -n "${NULLB_LAT_NS:-}" ] && echo "export NULLB_LAT_NS='$NULLB_LAT_NS'"
	[ -n "${DEVICE_OPTS:-}" ] && echo "export DEVICE_OPTS='$DEVICE_OPTS'"
	[ -n "${EXIT_REASONS:-}" ] && echo "export EXIT_REASONS='$EXIT_REASONS'"
	[ -n "${PROFILE:-}" ] && echo "export PROFILE='$PROFILE'"
	[ -n "${L3_HPET:-}" ] && echo "export L3_HPET='$L3_HPET'"
}

# run_pass RES: the attempts loop of one pass (one L2 boot, and fresh ones
# after the nested-KVM flake); the pass's environment (ROWS, WORKLOADS, ...)
# is the caller's. Sets vrc and attempt.
run_pass() {
	local res=$1 plugin=() from= finished= skip= log vpid stalled last size since why rowline row row2 prev
	local env reps=${REPS:-3} first prof retrying= gave_up= extra= r main_done=0
	mkdir -p "$res/json"
	attempt=1
	env=$(pass_env)
	if [ -n "${RESUME:-}" ] && [ -e "$res/attempt-1.log" ]; then
		# Go on where the last L2 boot of this pass stopped (the
		# settings are the run's own: resume_settings).
		while [ -e "$res/attempt-$attempt.log" ]; do attempt=$((attempt + 1)); done
		# make bench stopped while an L2 ran: that boot's output is not
		# in output.log yet (it goes there when the VM ends)
		if [ ! -e "$res/pass.status" ]; then
			cat "$res/attempt-$((attempt - 1)).log" >>"$res/output.log"
			cp "$BUILD/vm/bench-$rel/console.log" "$res/l2-console-$((attempt - 1)).log" 2>/dev/null
		fi
		# the rows it skipped (they killed L2 twice, the one a retry
		# was on first), and whether its own sequence of rows was done:
		# its pass.state (older runs: pass.status or the last run.sh)
		if [ -e "$res/pass.state" ]; then
			skip="$(sed -n 2p "$res/pass.state") $(sed -n 1p "$res/pass.state")"
			main_done=$(sed -n 3p "$res/pass.state")
		elif [ -e "$res/pass.status" ]; then
			skip=$(sed -n 's/.*; rows not run: //p' "$res/pass.status")
			grep -q '^status 0 ' "$res/pass.status" && main_done=1
		else
			skip=$(sed -n "s/^export .*SKIP_ROWS='\([^']*\)'.*/\1/p" "$res/run.sh")
		fi
		skip=$(echo $skip)
		if [ "$main_done" = 1 ]; then
			# its rows were all run but these: they are what is left
			echo "@@RERUN ${skip:-(none)} - this pass had run its rows but these; make bench RESUME= tries them again@@" |
				tee -a "$res/output.log"
			attempt=$((attempt - 1))
			if ! retry_next; then
				vrc=0
				echo "status 0 after L2 boot $attempt" >"$res/pass.status"
				return
			fi
		else
			rowline=$(sed -n 's/^# row \([^ ]*\)\( and \([^ ]*\)\)\{0,1\}$/\1 \3/p' "$res/output.log" | tail -n 1)
			read -r row row2 <<<"$rowline"
			if [ -n "$row" ]; then
				from=$row
				finished=$(REPS=$reps bench/done-workloads.sh "$res/output.log" "$row" $row2 | tr '\n' ' ')
				finished=${finished% }
			fi
			echo "@@RERUN ${row:-(no row yet)} - this pass had stopped ($(cat "$res/pass.status" 2>/dev/null || echo "make bench stopped during it")); make bench RESUME= went on in a fresh L2 (boot $attempt)${finished:+ after the workloads the row had finished ($finished)}@@" |
				tee -a "$res/output.log"
		fi
	else
		: >"$res/output.log"
	fi
	rm -f "$res/pass.status"
	first=$attempt
	while :; do
		# what a RESUME of a stopped make bench reads: rows left, the row
		# a retry is on, whether the pass's own sequence is done
		printf '%s\n%s\n%s\n' "$(echo $skip $gave_up)" "$retrying" "$main_done" >"$res/pass.state"
		{
			echo "$env"
			[ -n "$extra" ] && echo "$extra"
			r=$skip
			[ -n "$retrying" ] && r=$gave_up
			echo "export FROM_ROW='$from' FROM_DONE='$finished' SKIP_ROWS='$(echo $r)'"
			echo "exec /src/bench/l2-bench.sh"
		} >"$res/run.sh"
		log=$res/attempt-$attempt.log
		: >"$log"	# (before tail follows it)
		plugin=()
		prof=
		[ "${PROFILE:-0}" = 1 ] && prof=",profile=$res/profile-$attempt.tsv"
		[ "$accel" = tcg ] && plugin=(--plugin "$TOP/build/plugin/libvbcount.so,out=$res/windows-$attempt.tsv$prof")
		scripts/vm.sh --kernel "$rel" --name "bench-$rel" --timeout "${BENCH_L2_SECS:-14400}" --mem 6G --smp "${L2_CPUS:-2}" \
			"${plugin[@]}" "$res/run.sh" >"$log" 2>&1 &
		vpid=$!
		tail -n +1 -f --pid=$vpid "$log" |
			grep --line-buffered -E '^# |^@@(START|FAIL|RERUN)' | sed -u 's/^@@START \(.*\)@@/  running \1/' &
		# L2 itself can wedge in nested KVM (its console silent; L1's QEMU
		# vCPU threads spin in cpu_exec/BQL with hardly any guest code run;
		# l2-bench.sh's own stall guard cannot act then): no output for
		# L1_STALL_SECS ends that L2. A healthy L2 prints a line per workload
		# (an L3 row's @@CPU lines) and at most ~1 min apart (an L3 boot);
		# 420 s stays above l2-bench.sh's 300 s guard for a stuck L3.
		stalled=0 last=-1 since=$(date +%s)
		while kill -0 $vpid 2>/dev/null; do
			size=$(stat -c %s "$log" 2>/dev/null || echo 0)
			if [ "$size" != "$last" ]; then
				last=$size since=$(date +%s)
			elif [ $(($(date +%s) - since)) -ge "${L1_STALL_SECS:-420}" ]; then
				stalled=1
				kill_vm "bench-$rel"
				break
			fi
			sleep 5
		done
		wait $vpid
		vrc=$?
		wait
		cat "$log" >>"$res/output.log"
		cp "$BUILD/vm/bench-$rel/console.log" "$res/l2-console-$attempt.log" 2>/dev/null
		# The L2 kernel panicked in an L3 guest's QEMU, or L2 stopped making
		# progress (the nested-SVM-under-TCG flake, Documentation/testing.rst):
		# a fresh L2 resumes the interrupted row after the workloads it had
		# finished (all its runs printed whole), then runs the rest; a row
		# that killed L2 twice without finishing a workload in between is
		# skipped, and once the other rows are done, tried once more in an L2
		# boot of its own (a row that gives up then is reported under "Rows
		# that did not run or did not finish"); at most BENCH_L2_BOOTS L2
		# boots (a RESUME may go on, and tries the skipped rows again); the
		# results say so.
		why=
		if [ "$vrc" != 0 ] && nested_kvm_panic "$res/l2-console-$attempt.log"; then
			why="the L2 kernel panicked inside nested KVM (qemu-system-x86)"
		elif [ $stalled = 1 ]; then
			why="L2 printed nothing for ${L1_STALL_SECS:-420}s (wedged in nested KVM) and was stopped"
		elif [ "$vrc" = 125 ] && grep -q 'VM ended without reporting an exit status' "$log"; then
			why="the L2 VM reset itself without a message (nested KVM)"
		elif [ "$vrc" = 124 ]; then
			why="the L2 VM reached its limit of ${BENCH_L2_SECS:-14400}s"
		fi
		[ $((attempt - first + 1)) -lt "${BENCH_L2_BOOTS:-6}" ] || break
		if [ -z "$why" ]; then
			# L2 ran to its end: the rows it skipped get one more L2
			# boot each backend (a fresh L2 often gets through)
			[ "$vrc" = 0 ] || break
			main_done=1 retrying=
			retry_next || break
			continue
		fi
		# "# row R" or "# row R and R2" (the vhost pair)
		rowline=$(sed -n 's/^# row \([^ ]*\)\( and \([^ ]*\)\)\{0,1\}$/\1 \3/p' "$log" | tail -n 1)
		read -r row row2 <<<"$rowline"
		[ -n "$row" ] || break
		prev=$finished
		finished=$(REPS=$reps bench/done-workloads.sh "$res/output.log" "$row" $row2 | tr '\n' ' ')
		finished=${finished% }
		if [ "$row" = "$from" ] && [ "$finished" = "$prev" ]; then
			if [ -n "$retrying" ]; then
				gave_up="$gave_up $row $row2"
				echo "@@RERUN $row - $why during this row again, no workload finished in between; not run@@" |
					tee -a "$res/output.log"
				# (the pass's own rows were all done: it ends well)
				retry_next || { vrc=0; why=; break; }
				continue
			fi
			skip="$skip $row $row2"
			finished=
			echo "@@RERUN $row - $why during this row again, no workload finished in between; a fresh L2 runs the rows after it, and this row again at the end@@" |
				tee -a "$res/output.log"
		else
			echo "@@RERUN $row - $why during this row; a fresh L2 resumed it${finished:+ after the workloads it had finished ($finished)} and ran the rows after it@@" |
				tee -a "$res/output.log"
		fi
		from=$row
		echo "bench: L2 died or wedged in nested KVM during $row; attempt $((attempt + 1)) starts there"
		attempt=$((attempt + 1))
	done
	# what a RESUME reads: a pass with status 0 and every row run is done
	# (a retry the flake ended is not)
	[ -n "$why" ] || retrying=
	r=$(echo $retrying $skip $gave_up)
	printf '%s\n\n%s\n' "$r" "$main_done" >"$res/pass.state"
	echo "status $vrc after L2 boot $attempt${why:+: $why}${r:+; rows not run: $r}" >"$res/pass.status"
}

# retry_next (in run_pass): set up an L2 boot for the first row the pass
# skipped (the vhost pair together), on its own (BACKENDS and ROWS narrowed
# to it, no repeat row), after the workloads it had finished; 1 if none is
# left.
retry_next() {
	local b r e r2= rest=
	set -- $skip
	[ $# -gt 0 ] || return 1
	b=${1%%/*} r=${1#*/}
	shift
	for e in "$@"; do
		if [ "$r" = vhost-blk-mq ] && [ "$e" = "$b/vhost-blk-bio" ]; then
			r2=vhost-blk-bio
		else
			rest="$rest $e"
		fi
	done
	skip=$rest
	retrying="$b/$r${r2:+ $b/$r2}"
	extra="export BACKENDS='$b' ROWS='$r${r2:+ $r2}' REPEAT_ROW='' # retry"
	from=$b/$r
	finished=$(REPS=$reps bench/done-workloads.sh "$res/output.log" "$from" ${r2:+$b/$r2} | tr '\n' ' ')
	finished=${finished% }
	attempt=$((attempt + 1))
	echo "@@RERUN $from - skipped earlier in this pass; L2 boot $attempt runs it again${r2:+ with $b/$r2}${finished:+ after the workloads it had finished ($finished)}@@" |
		tee -a "$res/output.log"
	return 0
}

# collect RES: the fio JSON blocks and counter lines out of a pass's output,
# and the plugin's windows joined to the runs they measured.
collect() {
	local res=$1 f
	# Split the fio JSON blocks out of the output.
	awk -v dir="$res/json" '
		/^@@JSON / { gsub(/@@/, ""); split($0, a, " "); f = a[2] "__" a[3] "__" a[4] ".json";
			gsub("/", "_", f); out = dir "/" f; next }
		/^@@END@@/ { close(out); out = ""; next }
		/^@@/ || /^vmrun: / { if (out != "") close(out); out = ""; next }
		out != "" { print > out }' "$res/output.log"
	# A block cut short (its L3 died while printing it) is not a result.
	for f in "$res"/json/*.json; do
		[ -e "$f" ] || continue
		if ! jq -e . "$f" >/dev/null 2>&1; then
			echo "@@FAIL ${f##*/} - fio JSON cut short (the L3 guest stopped while printing it); not used@@" >>"$res/output.log"
			rm -f "$f"
		fi
	done
	grep -h '^@@CPU ' "$res/output.log" | sed 's/@@//g' >"$res/cpu.txt"
	grep -h '^@@KVM ' "$res/output.log" | sed 's/@@//g' >"$res/kvm.txt"
	grep -h '^@@GUEST ' "$res/output.log" | sed 's/@@//g' >"$res/guest.txt"
	grep -h '^@@HOST ' "$res/output.log" | sed 's/@@//g' >"$res/host.txt"
	grep -h '^@@EXITR ' "$res/output.log" | sed 's/@@//g' >"$res/exitr.txt"
	grep -h '^@@FAIL ' "$res/output.log" | sed 's/@@//g' >"$res/failures.txt"
	grep -h '^@@RERUN ' "$res/output.log" | sed 's/@@//g' >"$res/reruns.txt"
	# what was set for repeatable counts: L2's halt polling, L3's idle loop
	grep -h '^@@SET ' "$res/output.log" | sed 's/@@//g' >"$res/settings.txt"
	grep -h '^@@IDLE ' "$res/output.log" | sed 's/@@//g' >"$res/idle.txt"
	cp "$res/l2-console-$attempt.log" "$res/l2-console.log" 2>/dev/null
	# "@@WIN ID ROW WL REP@@" in the output, "W ID insns exits ns l1other
	# vcpu-insns vcpu-exits l3-insns" in the plugin's file of the L2 boot
	# (attempt) that ran it: one line per counted run, with that boot's
	# number ("-" for l3-insns from a plugin without it). A window with a
	# "D" line too (entered again after it closed) is left out.
	: >"$res/windows.txt"
	: >"$res/windows-dropped.txt"
	# in the order of the boots (a run measured again: the later counts)
	local a=0
	while [ -e "$res/attempt-$((a + 1)).log" ]; do
		a=$((a + 1))
		f=$res/windows-$a.tsv
		[ -e "$f" ] || continue
		awk -v boot="$a" -F'\t' -v OFS='\t' '
			FNR == NR { if ($1 == "W") w[$2] = $3 OFS $4 OFS $5 OFS $6 OFS ($9 == "" ? "-" : $9)
				if ($1 == "D") bad[$2] = 1; next }
			/^@@WIN / { s = $0; gsub(/@@/, "", s); split(s, a, " ")
				if ((a[2] in w) && !(a[2] in bad)) print a[3], a[4], a[5], boot, a[2], w[a[2]] }' \
			"$f" "$res/attempt-$a.log" >>"$res/windows.txt"
		awk -F'\t' '$1 == "D" || $1 == "X" { print "window " $2 ": " $3 }' "$f" >>"$res/windows-dropped.txt"
	done
}

# host_pass RES: the bench on this host itself (KVM works here): no L2.
host_pass() {
	local res=$1 krel kdir tree img loaded=0 rc rwl=()
	krel=$(uname -r)
	kdir=/lib/modules/$krel/build
	[ "$(id -u)" = 0 ] || { echo "bench: on a host with KVM the bench loads modules: run it as root" >&2; return 1; }
	[ -d "$kdir" ] || { echo "bench: no headers for the running kernel $krel (make deps-build)" >&2; return 1; }
	tree=$BUILD/host/$krel
	mkdir -p "$tree" "$res/json"
	rsync -a --delete --exclude '*.o' --exclude '*.ko' --exclude '.*.cmd' --exclude '*.mod*' \
		Kbuild Makefile include vhost_blk virtio_blk_bio scripts "$tree/" &&
	make -s -C "$tree" KDIR="$kdir" CACHE="$BUILD/cache" modules >"$res/build.log" 2>&1 &&
	make -s tools >>"$res/build.log" 2>&1 || { echo "bench: build failed: $res/build.log" >&2; return 1; }
	img=$BUILD/img/host-$krel/l3.img
	mkdir -p "$(dirname "$img")"
	make_l3_image "$krel" / "$img" "$tree/vhost_blk/vhost_blk.ko" "$tree/virtio_blk_bio/virtio_blk_bio.ko" \
		>>"$res/build.log" 2>&1 || { echo "bench: guest image failed: $res/build.log" >&2; return 1; }
	[ -d /sys/module/vhost_blk ] || loaded=1
	echo "bench: on this host (KVM): loading vhost_blk, null_blk, brd; guests boot $krel"
	[ -n "${REPEAT_WORKLOADS+set}" ] && rwl=(REPEAT_WORKLOADS="$REPEAT_WORKLOADS")
	# A private /tmp: l2-bench.sh keeps its sockets, scripts and guest
	# directories there.
	unshare -m -- bash -c 'mount -t tmpfs tmpfs /tmp && exec "$@"' bench env \
		HOST_MODE=1 BENCH_DIR="$TOP/bench" VHOST_BLK_KO="$tree/vhost_blk/vhost_blk.ko" \
		L3_KERNEL="/boot/vmlinuz-$krel" L3_INITRD="$img" L3_CONSOLE="$res/l3-console.log" \
		L3_MARK_KMSG=0 PATH="$TOP/scripts/vm:$TOP/tools/vhost-blk-bridge:$TOP/tools/cost-plugin:$TOP/selftests/vhost_blk:$PATH" \
		QUICK="${QUICK:-0}" REPS="${REPS:-3}" IOS="${IOS:-262144}" IOS_QD1="${IOS_QD1:-16384}" BASE_REPS="${BASE_REPS:-}" \
		ROWS="${ROWS:-}" BACKENDS="${BACKENDS:-}" WORKLOADS="${WORKLOADS:-}" RUNTIME="${RUNTIME:-}" \
		L3_CPUS="${L3_CPUS:-}" REPEAT_ROW="${REPEAT_ROW-qemu-native}" \
		PARAMS="${PARAMS:-}" REPEAT_PARAMS="${REPEAT_PARAMS:-}" NULLB_LAT_NS="${NULLB_LAT_NS:-}" "${rwl[@]}" \
		"$TOP/bench/l2-bench.sh" 2>&1 | tee "$res/attempt-1.log" |
		grep --line-buffered -E '^# |^@@(START|FAIL|RERUN)' | sed -u 's/^@@START \(.*\)@@/  running \1/'
	rc=${PIPESTATUS[0]}
	cp "$res/attempt-1.log" "$res/output.log"
	[ $loaded = 1 ] && rmmod vhost_blk 2>/dev/null
	vrc=$rc attempt=1
}

# src_stamp: one hash over what a run's L2 and L3 execute (the modules, the
# bench scripts, the plugin, the VM scripts) as they are in the work tree.
src_stamp() {
	git -C "$TOP" rev-parse --git-dir >/dev/null 2>&1 || { echo "none (not a git tree)"; return; }
	git -C "$TOP" ls-files -z -- Kbuild Makefile include vhost_blk virtio_blk_bio bench tools \
		scripts/vm scripts/vm.sh scripts/lib.sh | xargs -0 sha256sum | sha256sum | cut -c1-16
}

# resume_settings RES: the settings RES was started with, in place of the
# caller's: the L2's from its first pass's run.sh, this script's own from
# RES/bench.env.
resume_settings() {
	local res=$1
	unset ROWS BACKENDS L3_CPUS WORKLOADS RUNTIME IOS IOS_QD1 BASE_REPS REPEAT_ROW REPEAT_PARAMS \
		REPEAT_WORKLOADS PARAMS PIN PIN_CPU QEMU_POLL_NS DEVICE_OPTS EXIT_REASONS PROFILE PASSES L2_CPUS \
		L3_HPET NULLB_LAT_NS
	eval "$(sed -e '1s/ FROM_ROW=.*//' -e '/^export FROM_ROW=/d' -e '/^exec /d' -e '/# retry$/d' "$res/run.sh")"
	[ -f "$res/bench.env" ] && . "$res/bench.env"
	return 0
}

kernels=${KERNELS:-6.12}
stamp=$(date +%Y%m%d-%H%M)
if [ -n "${RESUME:-}" ]; then
	res=$(cd "$RESUME" 2>/dev/null && pwd)
	if [ -z "$res" ] || [ ! -f "$res/run.sh" ] || [ ! -f "$res/counted" ]; then
		echo "bench: RESUME=$RESUME is not a counted run of make bench (results/DATE-TIME-KERNEL with run.sh)" >&2
		exit 1
	fi
	src=$(src_stamp)
	was=$(sed -n 's/^sources //p' "$res/source" 2>/dev/null)
	if [ "$src" != "$was" ]; then
		if [ "${RESUME_FORCE:-0}" != 1 ]; then
			echo "bench: RESUME: the sources differ from those $res started with (${was:-not recorded}, now $src):" >&2
			echo "bench: its counts would mix two versions of what they measure. RESUME_FORCE=1 goes on all the same." >&2
			exit 1
		fi
		echo "resumed $(date +%Y%m%d-%H%M) with RESUME_FORCE=1 on other sources: $src" >>"$res/source"
	fi
	resume_settings "$res"
	kernels=$(sed -n 's/^counted //p' "$res/counted")
	if ps -eo args= | grep -F "$BUILD/vm/bench-$kernels/initrd.img" | grep -q qemu-system; then
		echo "bench: RESUME: an L2 of make bench on $kernels still runs (another make bench?); stop it first" >&2
		exit 1
	fi
fi
# make bench stopped (^C, kill): its L2 stops too, not running on unwatched
trap 'kill_vm "bench-${rel:-none}"; exit 130' INT TERM
rc_all=0
for k in $kernels; do
	rel=$(kernel_rel "$k") || exit 1
	if [ -z "${RESUME:-}" ]; then
		res=$TOP/results/$stamp-$rel
		mkdir -p "$res"
		echo "sources $(src_stamp)" >"$res/source"
		git -C "$TOP" describe --always --dirty >>"$res/source" 2>/dev/null
	fi
	accel=$(scripts/vm.sh --kernel "$rel" --print-accel) || exit 1
	if [ "$accel" = kvm ] && [ "${BENCH_NESTED:-0}" != 1 ]; then
		res=$TOP/results/$stamp-host-$(uname -r)
		mkdir -p "$res"
		host_pass "$res" || { rc_all=1; continue; }
		[ "$vrc" = 0 ] || rc_all=1
		collect "$res"
		scripts/bench-report.sh "$res" || rc_all=1
		echo "bench: $res/table.md"
		cat "$res/targets.md" 2>/dev/null
		break	# the host's own kernel: once, whatever KERNELS says
	fi
	if [ "$accel" = tcg ]; then
		if ! make -s plugin >"$res/plugin-build.log" 2>&1; then
			echo "bench: L2 runs under TCG here, and the cost counts need the vbcount plugin," >&2
			echo "bench: which did not build (make deps fetches QEMU's plugin header):" >&2
			sed 's/^/bench:   /' "$res/plugin-build.log" >&2
			exit 1
		fi
		echo "counted $rel" >"$res/counted"
	fi
	passes=${PASSES:-2}
	[ "${QUICK:-0}" = 1 ] && passes=${PASSES:-1}
	[ -n "${RESUME:-}" ] || echo "PASSES=$passes L2_CPUS=${L2_CPUS:-2}" >"$res/bench.env"
	echo "bench: kernel $rel ($accel$([ "$accel" = tcg ] && echo ", counted by the vbcount plugin")), QUICK=${QUICK:-0}, L2 vCPUs ${L2_CPUS:-2}, L3 vCPUs and queues ${L3_CPUS:-one fewer than L2 has}, results in $res"
	for pass in $(seq 1 "$passes"); do
		pres=$res
		[ "$pass" -gt 1 ] && pres=$res/pass$pass
		if [ -n "${RESUME:-}" ] && grep -q '^status 0 ' "$pres/pass.status" 2>/dev/null &&
		   ! grep -q '; rows not run: ' "$pres/pass.status"; then
			echo "bench: pass $pass was done ($pres)"
			attempt=$(sed -n 's/^status 0 after L2 boot \([0-9]*\).*/\1/p' "$pres/pass.status")
			collect "$pres"
			continue
		fi
		if [ "$pass" -gt 1 ]; then
			# Pass 2: a fresh L2 boot measures the target rows and
			# workloads again (the spread of the counts across boots).
			echo "bench: pass $pass (a fresh L2 boot): the target rows and workloads again, results in $pres"
		fi
		start=$(date +%s)
		if [ "$pass" -gt 1 ]; then
			ROWS="native qemu-native qsd vhost-blk-mq vhost-blk-bio" BACKENDS=nullb REPEAT_ROW= PROFILE= \
			WORKLOADS="4k-randread-qd32 4k-randwrite-qd32 4k-randread-qd16-j8 4k-randwrite-qd16-j8" \
				run_pass "$pres"
		else
			run_pass "$pres"
		fi
		echo "bench: pass $pass: VM finished in $(($(date +%s) - start))s (status $vrc, $attempt L2 boot(s))"
		[ "$vrc" = 0 ] || rc_all=1
		collect "$pres"
	done
	scripts/bench-report.sh "$res" || rc_all=1
	echo "bench: $res/table.md, $res/cost.tsv"
	if [ "${PROFILE:-0}" = 1 ] && [ "$accel" = tcg ]; then
		scripts/bench-profile.py "$res" >"$res/profile.md" &&
			echo "bench: where the instructions went: $res/profile.md"
	fi
	cat "$res/targets.md" 2>/dev/null
done
exit $rc_all
