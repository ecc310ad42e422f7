#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# workloads.sh DEV ROW [DEV2 ROW2]: run the benchmark workloads on DEV (in L2 or in
# an L3 guest) and print each fio JSON result between "@@JSON ROW WORKLOAD REP@@" and
# "@@END@@". With DEV2 ROW2 (two disks of one guest, the vhost-blk pair): every
# repetition of a workload runs on both, alternating which goes first (A B, B A,
# A B, ...), so a drift of this noisy host during the run falls on both rows alike.
#
# Every run does a fixed number of I/Os (IOS in all, IOS_QD1 at queue depth 1,
# eight times IOS in the aio-stress shape;
# fio's number_ios, split between its jobs), so every row does the same work.
# Where vbmark is installed (the VM images), each fio run's I/O sits in a
# measurement window of the vbcount TCG plugin (tools/cost-plugin): each fio
# job enters it when its I/O is about to start (exec_prerun, after fio has set
# the job up) and leaves it when its I/O is done (exec_postrun), so fio's own
# start and exit stay outside (about 160 million instructions in L2, varying
# by 10 million from run to run: more than the I/Os of a run cost). "@@WIN ID
# ROW WORKLOAD REP@@" names the window; make bench joins the plugin's counts to
# it (Documentation/benchmarks.rst). Each workload then also has BASE_REPS
# counted runs with an eighth of the I/Os, REPs "base1" to "baseN", first
# (after one uncounted warm-up run of fio per device), whose median count the
# report subtracts: what is left that is not an I/O's (the queue filling and
# draining, the jobs' exec_prerun/postrun shells).
#
# Environment: QUICK=1 (fewer workloads), REPS (default 3), BASE_REPS (default 3,
# 1 with QUICK=1), IOS (default 8192),
# IOS_QD1 (default 2048), SKIP_WLS="name ..." (workloads already measured: a row
# resumed after the flake), WORKLOADS="name ..." (only these; default all),
# MEASURE_CPU=1 (also print "@@CPU ROW WORKLOAD REP BUSY_JIFFIES@@" from /proc/stat,
# and "@@HOST ROW WORKLOAD REP CTXT@@", the context switches meanwhile;
# in an L3 guest the L2 host measures instead, see l2-bench.sh). In an L3 guest also
# "@@GUEST ROW WORKLOAD REP IRQS KICKS BUSY TICKS@@": virtio-blk queue interrupts,
# driver notifications (calls of virtqueue_notify, counted by a kprobe;
# virtio_blk_bio's own counter where kprobes are missing; "-" if neither), the
# guest's own busy jiffies (/proc/stat, all vCPUs) and its local timer interrupts
# (LOC in /proc/interrupts, all vCPUs: each costs VM exits of its own, whatever
# the backend); and first "@@IDLE ROW DRIVER GOVERNOR POLLING@@", its idle loop
# set not to poll (idle_setup below).
# workloads.sh --ksyms (LEVEL=2 or 3): only "@@KSYMS LEVEL RELEASE _TEXT@@",
# where this kernel's text starts (KASLR), after "@@KMOD LEVEL ADDRESS NAME
# MODULE@@" for each function of a loaded module and, in L2 (KSYMS_ALL=1),
# "@@KSYM ADDRESS NAME@@" for each of the kernel's own (Debian's System.map
# is a stub): what make bench's PROFILE=1 names the addresses of a profile
# with (scripts/bench-profile.py; an L3 guest runs the same kernel as L2, at
# another place). In an L3 guest with PROFILE=1, the workloads print them
# first: its virtio and block modules' only, since each byte it prints is
# an exit (its serial port), some milliseconds here.
ksyms() {
	local only=
	[ "$LEVEL" = 3 ] && only='virtio|blk'
	awk -v l="$LEVEL" -v rel="$(uname -r)" -v only="$only" -v all="${KSYMS_ALL:-0}" '
		$2 != "T" && $2 != "t" { next }
		$4 != "" { if (only == "" || $4 ~ only) print "@@KMOD " l " " $1 " " $3 " " $4 "@@"; next }
		$3 == "_text" { text = $1 }
		all == 1 { print "@@KSYM " $1 " " $3 "@@" }
		END { print "@@KSYMS " l " " rel " " (text == "" ? "-" : text) "@@" }' /proc/kallsyms
}
if [ "${1:-}" = --ksyms ]; then
	ksyms
	exit 0
fi

