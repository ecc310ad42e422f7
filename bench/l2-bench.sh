#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# l2-bench.sh: runs inside the L2 VM (scripts/bench.sh boots it). Every row of the
# benchmark, on the same backing device, in this one boot:
#   native          fio in L2 on the device itself (the limit)
#   qemu-threads    L3 guest, QEMU virtio-blk aio=threads, stock virtio_blk
#   qemu-native     ... aio=native + iothread, stock virtio_blk
#   qemu-io_uring   ... aio=io_uring + iothread, stock virtio_blk
#   vbb-mq-qemu     ... aio=native + iothread, virtio_blk_bio use_bio=0 (vs stock)
#   qsd             qemu-storage-daemon vhost-user-blk export, stock virtio_blk
#   vhost-blk-mq    vhost-blk-bridge + /dev/vhost-blk, virtio_blk_bio use_bio=0
#   vhost-blk-bio   vhost-blk-bridge + /dev/vhost-blk, virtio_blk_bio use_bio=1
#   selftest-load   host only: vhost_blk_test's load mode on /dev/vhost-blk
# Backing devices (BACKENDS): nullb (null_blk, irqmode=0: completes inline),
# nullb-lat (null_blk completing from a timer NULLB_LAT_NS, default 30 us, later)
# file (a file on ext4 on a brd RAM disk) and nbd (nullb0 served by qemu-nbd
# from a network namespace of its own over veth, attached by nbd-client:
# bench/netns.sh; nullb's workloads, the rows of the targets); nullb-lat and
# file with a shorter workload list and only the rows of the targets. REPEAT_ROW=ROW (default
# qemu-native; empty: none) measures ROW again at the end of the first backend
# (nullb unless BACKENDS says otherwise), as ROW@2,
# in a new L3 boot, with the module parameters REPEAT_PARAMS
# ("vhost_blk.NAME=VALUE ..."; "A|B|..." adds ROW@3 with B, and so on) if
# given, on the workloads REPEAT_WORKLOADS
# (default: all of the run's; QUICK: one, 4k-randread-qd32 or the first of
# WORKLOADS); PARAMS sets module parameters for the whole run.
# Results are printed as fio JSON blocks (bench/workloads.sh) plus @@CPU lines: L2
# CPU time per workload, and for L3 rows @@KVM lines: the L3 guest's VM exits and
# injected interrupts, vhost_blk's requests, completion batches, waits and looks, and the exits
# for HLT and for L2's own interrupts, per workload,
# and @@HOST lines: L2's context switches (host wakeups). Each fio run is a cost
# window of the vbcount plugin when L2 runs under TCG with it (workloads.sh).
export QUICK=${QUICK:-0} REPS=${REPS:-3} WORKLOADS=${WORKLOADS:-} IOS=${IOS:-} IOS_QD1=${IOS_QD1:-} BASE_REPS=${BASE_REPS:-} RUNTIME=${RUNTIME:-}
# Default rows: all of them on null_blk; on the file backend (and in a QUICK
# run, which has no file backend) the rows the targets compare. ROWS set by the
# caller applies to every backend.
TARGET_ROWS="native qemu-native qsd vhost-blk-mq vhost-blk-bio"
if [ "$QUICK" = 1 ]; then
	BACKENDS=${BACKENDS:-nullb}
	ROWS=${ROWS:-$TARGET_ROWS selftest-load}
	# One row measured twice in this L2 boot even so, on one workload
	# (an L3 boot and five fio runs more): its spread is the run's
	# repeatability.
	REPEAT_ROW=${REPEAT_ROW-qemu-native}
	set -- $WORKLOADS
	REPEAT_WORKLOADS=${REPEAT_WORKLOADS-${1:-4k-randread-qd32}}
	set --
else
	BACKENDS=${BACKENDS:-nullb nullb-lat file nbd}
	FILE_ROWS=${ROWS:-$TARGET_ROWS}
	REPEAT_ROW=${REPEAT_ROW-qemu-native}
	ROWS=${ROWS:-native qemu-threads qemu-native qemu-io_uring vbb-mq-qemu qsd vhost-blk-mq vhost-blk-bio selftest-load}
fi
# Where this script and its companions are (/src/bench in the L2 image); the
# L3 guest always has them at /src/bench.
here=${BENCH_DIR:-$(cd "$(dirname "$0")" && pwd)}
l3mem=1G
# The L3 guests get L3_CPUS vCPUs and every device that many queues: by
# default one fewer than L2 has CPUs (at least one; 2 on a host with KVM), so
# that, pinned (below) with the default PIN_CPU, no vCPU shares an L2 CPU with
# the backend. Sharing
# one, the backend ran when L2's scheduler let it, and how much each of its
# notifications batched came from that, in every row alike
# (Documentation/benchmarks.rst, "Making counts repeat").
l2cpus=0
for c in /sys/devices/system/cpu/cpu[0-9]*; do l2cpus=$((l2cpus + 1)); done
l3cpus=${L3_CPUS:-}
if [ -z "$l3cpus" ]; then
	l3cpus=$((l2cpus > 1 ? l2cpus - 1 : 1))
	[ "${HOST_MODE:-0}" = 1 ] && l3cpus=2
fi
queues=$l3cpus

note() { echo "# $*"; }
mount -t debugfs none /sys/kernel/debug 2>/dev/null

