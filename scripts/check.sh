#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# check.sh [KERNEL...]: the project's test suite (make check).
#
# First, on the host without a VM: the bench report, the bridge's socket and
# protocol handling, the repository's basics, the test kit; and once in a VM on
# the first full kernel, the cost-counting TCG plugin and the guest driver
# under a backend stalled for 60 s (selftests/virtio_blk_bio/stall-test.sh;
# every kernel with SLOW=1). Then for each test kernel (default: 6.12 7.3
# 6.1, unpacked in build/kernels by make deps): checkpatch on every kernel C
# file and header, a warning-free module build, a sparse build, the guest
# driver in a VM of its own (selftests/virtio_blk_bio/vm-test.sh, no L3),
# make install staged, both DKMS packages, then one L2 boot that runs the
# selftests/l2/*.sh; on the full kernels (FULL_KERNELS, below) also the VM
# harness self-tests, the guest driver's hibernation VMs, every L2 test and
# the durability test (selftests/e2e/durability.sh: whole L2 VMs killed
# from L1), on the others only the L2 tests marked "# check: core" (no L3). Prints
# one TAP-style line per test with the kernel in its name and ends with "N
# passed, N failed, N skipped".
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TOP"

kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || kernels=(6.12 7.3 6.1)
# The full suite runs on FULL_KERNELS (default 6.12 when it is in the list,
# else the first kernel of the list; every kernel with SLOW=1), first. The
# other kernels get the core, in the order given: checkpatch, both builds,
# the guest driver's main VM, make install and DKMS, and one L2 boot running
# the "# check: core" tests (the modules load, DKMS's modules, the vhost_blk
# selftests, the upstream series' modules): none boots an L3 guest, so none
# meets the nested-KVM flake. Three kernels in full do not fit CI's time.
if [ -z "${FULL_KERNELS:-}" ]; then
	FULL_KERNELS=${kernels[0]}
	for k in "${kernels[@]}"; do [ "$k" = 6.12 ] && FULL_KERNELS=6.12; done
fi
[ "${SLOW:-0}" = 1 ] && FULL_KERNELS="${kernels[*]}"
full() { case " $FULL_KERNELS " in *" $1 "*) true ;; *) false ;; esac; }
ordered=()
for k in "${kernels[@]}"; do full "$k" && ordered+=("$k"); done
for k in "${kernels[@]}"; do full "$k" || ordered+=("$k"); done
kernels=("${ordered[@]}")
out=$BUILD/check
mkdir -p "$out"
: >"$out/results.tap"

pass=0 fail=0 skip=0
# Fresh L2 boots after a nested-KVM death (see the loop below): at most
# L2_BOOTS per full kernel and CORE_L2_BOOTS per other, and none once make
# check has run CHECK_BUDGET seconds less the time kept for the kernels after
# this one (CI stops a run at 90 minutes; a run meets the flake in nested KVM
# two to four times per kernel; one run used up 12 on 6.12). A flake death
# with no boot or time left, and an L2 stopped at make check's time limit,
# make the tests that did not run a skip that says so (every death said).
# An L2 boot is killed at the latest at CHECK_LIMIT seconds of make check, less
# KERNEL_RESERVE for each full kernel still to come and CORE_RESERVE for each
# other (so a wedge that no rule catches costs one kernel its L2 tests, not
# the whole run its summary).
L2_BOOTS=${L2_BOOTS:-16}
CORE_L2_BOOTS=${CORE_L2_BOOTS:-3}
CHECK_BUDGET=${CHECK_BUDGET:-4200}
[ "${SLOW:-0}" = 1 ] && CHECK_LIMIT=${CHECK_LIMIT:-14400}
CHECK_LIMIT=${CHECK_LIMIT:-4500}
KERNEL_RESERVE=${KERNEL_RESERVE:-1500}
CORE_RESERVE=${CORE_RESERVE:-600}
result() { # "ok"|"not ok" description [# SKIP ...]
	local line="$1 - $2"
	echo "$line" | tee -a "$out/results.tap"
	case $line in
	"not ok"*) fail=$((fail + 1)) ;;
	*"# SKIP"*) skip=$((skip + 1)) ;;
	*) pass=$((pass + 1)) ;;
	esac
}
check_cmd() { # description log command...
	local desc=$1 log=$2; shift 2
	if "$@" >"$log" 2>&1; then result ok "$desc"; else
		result "not ok" "$desc"; sed 's/^/#   /' "$log" | tail -n 30; fi
}