dev=$1 row=$2 dev2=${3:-} row2=${4:-}
# L2's answers (wait_l2): the port set raw, no echo, no modem lines.
ack_in=
if [ "${MEASURE_CPU:-0}" != 1 ] && [ -n "${ACK:-}" ]; then
	if [ -c "$ACK" ] && stty -F "$ACK" raw -echo clocal 2>/dev/null &&
	   { exec 7<"$ACK"; } 2>/dev/null; then
		ack_in=$ACK
		echo "# L2 answers on $ACK"
	else
		echo "# no answer from L2: $ACK cannot be used; half a second after START and JSON"
	fi
fi
here=$(dirname "$0")
reps=${REPS:-3}
base_reps=3
[ "${QUICK:-0}" = 1 ] && base_reps=1
[ -n "${BASE_REPS:-}" ] && base_reps=$BASE_REPS
ios=${IOS:-8192} ios_qd1=${IOS_QD1:-2048}
if [ "${QUICK:-0}" = 1 ]; then
	# the four shapes the 4k targets are judged on, and a sequential one
	wls="4k-rand:randread:32:1 4k-rand:randwrite:32:1 4k-rand:randread:16:8 4k-rand:randwrite:16:8
	     16k-qd74:write"
else
	wls="4k-rand:randread:1:1 4k-rand:randwrite:1:1 4k-rand:randread:32:1 4k-rand:randwrite:32:1
	     4k-rand:randread:128:1 4k-rand:randwrite:128:1 4k-rand:randread:16:8 4k-rand:randwrite:16:8
	     16k-qd74:randwrite 16k-qd74:write
	     aio-stress:write aio-stress:read aio-stress:randwrite aio-stress:randread"
fi
export MAXTIME=${MAXTIME:-120}
# Each fio job stays on one CPU (the fio files: cpus_allowed_policy=split,
# jobs round-robin over the CPUs): a job the scheduler moves from CPU to
# CPU moves from queue to queue, and each move leaves a queue's batching to
# start again (one job at QD 32 was seen split 68/32 to 15/85 between two
# queues in runs of one row).
ncpu=0
for c in /sys/devices/system/cpu/cpu[0-9]*; do ncpu=$((ncpu + 1)); done
export FIO_CPUS=0-$((ncpu > 0 ? ncpu - 1 : 0))

# Counters read with shell builtins only: a fork in L2 or L3 is a million
# instructions or so, and the window counts the whole machine.
busy() { local c u n s i w q sq st; read -r c u n s i w q sq st _ </proc/stat; echo $((u + n + s + q + sq + st)); }
ctxt() { local k v; while read -r k v _; do [ "$k" = ctxt ] && { echo "$v"; return; }; done </proc/stat; }
# In an L3 guest: interrupts of the virtio-blk request queues ("-" elsewhere),
# then its local timer interrupts, all vCPUs: "QUEUE TIMER".
virq() {
	local l f s n=0 t=0 seen=0
	while read -r l; do
		case $l in LOC:* | *virtio*-req*) ;; *) continue ;; esac
		s=0
		set -- $l; shift
		for f; do case $f in *[!0-9]*) break ;; *) s=$((s + f)) ;; esac; done
		case $l in LOC:*) t=$((t + s)) ;; *) n=$((n + s)) seen=1 ;; esac
	done </proc/interrupts
	[ $seen = 1 ] && echo "$n $t" || echo "- -"
}
# Notifications to the device: the kprobe's hit count, else virtio_blk_bio's.
kprobe=
if [ "$(virq)" != "- -" ] && [ -w /sys/kernel/tracing/kprobe_events ]; then
	t=/sys/kernel/tracing
	# Counting only: the hit count grows with tracing off.
	echo 0 >$t/tracing_on
	if echo 'p:vbkick virtqueue_notify' >>$t/kprobe_events 2>/dev/null &&
	   echo 1 >$t/events/kprobes/vbkick/enable 2>/dev/null; then
		kprobe=$t/kprobe_profile
	fi