# hostsnap: L2's counters into H_* with shell builtins only (no fork: while a
# cost window is open every instruction of L2 counts): busy jiffies and
# context switches (/proc/stat); KVM's VM exits and injected interrupts,
# summed over the VMs of L2 (one L3 at a time); vhost_blk's requests,
# completion batches (one guest notification each), waits (passes that
# waited for the guest's burst: fetch batches) and the looks at the ring
# during those waits (each a timer of L2's), 0 0 0 0 without vhost_blk.
hostsnap() {
	local c u n s i w q sq st x k v f
	read -r c u n s i w q sq st x </proc/stat
	H_BUSY=$((u + n + s + q + sq + st))
	H_CTXT=0
	while read -r k v x; do [ "$k" = ctxt ] && { H_CTXT=$v; break; }; done </proc/stat
	H_EXITS=0 H_INJ=0 H_REQS=0 H_BATCH=0 H_HALT=0 H_HIRQ=0 H_WAIT=0 H_LOOK=0
	[ -r /sys/kernel/debug/kvm/exits ] && read -r H_EXITS </sys/kernel/debug/kvm/exits
	[ -r /sys/kernel/debug/kvm/irq_injections ] && read -r H_INJ </sys/kernel/debug/kvm/irq_injections
	# Two kinds of exit by reason: the guest idle (HLT), and an interrupt
	# of L2's own (a timer, an IPI that kicks the vCPU to inject one).
	[ -r /sys/kernel/debug/kvm/halt_exits ] && read -r H_HALT </sys/kernel/debug/kvm/halt_exits
	[ -r /sys/kernel/debug/kvm/irq_exits ] && read -r H_HIRQ </sys/kernel/debug/kvm/irq_exits
	for f in /sys/kernel/debug/vhost-blk/[0-9]*/stats; do
		[ -r "$f" ] || continue
		while read -r k v x; do
			case $k in
			reqs) H_REQS=$((H_REQS + v)) ;;
			batches) H_BATCH=$((H_BATCH + v)) ;;
			batch_waits) H_WAIT=$((H_WAIT + v)) ;;
			batch_looks) H_LOOK=$((H_LOOK + v)) ;;
			esac
		done <"$f"
	done
}

modprobe null_blk nr_devices=1 queue_mode=2 irqmode=0 submit_queues=$queues \
	hw_queue_depth=256 gb=4 || exit 1
# HOST_MODE=1: this runs on a host with KVM itself (scripts/bench.sh there),
# not in an L2 VM: vhost_blk from VHOST_BLK_KO if it is not loaded, and the
# host's KVM settings are left alone.
if [ -n "${VHOST_BLK_KO:-}" ] && [ ! -d /sys/module/vhost_blk ]; then
	modprobe vhost && insmod "$VHOST_BLK_KO" || note "vhost_blk did not load from $VHOST_BLK_KO"
else
	modprobe vhost_blk || note "vhost_blk did not load"
fi
modprobe kvm_amd 2>/dev/null || modprobe kvm_intel 2>/dev/null
# Halt polling spins for a while each time an L3 vCPU halts; how long depends
# on timing, and every spin is counted: off, so counts repeat.
if [ "${HOST_MODE:-0}" != 1 ] && [ -w /sys/module/kvm/parameters/halt_poll_ns ]; then
	echo 0 >/sys/module/kvm/parameters/halt_poll_ns
	note "kvm halt_poll_ns $(cat /sys/module/kvm/parameters/halt_poll_ns) (halt polling off: counts repeat)"
fi
# For the report (its settings for repeatable counts): what it is now.
echo "@@SET halt_poll_ns $(cat /sys/module/kvm/parameters/halt_poll_ns 2>/dev/null || echo -)@@"
# QEMU_POLL_NS: poll-max-ns of the QEMU rows' iothread (unset: QEMU's own
# adaptive polling, up to 32 us); vhost_blk's rows do not poll.
echo "@@SET qemu_poll_ns ${QEMU_POLL_NS:-default}@@"
# NULLB_LAT_NS: how long nullb-lat takes to complete a request.
echo "@@SET nullb_lat_ns ${NULLB_LAT_NS:-30000}@@"
# DEVICE_OPTS: properties added to every L3 disk of the QEMU, qsd and
# vhost_blk rows (virtio-blk-pci and vhost-user-blk-pci alike), for example
# "indirect_desc=off,queue-size=256": the same for every row compared.
dev_opts=${DEVICE_OPTS:+,$DEVICE_OPTS}
echo "@@SET device_opts ${DEVICE_OPTS:-none}@@"
# L3_HPET: whether the L3 guests have an HPET (off by default). Linux ticks
# from the HPET at boot and, when the local APIC timers take over, only
# clears the comparator's interrupt enable: its periodic mode stays, and
# QEMU's model keeps that timer running whether it may interrupt or not. In
# every row that is QEMU's main loop waking at the guest's HZ (250 here),
# each time lowering that timer's interrupt line in KVM, and an L2 timer
# that interrupts whichever L3 vCPU runs on its CPU. "l3.hpet=on" in PARAMS or
# REPEAT_PARAMS sets it for the run or for a ROW@N.
L3_HPET=${L3_HPET:-off}
case $L3_HPET in on|off) ;; *) note "L3_HPET=$L3_HPET: on or off; off"; L3_HPET=off ;; esac