kernel_c_files() {
	git ls-files -co --exclude-standard -- 'vhost_blk/*.[ch]' 'virtio_blk_bio/*.[ch]' \
		'include/*.h' 'selftests/harness/*.[ch]' 'selftests/upstream/*.[ch]' | sort -u
}

# checkpatch comes from the test kernel's own source tarball (build/kernels).
extract_scripts() { # rel -> dir holding scripts/checkpatch.pl
	local series d
	series=$(echo "$1" | sed 's/^\([0-9]*\.[0-9]*\).*/\1/')
	d=$BUILD/cache/linux-source-$series
	if [ ! -f "$d/scripts/checkpatch.pl" ]; then
		mkdir -p "$d"
		tar -C "$BUILD/cache" -xf "$(kernel_srctar "$1")" --wildcards \
			"linux-source-$series/scripts/checkpatch.pl" "linux-source-$series/scripts/spelling.txt" \
			"linux-source-$series/scripts/const_structs.checkpatch" || return 1
	fi
	echo "$d"
}

no_warnings() { # log: fail if a compiler or sparse warning/error is in it
	! grep -E 'warning:|error:|WARNING:|Error [0-9]' "$1"
}

# (with the tests' fault injection compiled in, so that its code is checked too)
build_quiet() { # rel tree-dir [C=2]
	local rel=$1 tree=$2; shift 2
	mkdir -p "$tree" && rsync -a --delete --exclude "*.o" --exclude "*.ko" --exclude ".*.cmd" --exclude "*.mod*" \
		Kbuild Makefile include vhost_blk virtio_blk_bio scripts "$tree/" &&
	make -C "$tree" KDIR="$(kernel_kdir "$rel")" CACHE="$BUILD/cache" \
		VHOST_BLK_FAULT_INJECTION=y "$@" modules
}

# start_stopped NAME LOG VM.SH-OPTION...: in the background, a VM on $rel whose
# script idles, its QEMU stopped (SIGSTOP) once the script runs and, with
# --stall, its heartbeat has begun.
start_stopped() {
	local name=$1 log=$2 beat=
	shift 2
	case " $* " in *" --stall "*) beat=$BUILD/vm/$name/alive.log ;; esac
	echo 'echo idling; while :; do sleep 1; done' >"$out/$name.sh"
	scripts/vm.sh --kernel "$rel" --name "$name" "$@" "$out/$name.sh" >"$log" 2>&1 &
	for _ in $(seq 1 100); do
		grep -q '^idling' "$log" && { [ -z "$beat" ] || [ -s "$beat" ]; } && break
		sleep 0.5
	done
	kill_vm "$name" STOP
}