fi
kicks() { # dev
	local k v _x
	if [ -n "$kprobe" ]; then
		while read -r k v _x; do [ "$k" = vbkick ] && { echo "$v"; return; }; done <"$kprobe"
	fi
	if [ -r "/sys/block/${1#/dev/}/driver_stats" ]; then
		while read -r k v; do [ "$k" = notifies ] && { echo "$v"; return; }; done \
			<"/sys/block/${1#/dev/}/driver_stats"
	fi
	echo -
}
mark=
command -v vbmark >/dev/null && mark=vbmark
# A window id unique across guests and boots: 60 random bits.
winid() { local u; read -r u </proc/sys/kernel/random/uuid; u=${u//-/}; echo $((16#${u:0:15})); }
# The L3 guest's idle loop must not poll: a vCPU that spins before it halts
# (the haltpoll cpuidle driver and governor, or any driver's POLL state)
# spins for a time that depends on timing, and the window counts every spin.
# In an L3 guest (not MEASURE_CPU, which is L2 or a host with KVM, left
# alone): haltpoll's guest_halt_poll_ns to 0 and the menu governor in its
# place where it is in use, every POLL idle state disabled; then print
# "@@IDLE ROW DRIVER GOVERNOR POLLING@@" (POLLING: off, or on if that failed),
# which the report shows and flags (Documentation/benchmarks.rst).
idle_setup() {
	local c=/sys/devices/system/cpu/cpuidle p=/sys/module/haltpoll/parameters/guest_halt_poll_ns
	local drv=none gov=- poll=off s n x
	[ -r $c/current_driver ] && read -r drv <$c/current_driver
	if [ -r $c/current_governor ]; then read -r gov <$c/current_governor
	elif [ -r $c/current_governor_ro ]; then read -r gov <$c/current_governor_ro; fi
	if [ "$drv" = haltpoll ] || [ "$gov" = haltpoll ]; then
		[ -w $p ] && echo 0 >$p
		if [ "$gov" = haltpoll ] && [ -w $c/current_governor ]; then
			echo menu >$c/current_governor 2>/dev/null
			read -r gov <$c/current_governor
		fi
	fi
	for s in /sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*; do
		[ -r "$s/name" ] || continue
		read -r n <"$s/name"
		[ "$n" = POLL ] || continue
		echo 1 >"$s/disable" 2>/dev/null
		x=0; [ -r "$s/disable" ] && read -r x <"$s/disable"
		[ "$x" = 1 ] || poll=on
	done
	# the haltpoll governor polls whatever the states say, unless told 0
	if [ "$gov" = haltpoll ]; then
		x=-; [ -r $p ] && read -r x <$p
		[ "$x" = 0 ] || poll=on
	fi
	echo "# $1: L3 cpuidle driver $drv, governor $gov, polling $poll"
	echo "@@IDLE $1 $drv $gov $poll@@"
}
if [ "${MEASURE_CPU:-0}" != 1 ]; then
	idle_setup "$row"
	[ -n "$row2" ] && idle_setup "$row2"
	[ "${PROFILE:-0}" = 1 ] && LEVEL=3 ksyms
fi

# wait_l2: in an L3 guest of make bench, L2 reads its counters when the
# START and JSON lines reach it (l2-bench.sh, follow_l3), late at times: the
# serial port sends a byte per VM exit, and L2's follower shares its CPUs
# with this guest (seen: 512 I/Os, a fixed half second after START, and L2
# read START after the run: 0 requests counted). L2 answers each of those
# lines with one on ACK, a serial port of its own: the guest waits for it,
# 30 s at most. Without ACK, or once L2 has not answered, half a second.
wait_l2() {
	local a
	[ "${MEASURE_CPU:-0}" = 1 ] && return
	if [ -n "$ack_in" ]; then
		read -r -t 30 -u 7 a && return
		echo "# no answer from L2 within 30 s: half a second after START and JSON from here on"
		exec 7<&-
		ack_in=
	fi
	sleep 0.5
}

run_one() { # dev row name rep
	local d=$1 r=$2 name=$3 rep=$4 b0 b1 c0 c1 q0 q1 t0 t1 k0 k1 k rc id= win
	echo "@@START $r $name $rep@@"
	# Outside the cost window, so no count includes the wait.
	wait_l2
	b0=$(busy) c0=$(ctxt) q0=$(virq) k0=$(kicks "$d")
	t0=${q0#* } q0=${q0% *}
	# fio appends a redirection of the command's output to a file of
	# its own; the "#" makes it a comment (no file written in the window).
	win=()
	[ -n "$mark" ] && id=$(winid) &&
		win=(--exec_prerun="$mark enter $id #" --exec_postrun="$mark leave $id #")
	DEV=$d fio --output-format=json "${win[@]}" "$here/fio/$job.fio" >/tmp/fio.json 2>/tmp/fio.err
	rc=$?
	b1=$(busy) c1=$(ctxt) q1=$(virq) k1=$(kicks "$d")
	t1=${q1#* } q1=${q1% *}
	if [ $rc = 0 ]; then
		[ -n "$id" ] && echo "@@WIN $id $r $name $rep@@"
		echo "@@JSON $r $name $rep@@"
		# L2's counters must not take in the JSON's serial output
		# (seen: 0.4 port I/O exits an I/O).
		wait_l2
		# One line, indentation dropped: in an L3 guest every byte
		# is a VM exit on the serial port (6.7 KB -> 4.3 KB a run).
		sed -n '/^{/,$ s/^[[:space:]]*//p' /tmp/fio.json | tr -d '\n'
		echo
		echo "@@END@@"
		if [ "${MEASURE_CPU:-0}" = 1 ]; then
			echo "@@CPU $r $name $rep $((b1 - b0))@@"
			echo "@@HOST $r $name $rep $((c1 - c0))@@"
		fi
		if [ "${MEASURE_CPU:-0}" != 1 ] && [ "$q0" != - ]; then
			k=-; [ "$k0" != - ] && [ "$k1" != - ] && k=$((k1 - k0))
			echo "@@GUEST $r $name $rep $((q1 - q0)) $k $((b1 - b0)) $((t1 - t0))@@"
		fi
	else
		echo "@@FAIL $r $name $rep fio exit $rc: $(tail -n 3 /tmp/fio.err | tr '\n' ' ')@@"
	fi
}

warm=
for wl in $wls; do
	IFS=: read -r job RW QD JOBS <<<"$wl"
	export RW QD=${QD:-1} JOBS=${JOBS:-1}
	case $job in
	4k-rand) name=4k-$RW-qd$QD; [ "$JOBS" != 1 ] && name=$name-j$JOBS ;;
	16k-qd74) name=16k-$RW-qd74 ;;
	aio-stress) name=aio-stress-8k-$RW-t64; JOBS=64 ;;
	esac
	case " ${SKIP_WLS:-} " in *" $name "*) echo "# $row: $name already measured"; continue ;; esac
	[ -z "${WORKLOADS:-}" ] || case " $WORKLOADS " in *" $name "*) ;; *) continue ;; esac
	# The aio-stress shape's 64 jobs start and stop one by one: at IOS
	# I/Os (128 a job) that staggering is what a run counts (run to run
	# 8-46 % apart, here); eight times as many keep them within 1-3 %.
	n=$ios; case $name in *-qd1) n=$ios_qd1 ;; aio-stress-*) n=$((ios * 8)) ;; esac
	nios=$(((n + JOBS - 1) / JOBS))
	# The base runs: an eighth of the I/Os, so that the report can take
	# what every window holds besides its I/Os (the queue filling and
	# draining, the jobs' prerun and postrun shells) out of the count:
	# cost per I/O = (run - base) / (I/Os - base I/Os), base the median
	# of the base runs.
	if [ -n "$mark" ]; then
		[ -z "$warm" ] && { NIOS=$(((nios + 7) / 8)) DEV=$dev fio "$here/fio/$job.fio" >/dev/null 2>&1; warm=1; }
		export NIOS=$(((nios + 7) / 8))
		for b in $(seq 1 "$base_reps"); do
			if [ -z "$dev2" ] || [ $((b % 2)) = 1 ]; then
				run_one "$dev" "$row" "$name" "base$b"
				[ -n "$dev2" ] && run_one "$dev2" "$row2" "$name" "base$b"
			else
				run_one "$dev2" "$row2" "$name" "base$b"
				run_one "$dev" "$row" "$name" "base$b"
			fi
		done
	fi
	export NIOS=$nios
	for rep in $(seq 1 "$reps"); do
		if [ -z "$dev2" ]; then
			run_one "$dev" "$row" "$name" "$rep"
		elif [ $((rep % 2)) = 1 ]; then
			run_one "$dev" "$row" "$name" "$rep"
			run_one "$dev2" "$row2" "$name" "$rep"
		else
			run_one "$dev2" "$row2" "$name" "$rep"
			run_one "$dev" "$row" "$name" "$rep"
		fi
	done
done
# In an L3 guest: L2 reads its counters for the last run when that run's
# JSON line reaches it, and the devices (and their counters) go away when
# this guest ends.
[ "${MEASURE_CPU:-0}" = 1 ] || sleep 1
exit 0