# EXIT_REASONS=1: what the L3 exits of each run were, by reason: hist
# triggers on KVM's kvm_exit (its exit code: SVM's or VMX's) and kvm_msr
# (which MSR, read or write) tracepoints, and on L2's hrtimer expiries (by
# the timer's function: where L2's own interrupts come from), cleared at
# each run's start and read at its end:
# "@@EXITR ROW WL REP CODE:N ... MSR/W:N ... hrtFUNCTION:N ...@@" (hex).
# A diagnostic: every exit then also runs the trigger, and that is counted,
# so the run's counts are not comparable with others (settings: on).
EXR_KEYS=hist:keys=exit_reason.hex:size=256
MSR_KEYS=hist:keys=ecx.hex,write:size=256
HRT_KEYS=hist:keys=function.sym:size=256
EXR_EV=/sys/kernel/tracing/events/kvm
HRT_EV=/sys/kernel/tracing/events/timer/hrtimer_expire_entry
exitr=0
if [ "${EXIT_REASONS:-0}" = 1 ]; then
	[ -d $EXR_EV ] || mount -t tracefs none /sys/kernel/tracing 2>/dev/null
	if echo "$EXR_KEYS" >$EXR_EV/kvm_exit/trigger 2>/dev/null &&
	   echo "$MSR_KEYS" >$EXR_EV/kvm_msr/trigger 2>/dev/null &&
	   echo "$HRT_KEYS" >$HRT_EV/trigger 2>/dev/null; then
		exitr=1
		note "exit reasons: hist triggers on kvm_exit, kvm_msr and hrtimer_expire_entry (counts perturbed)"
	else
		note "exit reasons: no hist trigger on KVM's tracepoints here (CONFIG_HIST_TRIGGERS?)"
	fi
fi
echo "@@SET exit_reasons $([ $exitr = 1 ] && echo on || echo off)@@"
# PROFILE=1 (make bench loads the plugin with profile=): where each run's
# instructions went. A block callback slows the machine, so exits are not
# the bench's (settings: on). The addresses are turned into names from
# this kernel's layout (workloads.sh --ksyms), printed again once each
# backend is set up (it may have loaded modules).
echo "@@SET profile $([ "${PROFILE:-0}" = 1 ] && echo on || echo off)@@"
ksyms_done=0

# exitr_read: the three histograms as "CODE:N ... MSR/W:N ... hrtFUNC:N"
# in EXITR; builtins only. Lines look like "{ exit_reason: 0x78 } hitcount:
# 12", "{ ecx: 0x830, write: 1 } hitcount: 3" and "{ function:
# [ffffffff81234560] tick_nohz_handler } hitcount: 40" (a module's
# function is followed by "[module]").
exitr_read() {
	local l
	EXITR=
	while read -r l; do
		set -- $l
		[ "$1 $2" = "{ exit_reason:" ] && [ "$5" = hitcount: ] &&
			EXITR="$EXITR $3:$6"
	done <$EXR_EV/kvm_exit/hist
	while read -r l; do
		set -- $l
		[ "$1 $2" = "{ ecx:" ] && [ "$7" = hitcount: ] &&
			EXITR="$EXITR msr${3%,}/$5:$8"
	done <$EXR_EV/kvm_msr/hist
	while read -r l; do
		set -- $l
		[ "$1 $2" = "{ function:" ] && EXITR="$EXITR hrt$4:${*: -1}"
	done <$HRT_EV/hist
}

# follow_l3 FILE PID: pass an L3 guest's output (l3run's output file) on as it
# comes, line by line, until PID (that l3run) has ended, so a row cut short
# (its L3 or L2 died) keeps the runs it finished; and measure L2's CPU, context
# switches (host wakeups) and KVM's counters between each run's START and JSON
# markers: "@@CPU ROW WL REP JIFFIES@@", "@@KVM ROW WL REP EXITS INJECTIONS REQS
# BATCHES HLT_EXITS IRQ_EXITS WAITS LOOKS@@" and "@@HOST ROW WL REP CTXT@@" follow the run's @@END@@. Fork-free
# per line: tail follows the file with inotify.
follow_l3() {
	local f=$1 pid=$2 line pending= b0 c0 e0 i0 r0 t0 h0 q0 w0 l0 x
	tail -n +1 -F --pid="$pid" "$f" 2>/dev/null | while IFS= read -r line; do
		line=${line%$'\r'}
		case $line in
		@@VM-EXIT*) continue ;;
		@@START*)
			hostsnap
			b0=$H_BUSY c0=$H_CTXT e0=$H_EXITS i0=$H_INJ r0=$H_REQS t0=$H_BATCH
			h0=$H_HALT q0=$H_HIRQ w0=$H_WAIT l0=$H_LOOK
			if [ $exitr = 1 ]; then
				echo "$EXR_KEYS:clear" >>$EXR_EV/kvm_exit/trigger
				echo "$MSR_KEYS:clear" >>$EXR_EV/kvm_msr/trigger
				echo "$HRT_KEYS:clear" >>$HRT_EV/trigger
			fi
			echo go >&8 ;;
		@@JSON*)
			hostsnap
			echo go >&8
			x=${line//@@/}; set -- $x
			pending="@@CPU $2 $3 $4 $((H_BUSY - b0))@@
@@KVM $2 $3 $4 $((H_EXITS - e0)) $((H_INJ - i0)) $((H_REQS - r0)) $((H_BATCH - t0)) $((H_HALT - h0)) $((H_HIRQ - q0)) $((H_WAIT - w0)) $((H_LOOK - l0))@@
@@HOST $2 $3 $4 $((H_CTXT - c0))@@"
			if [ $exitr = 1 ]; then
				exitr_read
				pending="$pending
@@EXITR $2 $3 $4$EXITR@@"
			fi ;;
		@@END@@)
			printf '%s\n' "$line"
			[ -n "$pending" ] && printf '%s\n' "$pending"
			pending=
			continue ;;
		esac
		printf '%s\n' "$line"
	done | tee -a /tmp/l3-results.log
}