harness_selftests() { # kernel rel
	local k=$1 rel=$2 rc spid tpid
	echo 'echo about to fail; exit 3' >"$out/h-fail.sh"
	echo 'insmod /root/harness_warn.ko; echo loaded; exit 0' >"$out/h-warn.sh"
	echo 'echo hanging; while :; do sleep 1; done' >"$out/h-hang.sh"
	scripts/vm.sh --kernel "$rel" --name "harness-fail-$rel" --timeout 240 "$out/h-fail.sh" \
		>"$out/h-fail-$rel.log" 2>&1; rc=$?
	[ $rc = 3 ] && result ok "[$k] harness: a failing script fails the run (status 3)" ||
		result "not ok" "[$k] harness: a failing script fails the run (got $rc, want 3)"
	scripts/vm.sh --kernel "$rel" --name "harness-warn-$rel" --timeout 240 "$out/h-warn.sh" \
		>"$out/h-warn-$rel.log" 2>&1; rc=$?
	[ $rc = 126 ] && grep -q loaded "$out/h-warn-$rel.log" &&
		result ok "[$k] harness: a kernel WARN fails a run whose script exited 0" ||
		result "not ok" "[$k] harness: a kernel WARN fails a run whose script exited 0 (got $rc, want 126)"
	# Two VMs killed at their limit: one hangs but runs (its watchdog reports
	# the blocked tasks), one stops running (its QEMU is stopped once the
	# script has started): vmrun must tell which. A third stops as well but
	# has a heartbeat (as l3run gives L3 guests): killed once it has been
	# silent for 15 s, long before its limit. They run side by side.
	start_stopped "harness-stop-$rel" "$out/h-stop-$rel.log" --timeout 60
	spid=$!
	start_stopped "harness-stall-$rel" "$out/h-stall-$rel.log" --timeout 240 --stall 15
	tpid=$!
	scripts/vm.sh --kernel "$rel" --name "harness-hang-$rel" --timeout 60 "$out/h-hang.sh" \
		>"$out/h-hang-$rel.log" 2>&1; rc=$?
	[ $rc = 124 ] && [ -s "$BUILD/vm/harness-hang-$rel/console.log" ] &&
		result ok "[$k] harness: a hanging VM is killed at the timeout, console log kept" ||
		result "not ok" "[$k] harness: a hanging VM is killed at the timeout, console log kept (got $rc, want 124)"
	grep -q '^vmrun: the guest was running at its limit' "$out/h-hang-$rel.log" &&
		grep -q 'Show Blocked State' "$out/h-hang-$rel.log" &&
		result ok "[$k] harness: a VM that hangs but runs is said to run, with its watchdog's blocked-task report" ||
		result "not ok" "[$k] harness: a VM that hangs but runs is said to run, with its watchdog's blocked-task report"
	wait $spid; rc=$?
	[ $rc = 124 ] && grep -q '^vmrun: the guest had stopped running' "$out/h-stop-$rel.log" &&
		result ok "[$k] harness: a VM that stops running is killed at the timeout and said to have stopped" ||
		result "not ok" "[$k] harness: a VM that stops running is killed at the timeout and said to have stopped (got $rc, want 124)"
	wait $tpid; rc=$?
	[ $rc = 124 ] && grep -q '^vmrun: the guest had stopped running: no heartbeat for' "$out/h-stall-$rel.log" &&
		result ok "[$k] harness: a VM whose heartbeat stops is killed before its limit and said to have stopped ($(grep -o 'no heartbeat for [0-9]* s, killed [0-9]* s into its [0-9]*s limit' "$out/h-stall-$rel.log"))" ||
		result "not ok" "[$k] harness: a VM whose heartbeat stops is killed before its limit and said to have stopped (got $rc, want 124)"
	# A CPU that runs no task while an L3 guest's QEMU runs: here a
	# real-time busy loop bound to CPU 1, named as QEMU is, with RT
	# throttling off (and on 6.12 the fair server of CPU 1 too, set while
	# that CPU has a task queued: set on an idle CPU, it warns). run-tests.sh
	# must say so and run_l2 stop that L2 at once (the wedge of a vCPU lost
	# in L3; its 150 s made 20 s here).
	cat >"$out/h-cpulost.sh" <<-'EOF'
	cp /usr/bin/bash /tmp/qemu-system-x86_64 || exit 1
	echo -1 >/proc/sys/kernel/sched_rt_runtime_us || exit 1
	mount -t debugfs none /sys/kernel/debug 2>/dev/null
	fs=/sys/kernel/debug/sched/fair_server/cpu1/runtime
	if [ -e $fs ]; then
		taskset 2 bash -c 'while :; do :; done' &
		sleep 1
		echo 0 >$fs || exit 1
		kill $!
	fi
	chrt -f 50 taskset 2 /tmp/qemu-system-x86_64 -c 'while :; do :; done' &
	sleep 5
	kill -0 $! || exit 1
	sleep 120
	EOF
	local vmfiles=(--file "$out/h-cpulost.sh:/root/h-cpulost.sh" --bin chrt)
	RUN_L2_ENV="BEAT=5 CPU_LOST_SECS=20" RUN_L2_TESTS=/root/h-cpulost.sh \
		run_l2 "$rel" "" "harness-cpulost-$rel" "$out/h-cpulost-$rel.log"
	grep -q 'CPU 1 ran no task' "$out/harness-cpulost-$rel.wedged" 2>/dev/null &&
		grep -q 'run-tests: CPU 1 has run no task for' "$BUILD/vm/harness-cpulost-$rel/console.log" &&
		result ok "[$k] harness: an L2 CPU that runs no task while an L3 QEMU runs stops that L2 at once ($(cat "$out/harness-cpulost-$rel.wedged"))" ||
		result "not ok" "[$k] harness: an L2 CPU that runs no task while an L3 QEMU runs stops that L2 at once"
}

# run_l2 REL FROM NAME LOG: one L2 boot running the in-VM tests (from test FROM
# on), watched by l2_watch (scripts/lib.sh): an L2 wedged in nested KVM is
# stopped at once (else it sits until its VM timeout: 3600 s, or less near
# CHECK_LIMIT) and NAME.wedged says why.
run_l2() {
	local vpid tmo
	printf 'export SLOW=%s FROM=%s %s\nexec /src/selftests/lib/run-tests.sh %s\n' \
		"${SLOW:-0}" "$2" "${RUN_L2_ENV:-}" "${RUN_L2_TESTS:-}" >"$out/run-l2.sh"
	rm -f "$BUILD/vm/$3/console.log" "$BUILD/vm/$3/l3-console.log"
	tmo=$((CHECK_LIMIT - reserve_left - SECONDS))
	l2_capped=1
	[ $tmo -le 3600 ] || { tmo=3600; l2_capped=0; }
	[ $tmo -ge 600 ] || tmo=600
	scripts/vm.sh --kernel "$1" --name "$3" --timeout $tmo "${vmfiles[@]}" \
		"$out/run-l2.sh" >"$4" 2>&1 &
	vpid=$!
	l2_watch "$3" $vpid "$out/$3.wedged"
	wait $vpid
}

# last_test LOG: the last test an L2 run (its vm.sh output LOG) started.
last_test() {
	sed -n 's/^# ---- \([^: ]*\)$/\1/p' "$1" | tail -n 1
}

# l2_died NAME RC LOG: why the L2 run NAME ended in nested KVM, if it did.
l2_died() {
	l2_death "$1" "$2" "$3" "$out/$1.wedged"
}

# report_l2 K LOG CUT: the results of an L2 run; from test CUT on (it was
# interrupted and runs again) they are shown as comments only.
report_l2() {
	local cut=0 line
	while IFS= read -r line; do
		[ -n "$3" ] && [ "$line" = "# ---- $3" ] && cut=1
		if [ $cut = 1 ]; then
			case $line in "ok - "*|"not ok - "*|"#"*) echo "#   1st: $line" ;; esac
			continue
		fi
		case $line in
		"ok - "*) result ok "[$1] ${line#ok - }" ;;
		"not ok - "*) result "not ok" "[$1] ${line#not ok - }" ;;
		"#"*) echo "$line" ;;
		esac
	done <"$2"
}

# host_tap DESC COMMAND...: a host-side test's TAP lines as results; its exit
# status counts only when it printed no result line.
host_tap() {
	local desc=$1 n=0 line rc=0; shift
	while IFS= read -r line; do
		case $line in
		"ok - "*) result ok "${line#ok - }"; n=$((n + 1)) ;;
		"not ok - "*) result "not ok" "${line#not ok - }"; n=$((n + 1)) ;;
		"@@rc "*) rc=${line#@@rc } ;;
		"#"*) echo "$line" ;;
		esac
	done < <("$@" 2>&1; echo "@@rc $?")
	if [ $n = 0 ]; then
		[ "$rc" = 0 ] && result ok "$desc" || result "not ok" "$desc (exit status $rc, no result line)"
	fi
}