# Where L3's threads run in L2 (PIN=0: wherever L2's scheduler puts them).
# Unpinned, the scheduler moves the guest's vCPUs and the backend's threads
# between L2's CPUs from run to run (a vCPU's share of the count was seen to
# go from 29 % to 67 % between runs of one row), and how much each
# notification batches, so the exits and instructions per I/O, moves with
# them. Pinned, every row gets the same layout: L3 vCPU i on L2 CPU i (modulo
# L2's CPUs), and everything that serves the disk (QEMU's main loop and
# iothread, qemu-storage-daemon, vhost-blk-bridge and vhost_blk's workers) on
# L2's last CPU, PIN_CPU. With L2's two CPUs and the default one vCPU, the
# guest runs on CPU 0 and the backend alone on CPU 1 (with L3_CPUS=2, vCPU 1
# shares CPU 1 with the backend; a one-job workload runs on vCPU 0, fio's
# split policy).
PIN=${PIN:-1}
[ "${HOST_MODE:-0}" = 1 ] && PIN=0
PIN_CPU=${PIN_CPU:-$((l2cpus - 1))}
if [ "$PIN" = 1 ] && command -v taskset >/dev/null; then
	note "pinned: L3 vCPU i on L2 CPU i mod $l2cpus, the backend's threads on CPU $PIN_CPU"
	echo "@@SET pin vcpus-mod-$l2cpus,backend-cpu$PIN_CPU@@"
else
	PIN=0
	echo "@@SET pin off@@"
fi
# "${pinned[@]}" COMMAND...: COMMAND on PIN_CPU (its threads inherit the
# mask); taskset execs it, so $! of a command started so is the command's.
pinned=()
[ "$PIN" = 1 ] && pinned=(taskset -c "$PIN_CPU")

# pin_l3 N: once the guest of l3run.N has printed (its QEMU's threads and
# devices are set up; no window is open yet; gives up after 120 s), pins its
# threads (pin_l3_threads). With PROFILE=1, then prints the executable
# mappings of L2's processes, "@@UMAP PID COMM MAPPING@@" (/proc/PID/maps),
# so that bench-profile.py tells L2's user space apart by file.
pin_l3() {
	local n=$1 p c m tries=0
	[ "$PIN" = 1 ] || [ "${PROFILE:-0}" = 1 ] || return 0
	while [ ! -s /tmp/l3run.$n/output.log ] && [ $tries -lt 1200 ]; do
		sleep 0.1; tries=$((tries + 1))
	done
	[ "$PIN" = 1 ] && pin_l3_threads "$n"
	[ "${PROFILE:-0}" = 1 ] || return 0
	for p in /proc/[0-9]*; do
		read -r c <"$p/comm" 2>/dev/null || continue
		while read -r m; do
			case $m in *" r-xp "*) echo "@@UMAP ${p#/proc/} $c $m@@" ;; esac
		done <"$p/maps" 2>/dev/null
	done
}

# pin_l3_threads N: the vCPU i ("CPU i/KVM") of l3run.N's QEMU on CPU i mod
# l2cpus, and vhost_blk's workers on PIN_CPU: on 6.1 they are kernel
# threads "vhost-PID" that do not inherit the bridge's mask.
pin_l3_threads() {
	local n=$1 p q= t c i args done= k=0
	for p in /proc/[0-9]*; do
		mapfile -d '' args <"$p/cmdline" 2>/dev/null || continue
		case " ${args[*]} " in *" /tmp/l3run.$n/initrd.img "*)
			[ "${args[0]##*/}" = qemu-system-x86_64 ] && q=${p#/proc/} ;;
		esac
	done
	for t in ${q:+/proc/$q/task/*}; do
		read -r c <"$t/comm" 2>/dev/null || continue
		case $c in "CPU "*"/KVM")
			i=${c#CPU }; i=${i%/KVM}
			taskset -p -c $((i % l2cpus)) "${t##*/}" >/dev/null &&
				done="$done vCPU$i:$((i % l2cpus))" ;;
		esac
	done
	for t in /proc/[0-9]*; do
		read -r c <"$t/comm" 2>/dev/null || continue
		case $c in vhost-[0-9]*)
			taskset -p -c "$PIN_CPU" "${t#/proc/}" >/dev/null 2>&1 && k=$((k + 1)) ;;
		esac
	done
	note "L3 guest $n pinned:${done:- no vCPU thread found}; vhost kernel threads: $k"
}

# l3_row ROW DRIVER-SETUP QEMU_ARGS...: one L3 boot measuring ROW on its disk
# /dev/vda. With PAIR_ROW set (the vhost-blk rows), the guest has two disks and
# measures ROW on vda (request path) and PAIR_ROW on vdb (bio path) in
# alternation; DRIVER-SETUP is not used then.
l3_row() {
	local row=$1 setup=$2; shift 2
	local n=0 f=/tmp/l3-${row//\//-}
	while [ -e /tmp/l3run.$n ]; do n=$((n + 1)); done
	{
		echo "modprobe virtio_pci 2>/dev/null"
		if [ -n "${PAIR_ROW:-}" ]; then
			l3_pair_phase "$row" "$PAIR_ROW"
		else
			l3_phase "$row" "$setup"
		fi
	} >$f.sh
	rm -f /tmp/watch.stop /tmp/l3-stalled
	# The guest's START and JSON lines wait for follow_l3's answer, a line
	# on the guest's ttyS2 (workloads.sh, ACK): its input is a FIFO, held
	# open here for writing, so QEMU's open of it returns at once.
	local ack=/tmp/l3-ack.$n
	rm -f $ack
	if ! mkfifo $ack; then
		echo "@@FAIL $row - cannot make $ack@@"
		[ -n "${PAIR_ROW:-}" ] && echo "@@FAIL $PAIR_ROW - cannot make $ack (measured in the L3 boot of $row)@@"
		return 1
	fi
	exec 8<>$ack
	# The guest's output reaches ours through follow_l3; $f.out keeps
	# l3run's and vmrun's own messages.
	# debug-threads: QEMU names its vCPU threads "CPU i/KVM" (pin_l3);
	# -s 0: no heartbeat in the guest or watcher in L2 while they are
	# counted (the ack port is ttyS2; stall_guard watches for a stop)
	"${pinned[@]}" l3run -t 1800 -s 0 -m $l3mem -c $l3cpus $f.sh -name "l3-$n,debug-threads=on" \
		-machine hpet=$L3_HPET \
		-chardev file,id=ack,path=/dev/null,input-path=$ack -device isa-serial,chardev=ack,index=2 "$@" \
		>/dev/null 2>$f.out &
	local lpid=$!
	pin_l3 $n &
	local ppid=$!
	follow_l3 /tmp/l3run.$n/output.log $lpid &
	local wpid=$!
	stall_guard /tmp/l3run.$n &
	local gpid=$!
	wait $lpid
	local rc=$?
	touch /tmp/watch.stop
	wait $wpid $gpid $ppid
	exec 8>&-
	rm -f $ack
	cat $f.out
	# An L3 that reset itself with no message, or that stopped making any
	# progress (the nested-SVM-under-TCG flakes, Documentation/testing.rst):
	# the row runs again in a new L3 guest, said, resuming after the
	# workloads it finished; again while each boot finishes a workload, at
	# most 4 boots a row.
	local why=
	if [ $rc = 125 ] && grep -q 'VM ended without reporting an exit status (qemu rc=0)' $f.out; then
		why="the L3 guest reset itself without a message"
	elif [ -e /tmp/l3-stalled ]; then
		why="the L3 guest printed nothing for ${STALL_SECS}s and was stopped"
	fi
	local tries=${L3_TRIES:-1} finished
	finished=$($here/done-workloads.sh /tmp/l3-results.log "$row" ${PAIR_ROW:+"$PAIR_ROW"} | tr '\n' ' ')
	finished=${finished% }
	if [ -n "$why" ] && [ "$tries" -lt 4 ] && { [ "$tries" = 1 ] || [ "$finished" != "${L3_PREV_DONE:-}" ]; }; then
		echo "@@RERUN $row - $why; the row ran again (L3 boot $((tries + 1)))${finished:+ after the workloads it had finished ($finished)}@@"
		SKIP_WLS="${SKIP_WLS:-} $finished" L3_TRIES=$((tries + 1)) L3_PREV_DONE=$finished \
			l3_row "$row" "$setup" "$@"
		return
	fi
	if [ $rc != 0 ]; then
		echo "@@FAIL $row - l3run exit $rc${why:+ ($why)}@@"
		[ -n "${PAIR_ROW:-}" ] && echo "@@FAIL $PAIR_ROW - l3run exit $rc${why:+ ($why)} (measured in the L3 boot of $row)@@"
	fi
}

# l3_phase ROW SETUP: the L3 script's part for one row.
l3_phase() {
	cat <<X
$2 || { echo "@@FAIL $1 - in L3: $2 failed@@"; exit 1; }
for i in \$(seq 1 40); do [ -b /dev/vda ] && break; sleep 0.25; done
[ -b /dev/vda ] || { echo "@@FAIL $1 - no /dev/vda in L3@@"; exit 1; }
echo none >/sys/block/vda/queue/scheduler 2>/dev/null
QUICK=$QUICK REPS=$REPS WORKLOADS='$WORKLOADS' IOS='$IOS' IOS_QD1='$IOS_QD1' BASE_REPS='$BASE_REPS' SKIP_WLS='${SKIP_WLS:-}' PROFILE='${PROFILE:-0}' ACK=/dev/ttyS2 /src/bench/workloads.sh /dev/vda $1
X
}

# l3_pair_phase ROW ROW2: virtio_blk_bio binds both disks on the request path,
# then vdb moves to the bio path (use_bio written, vdb unbound and bound);
# workloads.sh alternates between them.
l3_pair_phase() {
	cat <<X
fail() { echo "@@FAIL $1 - in L3: \$*@@"; echo "@@FAIL $2 - in L3: \$*@@"; exit 1; }
modprobe virtio_blk_bio use_bio=0 $L3_VBB || fail "modprobe virtio_blk_bio failed"
for i in \$(seq 1 40); do [ -b /dev/vdb ] && break; sleep 0.25; done
[ -b /dev/vdb ] || fail "no /dev/vdb"
v=\$(basename "\$(readlink -f /sys/block/vdb/device)")
echo 1 >/sys/module/virtio_blk_bio/parameters/use_bio || fail "use_bio not writable"
echo \$v >/sys/bus/virtio/drivers/virtio_blk_bio/unbind && echo \$v >/sys/bus/virtio/drivers/virtio_blk_bio/bind ||
	fail "rebinding \$v failed"
for i in \$(seq 1 40); do [ -b /dev/vdb ] && break; sleep 0.25; done
grep -qx "path mq" /sys/block/vda/driver_stats || fail "vda is not on the request path"
grep -qx "path bio" /sys/block/vdb/driver_stats || fail "vdb is not on the bio path"
echo none >/sys/block/vda/queue/scheduler
QUICK=$QUICK REPS=$REPS WORKLOADS='$WORKLOADS' IOS='$IOS' IOS_QD1='$IOS_QD1' BASE_REPS='$BASE_REPS' SKIP_WLS='${SKIP_WLS:-}' PROFILE='${PROFILE:-0}' ACK=/dev/ttyS2 /src/bench/workloads.sh /dev/vda $1 /dev/vdb $2
X
}

# kill_cmdline STRING: SIGKILL to every process whose command line has
# STRING in it. Builtins only: L2's image has busybox's applets, and no pkill.
kill_cmdline() {
	local p args
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" = "$BASHPID" ] && continue
		mapfile -d '' args <"$p/cmdline" 2>/dev/null || continue
		case " ${args[*]} " in
		*"$1"*) kill -9 "${p#/proc/}" 2>/dev/null ;;
		esac
	done
}