# Host-only, once, no VM: the benchmark report on a fixture with known numbers,
# and make bench's L2 boots and RESUME on a stand-in L2;
# the bridge's socket and protocol handling (--no-kernel); the repository's
# basics and the installed files; the rule that tells the nested-KVM flake
# from a failure, on fixtures; the test kit (installs no kernel, touches no
# boot entry; the test kernels work from the build tree alone).
echo "# ==== host (no VM)"
host_tap "bench report" selftests/bench/report-test.sh
host_tap "bench resume" selftests/bench/resume-test.sh
host_tap "bench profile" selftests/bench/profile-test.sh
make -s tools >"$out/tools.log" 2>&1 || { result "not ok" "userspace tools build"; tail -n 20 "$out/tools.log"; }
host_tap "bridge" selftests/bridge/bridge-test.py
host_tap "repository" selftests/repo/repo-test.sh
host_tap "flake rule" selftests/repo/flake-test.sh
host_tap "L2 wedge rule" selftests/repo/wedge-test.sh
host_tap "test kit" selftests/repo/testkit-test.sh
host_tap "units" selftests/repo/unit-test.sh
host_tap "vhost source version" selftests/repo/vhost-src-test.sh
host_tap "docs" selftests/repo/docs-test.sh
host_tap "upstream series" selftests/repo/upstream-test.sh
# Once, on the first full kernel of the run: the cost-counting TCG plugin, in a VM.
once=${FULL_KERNELS%% *}
if [ "$once" != none ] && kernel_rel "$once" >/dev/null 2>&1; then
	echo "# ==== the cost plugin (one VM, kernel $once)"
	host_tap "cost plugin" selftests/cost/plugin-test.sh "$once"
	# A backend stalled 60 s under fio: the guest driver keeps its disk, on
	# both paths. One VM of 4-6 minutes: on that kernel; every kernel
	# with SLOW=1 (in the kernel loop below).
	if [ "${SLOW:-0}" != 1 ]; then
		echo "# ==== a stalled backend (one VM, kernel $once)"
		host_tap "[$once] stalled backend" selftests/virtio_blk_bio/stall-test.sh --kernel "$once"
	fi
fi