# stall_guard L3DIR: every workload prints its fio JSON within a few minutes
# even here; an L3 whose output has not grown for STALL_SECS is hung: stop it.
STALL_SECS=${STALL_SECS:-300}
# Builtins only (see hostsnap): the output's mtime against a stamp, and a
# sleep that is a read with a timeout on a FIFO nobody writes.
stall_guard() {
	local dir=$1 since now _x
	mkfifo /tmp/stall.fifo.$$ 2>/dev/null
	exec 7<>/tmp/stall.fifo.$$
	: >/tmp/stall.stamp
	since=$SECONDS
	while [ ! -f /tmp/watch.stop ]; do
		if [ "$dir/output.log" -nt /tmp/stall.stamp ]; then
			: >/tmp/stall.stamp
			since=$SECONDS
		elif [ $((SECONDS - since)) -ge "$STALL_SECS" ]; then
			touch /tmp/l3-stalled
			kill_cmdline "$dir/initrd.img"
			break
		fi
		read -r -t 5 -u 7 _x
	done
	exec 7<&-
	rm -f /tmp/stall.fifo.$$
}

wait_sock() { local i; for i in $(seq 1 100); do [ -S "$1" ] && return 0; sleep 0.1; done; return 1; }

memdev="-object memory-backend-memfd,id=mem,size=$l3mem,share=on -numa node,memdev=mem"