# reserve_left: the time kept for the kernels after this one.
reserve_of() { if full "$1"; then echo "$KERNEL_RESERVE"; else echo "$CORE_RESERVE"; fi; }
reserve_left=0
for k in "${kernels[@]}"; do reserve_left=$((reserve_left + $(reserve_of "$k"))); done
for k in "${kernels[@]}"; do
	reserve_left=$((reserve_left - $(reserve_of "$k")))
	rel=$(kernel_rel "$k") || { result "not ok" "[$k] kernel installed"; continue; }
	series=$(echo "$rel" | sed 's/^\([0-9]*\.[0-9]*\).*/\1/')
	if full "$k"; then
		echo "# ==== kernel $k ($rel): the full suite"
	else
		echo "# ==== kernel $k ($rel): the core tests (the full suite runs on $FULL_KERNELS; FULL_KERNELS= or SLOW=1 for more)"
	fi

	if cp_dir=$(extract_scripts "$rel"); then
		for f in $(kernel_c_files); do
			check_cmd "[$k] checkpatch $f" "$out/checkpatch.log" \
				perl "$cp_dir/scripts/checkpatch.pl" --no-tree --quiet -f "$f"
		done
	else
		result "not ok" "[$k] checkpatch available (linux-source-$series)"
	fi

	for mode in build sparse; do
		log=$out/$mode-$rel.log
		if [ $mode = build ]; then
			desc="[$k] modules build without warnings"
			rm -rf "$BUILD/k/$rel/warn-check"	# every file compiled, every warning seen
			build_quiet "$rel" "$BUILD/k/$rel/warn-check" >"$log" 2>&1
		else
			desc="[$k] sparse (C=2) on both modules, no warnings"
			build_quiet "$rel" "$BUILD/k/$rel/sparse" C=2 >"$log" 2>&1
		fi
		rc=$?
		if [ $rc = 0 ] && grep -q 'sparse is not available' "$log"; then
			# kbuild says so and goes on without it: a kernel built in
			# the Debian 13 rootfs (7.3), which has no sparse.
			result ok "$desc # SKIP no sparse where this kernel's modules build"
		elif [ $rc = 0 ] && no_warnings "$log" >/dev/null; then
			result ok "$desc"
		else
			result "not ok" "$desc"
			grep -E 'warning:|error:|WARNING:|Error' "$log" | head -n 30 | sed 's/^/#   /'
		fi
	done

	# The VM harness checks itself (the harness is the same on every
	# kernel; its L2 boots are the full kernels' own).
	full "$k" && harness_selftests "$k" "$rel"

	# The guest driver in a VM of its own, on its QEMU's virtio-blk devices:
	# no L3 guest, so out of the nested-SVM flake's way. The core: its main
	# VM; the full suite adds hibernation and I/O across freeze and thaw.
	vbb_only=()
	full "$k" || vbb_only=(--only main)
	echo "# guest driver: selftests/virtio_blk_bio/vm-test.sh --kernel $rel ${vbb_only[*]}"
	host_tap "[$k] virtio-blk-bio" selftests/virtio_blk_bio/vm-test.sh --kernel "$rel" "${vbb_only[@]}"
	if [ "${SLOW:-0}" = 1 ]; then
		host_tap "[$k] stalled backend" selftests/virtio_blk_bio/stall-test.sh --kernel "$k"
	fi

	# make install staged into a root that 44-real-host copies onto L2.
	vmfiles=()
	if scripts/install-test.sh "$rel" "$out/hostinstall-$rel" >"$out/install-$rel.log" 2>&1; then
		result ok "[$k] make install / make uninstall (staged with DESTDIR): modules, bridge, man page, units, udev rule, sysusers; guest-only install"
		vmfiles+=(--file "$out/hostinstall-$rel:/root/hostinstall")
	else
		result "not ok" "[$k] make install / make uninstall (staged with DESTDIR)"
		tail -n 30 "$out/install-$rel.log" | sed 's/^/#   /'
	fi

	if scripts/dkms-test.sh "$rel" "$out/dkms-$rel" >"$out/dkms-$rel.log" 2>&1; then
		result ok "[$k] dkms add/build/install; modinfo version, author, license, parameter descriptions; kernels outside 6.1/6.12/7.3 and a linux-source of another version refused"
		vmfiles+=(--file "$out/dkms-$rel:/root/dkms")
	else
		result "not ok" "[$k] dkms add/build/install; modinfo version, author, license, parameter descriptions; kernels outside 6.1/6.12/7.3 and a linux-source of another version refused"
		tail -n 20 "$out/dkms-$rel.log" | sed 's/^/#   /'
	fi

	# make upstream's series, built by selftests/repo/upstream-test.sh (7.3
	# only, and only when the series check passed), for
	# selftests/l2/21-upstream-series.sh.
	upmods=${UPSTREAM_WORK:-$BUILD/upstream}/modules/$rel
	[ -f "$upmods/MANIFEST" ] && vmfiles+=(--file "$upmods:/root/upstream-modules")

	if [ "$SECONDS" -ge "$((CHECK_LIMIT - reserve_left - 300))" ]; then
		result ok "[$k] the L2 tests # SKIP make check has run ${SECONDS}s (CHECK_LIMIT=$CHECK_LIMIT, ${reserve_left}s kept for the kernels after this one): no time for this kernel's L2"
		continue
	fi
	echo "# booting L2 ($rel) for the in-VM tests"
	vmname=check-$rel vmlog=$out/vm-$rel.log attempt=1 nobudget=0 max_boots=$L2_BOOTS
	full "$k" || max_boots=$CORE_L2_BOOTS
	RUN_L2_ENV="FULL_KERNELS='$FULL_KERNELS'"
	full "$k" || RUN_L2_ENV+=" CORE=1"
	run_l2 "$rel" "" "$vmname" "$vmlog"
	rc=$?
	# The L2 kernel died or wedged inside the L3 guest's QEMU (nested KVM
	# under TCG): known flake of this kind of host, see
	# Documentation/testing.rst. The interrupted test and the ones after it
	# run again in a fresh L2, at most max_boots boots in all and within
	# CHECK_BUDGET; said here, never silent.
	while [ $rc != 0 ] && why=$(l2_died "$vmname" "$rc" "$vmlog"); do
		from=$(last_test "$vmlog")
		[ -n "$from" ] || break
		stop=
		if [ "$attempt" -ge "$max_boots" ]; then
			stop="$attempt L2 boots, the most for this kernel (L2_BOOTS=$L2_BOOTS, CORE_L2_BOOTS=$CORE_L2_BOOTS)"
		elif [ "$SECONDS" -ge "$((CHECK_BUDGET - reserve_left))" ]; then
			stop="make check has run ${SECONDS}s (CHECK_BUDGET=$CHECK_BUDGET, ${reserve_left}s kept for the kernels after this one)"
		fi
		if [ -n "$stop" ]; then
			# The host's flake, classified as above, with no boot
			# or time left to run the rest: what did not run is a
			# skip that says so, not a failure of ours.
			report_l2 "$k" "$vmlog" "$from"
			result ok "[$k] $from and the L2 tests after it # SKIP $why during $from; $stop: no fresh L2"
			nobudget=1
			break
		fi
		report_l2 "$k" "$vmlog" "$from"
		echo "# [$k] $why during $from:"
		grep -E "Kernel panic|BUG:|Comm: ($L3_QEMU_COMM)" "$BUILD/vm/$vmname/console.log" |
			head -n 4 | sed 's/^/#   /'
		result ok "[$k] $why during $from; $from and the tests after it run again in a fresh L2 (boot $((attempt + 1)) of at most $max_boots)"
		attempt=$((attempt + 1))
		vmname=check-$rel-$attempt vmlog=$out/vm-$rel-$attempt.log
		run_l2 "$rel" "$from" "$vmname" "$vmlog"
		rc=$?
	done
	from=$(last_test "$vmlog")
	if [ $rc = 124 ] && [ "$nobudget" = 0 ] && [ "$l2_capped" = 1 ] && [ -n "$from" ]; then
		# Killed at make check's own time limit (its timeout was cut
		# to fit CHECK_LIMIT), not at a test's: what did not finish
		# is a skip that says so.
		report_l2 "$k" "$vmlog" "$from"
		result ok "[$k] $from and the L2 tests after it # SKIP the L2 was stopped at make check's time limit (CHECK_LIMIT=$CHECK_LIMIT, ${reserve_left}s kept for the kernels after this one) during $from"
		nobudget=1
	fi
	[ "$nobudget" = 1 ] || report_l2 "$k" "$vmlog" ""
	if [ $rc = 0 ]; then
		result ok "[$k] L2 VM run completed, kernel log clean"
	elif [ "$nobudget" = 1 ]; then
		:
	else
		result "not ok" "[$k] L2 VM run completed, kernel log clean (status $rc)"
		grep '^vmrun:' "$vmlog" | sed 's/^/#   /'
		echo "#   console: $BUILD/vm/$vmname/console.log"
	fi

	# Durability, driven from L1 (it kills whole L2 VMs): a pair of L2 boots
	# per mode, about 3 minutes per full kernel.
	full "$k" || continue
	echo "# durability: selftests/e2e/durability.sh --kernel $rel --blocks 16"
	nres=0
	while IFS= read -r line; do
		case $line in
		"ok - "*) result ok "[$k] durability: ${line#ok - }"; nres=$((nres + 1)) ;;
		"not ok - "*) result "not ok" "[$k] durability: ${line#not ok - }"; nres=$((nres + 1)) ;;
		"#"*) echo "$line" ;;
		esac
	done < <(selftests/e2e/durability.sh --kernel "$rel" --blocks 16 2>&1)
	[ $nres = 4 ] || result "not ok" "[$k] durability: 4 results expected, got $nres"
done

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