# set_params "MODULE.PARAM=VALUE ...": write module parameters (sysfs), or with
# MODULE "sched" one of the scheduler's tunables in debugfs (such as
# sched.wakeup_granularity_ns on 6.1); what they were before goes to
# PARAMS_SAVED. PARAMS applies to the whole run. virtio_blk_bio's go to the
# L3 guests: on the driver's modprobe line there (L3_VBB, "PARAM=VALUE ...";
# an empty VALUE takes PARAM off it), but use_bio, which the row decides.
PARAMS_SAVED= L3_VBB=
vbb_get() { local a; for a in $L3_VBB; do [ "${a%%=*}" = "$1" ] && echo "${a#*=}"; done; }
vbb_set() { # PARAM VALUE
	local a n=
	for a in $L3_VBB; do [ "${a%%=*}" = "$1" ] || n="$n $a"; done
	[ -n "$2" ] && n="$n $1=$2"
	L3_VBB=${n# }
}
set_params() {
	local p m k f
	PARAMS_SAVED=
	for p in $1; do
		m=${p%%.*} k=${p#*.}; k=${k%%=*}
		if [ "$m" = virtio_blk_bio ]; then
			[ "$k" = use_bio ] && { note "virtio_blk_bio.use_bio: the row decides it"; continue; }
			PARAMS_SAVED="$PARAMS_SAVED $m.$k=$(vbb_get "$k")"
			vbb_set "$k" "${p#*=}"
			note "parameter $m.$k = ${p#*=} (in the L3 guests)"
			continue
		fi
		if [ "$m.$k" = l3.hpet ]; then
			case ${p#*=} in on|off) ;; *) note "l3.hpet: on or off, not ${p#*=}"; continue ;; esac
			PARAMS_SAVED="$PARAMS_SAVED l3.hpet=$L3_HPET"
			L3_HPET=${p#*=}
			note "parameter l3.hpet = $L3_HPET (the L3 guests' HPET)"
			continue
		fi
		f=/sys/module/$m/parameters/$k
		[ "$m" = sched ] && f=/sys/kernel/debug/sched/$k
		[ -w "$f" ] || { note "no writable parameter $m.$k"; continue; }
		PARAMS_SAVED="$PARAMS_SAVED $m.$k=$(cat "$f")"
		echo "${p#*=}" >"$f" && note "parameter $m.$k = $(cat "$f")"
	done
}
set_params "${PARAMS:-}"
PARAMS_SAVED=
echo "@@SET l3_hpet $L3_HPET@@"
echo "@@SET l3_cpus $l3cpus@@"

# FROM_ROW=backend/row: start at that row (scripts/bench.sh, after the L2 of
# a first attempt died in nested KVM); earlier rows and backends are skipped.
# FROM_DONE="workload ...": what FROM_ROW had finished then (not run again).
# SKIP_ROWS="backend/row ...": rows that killed L2 twice; reported, not run.
skipping=0 paired=
[ -n "${FROM_ROW:-}" ] && skipping=1
for backend in $BACKENDS; do
	if [ $skipping = 1 ] && [ "${FROM_ROW%%/*}" != "$backend" ]; then
		continue
	fi
	case $backend in
	nullb) dev=/dev/nullb0; wlq=$QUICK ;;
	nullb-lat)
		# A device that takes time: null_blk completing each request
		# from a timer NULLB_LAT_NS later (flash-like), a second device
		# made through null_blk's configfs.
		c=/sys/kernel/config/nullb/lat
		# configfs is a module here, loaded with null_blk, after the
		# VM's init tried to mount it.
		[ -d /sys/kernel/config/nullb ] ||
			mount -t configfs configfs /sys/kernel/config 2>/dev/null
		if [ ! -d $c ]; then
			mkdir $c && echo $((4 * 1024)) >$c/size && echo 2 >$c/irqmode &&
				echo "${NULLB_LAT_NS:-30000}" >$c/completion_nsec &&
				echo $queues >$c/submit_queues && echo 256 >$c/hw_queue_depth &&
				echo 1 >$c/power || { note "cannot make null_blk device with completion latency"; continue; }
		fi
		# (6.12 names the disk after the configfs directory, 6.1 nullbN)
		dev=/dev/lat
		[ -b $dev ] || dev=/dev/$(cat $c/index 2>/dev/null | sed 's/^/nullb/')
		[ -b "$dev" ] || { note "no block device for the null_blk latency device"; continue; }
		wlq=1 ;;
	file)
		modprobe brd rd_nr=1 rd_size=$((1200 * 1024)) || continue
		mkfs.ext4 -q -F /dev/ram0 && mkdir -p /mnt/bench && mount /dev/ram0 /mnt/bench || continue
		# written through once: a write to an unwritten (fallocated)
		# extent converts it, and the rows that came first would pay
		# for what the later ones find done
		dd if=/dev/zero of=/mnt/bench/disk.img bs=1M count=1024 oflag=direct \
			conv=fsync status=none || continue
		dev=/mnt/bench/disk.img; wlq=1 ;;
	nbd)
		# Network storage: the same null_blk behind an NBD hop, so the
		# rows show what the network costs (the server a host of its
		# own: a network namespace, veth).
		. $here/netns.sh
		if ! command -v nbd-client >/dev/null || ! command -v qemu-nbd >/dev/null ||
		   [ ! -x "$NETNS_IP" ]; then
			note "no nbd-client, qemu-nbd or iproute2's ip: no nbd backend"; continue
		fi
		modprobe nbd || continue
		netns_up && nbd_serve /dev/nullb0 bench --cache=none --aio=native &&
			nbd_attach /dev/nbd0 bench 30
		if [ $? != 0 ]; then
			note "cannot serve null_blk over NBD: $(tail -n 2 /tmp/qemu-nbd-bench.log 2>/dev/null)"
			[ -n "$NBD_SRV_PID" ] && { kill "$NBD_SRV_PID"; wait "$NBD_SRV_PID"; } 2>/dev/null
			netns_down; continue
		fi
		# (the workloads of nullb: the rows side by side)
		dev=/dev/nbd0; wlq=$QUICK ;;
	*) note "unknown backend $backend"; continue ;;
	esac
	note "backend $backend: $dev"
	# (the kernel's own functions once, the modules each time)
	[ "${PROFILE:-0}" = 1 ] && KSYMS_ALL=$((ksyms_done ? 0 : 1)) LEVEL=2 $here/workloads.sh --ksyms &&
		ksyms_done=1
	fmt=raw drv=host_device
	[ -f "$dev" ] && drv=file
	rows=$ROWS
	[ $backend != nullb ] && rows=${FILE_ROWS:-$ROWS}
	# REPEAT_ROW: that row once more at the end, as ROW@2, in a new L3 boot
	# of the same L2 boot: how well a count repeats (benchmarks.rst). Only
	# a row measured a first time: alone it compares with nothing.
	# REPEAT_PARAMS with several settings, "A|B|...": ROW@2 with A, ROW@3
	# with B, and so on, each in an L3 boot of its own.
	IFS='|' read -ra repeat_params <<<"${REPEAT_PARAMS:-}"
	[ ${#repeat_params[@]} -gt 0 ] || repeat_params=("")
	if [ $backend = "${BACKENDS%% *}" ] && [ -n "${REPEAT_ROW:-}" ]; then
		case " $rows " in
		*" $REPEAT_ROW "*)
			for i in "${!repeat_params[@]}"; do rows="$rows $REPEAT_ROW@$((i + 2))"; done ;;
		*) note "REPEAT_ROW $REPEAT_ROW is not among the rows ($rows): no ROW@2" ;;
		esac
	fi
	for row in $rows; do
		r=$backend/$row
		kind=${row%@*}
		if [ $skipping = 1 ]; then
			[ "$r" = "$FROM_ROW" ] || continue
			skipping=0
		fi
		case " ${SKIP_ROWS:-} " in
		*" $r "*)
			echo "@@FAIL $r - not run: L2 died or wedged in nested KVM twice during this row, with no workload finished in between@@"
			continue ;;
		esac
		# measured in vhost-blk-mq's L3 boot (below)
		[ $row = vhost-blk-bio ] && [ "$paired" = $backend ] && continue
		# vhost-blk-bio right after vhost-blk-mq in the list (and not
		# skipped): both measured in one L3 boot, a disk each.
		pair=
		if [ $row = vhost-blk-mq ]; then
			case " $rows " in *" vhost-blk-mq vhost-blk-bio "*)
				case " ${SKIP_ROWS:-} " in *" $backend/vhost-blk-bio "*) ;;
				*) pair=$backend/vhost-blk-bio ;; esac ;;
			esac
		fi
		SKIP_WLS=
		[ "$r" = "${FROM_ROW:-}" ] && SKIP_WLS=${FROM_DONE:-}
		export SKIP_WLS
		note "row $r${pair:+ and $pair}"
		# ROW@2 may run with other module parameters (REPEAT_PARAMS):
		# a lever off and on in one L2 boot; and on fewer workloads
		# (REPEAT_WORKLOADS).
		run_wls=$WORKLOADS
		case $row in *@[0-9]*)
			set_params "${repeat_params[$((${row##*@} - 2))]}"
			[ -n "${REPEAT_WORKLOADS:-}" ] && WORKLOADS=$REPEAT_WORKLOADS
			note "row $r: workloads ${WORKLOADS:-all}" ;;
		esac
		case $kind in
		native)
			QUICK=$wlq MEASURE_CPU=1 $here/workloads.sh "$dev" "$r" ;;
		qemu-threads|qemu-native|qemu-io_uring|vbb-mq-qemu)
			aio=${kind#qemu-}; io=(); dopt=
			[ $kind = vbb-mq-qemu ] && aio=native
			if [ $aio != threads ]; then
				io=(-object "iothread,id=io0${QEMU_POLL_NS:+,poll-max-ns=$QEMU_POLL_NS}")
				dopt=,iothread=io0
			fi
			setup="modprobe virtio_blk"
			[ $kind = vbb-mq-qemu ] && setup="modprobe virtio_blk_bio use_bio=0 $L3_VBB"
			QUICK=$wlq l3_row "$r" "$setup" "${io[@]}" \
				-drive file=$dev,if=none,id=d0,format=$fmt,cache=none,aio=$aio \
				-device virtio-blk-pci,drive=d0,num-queues=$queues$dopt$dev_opts ;;
		qsd)
			rm -f /tmp/qsd.sock
			"${pinned[@]}" qemu-storage-daemon --blockdev driver=$drv,filename=$dev,node-name=disk,cache.direct=on,aio=native \
				--export type=vhost-user-blk,id=exp,node-name=disk,addr.type=unix,addr.path=/tmp/qsd.sock,num-queues=$queues,writable=on \
				>/tmp/qsd.log 2>&1 &
			qpid=$!
			if wait_sock /tmp/qsd.sock; then
				QUICK=$wlq l3_row "$r" "modprobe virtio_blk" $memdev \
					-chardev socket,id=c0,path=/tmp/qsd.sock \
					-device vhost-user-blk-pci,chardev=c0,num-queues=$queues$dev_opts
			else
				echo "@@FAIL $r - qemu-storage-daemon did not start: $(tail -n 2 /tmp/qsd.log)@@"
			fi
			kill $qpid; wait $qpid 2>/dev/null ;;
		vhost-blk-mq|vhost-blk-bio)
			if ! command -v vhost-blk-bridge >/dev/null || [ ! -c /dev/vhost-blk ]; then
				echo "@@FAIL $r - vhost-blk-bridge or /dev/vhost-blk missing@@"; continue
			fi
			# with $pair: two bridges, two /dev/vhost-blk devices on
			# $dev, a disk each in the guest, runs alternating (a disk
			# shared on purpose: no backend lock)
			ndev=1
			[ -n "$pair" ] && ndev=2 paired=$backend
			bpids= qargs=() ok=1
			for d in $(seq 1 $ndev); do
				rm -f /tmp/vb$d.sock
				"${pinned[@]}" vhost-blk-bridge --socket /tmp/vb$d.sock --backend "$dev" --queues $queues \
					--lock-timeout 0 >/tmp/bridge$d.log 2>&1 &
				bpids="$bpids $!"
				if ! wait_sock /tmp/vb$d.sock; then
					ok=0
					for x in $r $pair; do
						echo "@@FAIL $x - vhost-blk-bridge did not start: $(tail -n 2 /tmp/bridge$d.log)@@"
					done
					break
				fi
				qargs+=(-chardev socket,id=c$d,path=/tmp/vb$d.sock
					-device vhost-user-blk-pci,chardev=c$d,num-queues=$queues$dev_opts)
			done
			if [ $ok = 1 ]; then
				ub=0; [ $kind = vhost-blk-bio ] && ub=1
				QUICK=$wlq PAIR_ROW=$pair l3_row "$r" "modprobe virtio_blk_bio use_bio=$ub $L3_VBB" \
					$memdev "${qargs[@]}"
			fi
			kill $bpids; wait $bpids 2>/dev/null ;;
		selftest-load)
			if [ -x $here/selftest-load.sh ]; then
				QUICK=$wlq $here/selftest-load.sh "$dev" "$r"
			else
				echo "@@FAIL $r - no selftest load mode yet@@"
			fi ;;
		esac
		case $row in *@[0-9]*) set_params "$PARAMS_SAVED" ;; esac
		WORKLOADS=$run_wls
	done
	if [ $backend = file ]; then umount /mnt/bench; rmmod brd; fi
	if [ $backend = nbd ]; then
		nbd-client -d /dev/nbd0 >/dev/null
		kill "$NBD_SRV_PID"; wait "$NBD_SRV_PID" 2>/dev/null
		netns_down
	fi
done
# No hist trigger left on KVM's tracepoints (on a host they would stay).
if [ $exitr = 1 ]; then
	echo "!$EXR_KEYS" >>$EXR_EV/kvm_exit/trigger
	echo "!$MSR_KEYS" >>$EXR_EV/kvm_msr/trigger
fi
# On a host (HOST_MODE=1), leave no test device behind.
if [ "${HOST_MODE:-0}" = 1 ]; then
	[ -d /sys/kernel/config/nullb/lat ] && { echo 0 >/sys/kernel/config/nullb/lat/power; rmdir /sys/kernel/config/nullb/lat; }
	rmmod null_blk 2>/dev/null
fi
exit 0
