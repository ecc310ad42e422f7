#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# run-tests.sh [TEST...]: run the in-VM tests (default: every executable
# /src/selftests/l2/*.sh, sorted) one after another and print TAP-style lines.
#
# A test prints "ok - what", "not ok - what" or "ok - what # SKIP why" for its own
# checks; other output is shown as "# ..." comments. A nonzero exit adds a failure
# (77 = skipped, the last output line says why); a test that prints no result line
# is one result judged by its exit status. After each test the kernel log is read:
# an Oops, BUG, WARNING, KASAN, lockdep or hung-task line is a failure of that test.
BAD_RE='Oops|BUG:|WARNING:|KASAN|UBSAN|lockdep|possible (recursive|circular) locking|blocked for more than|Kernel panic|general protection fault|soft lockup|hard LOCKUP|rcu.*detected stalls?'
TEST_TIMEOUT=${TEST_TIMEOUT:-900}
[ "${SLOW:-0}" = 1 ] && TEST_TIMEOUT=2400

# A test whose header has a line "# check: slow -- REASON" runs only with SLOW=1;
# otherwise it is reported as skipped, with the reason.
# CORE=1 (make check on a kernel that gets the core tests only, see
# scripts/check.sh) runs only the tests whose header has a line "# check: core";
# the others are reported as skipped, saying where they run.
# FROM=NAME starts the default list at that test (scripts/check.sh uses it to
# run the rest of a list again in a fresh L2 after the first L2 died).
slow=() notcore=()
if [ $# -eq 0 ]; then
	for t in /src/selftests/l2/*.sh; do
		[ -x "$t" ] || continue
		[[ -n "${FROM:-}" && "$(basename "$t" .sh)" < "$FROM" ]] && continue
		if [ "${SLOW:-0}" != 1 ] && grep -q '^# check: slow -- ' "$t"; then
			slow+=("$t")
			continue
		fi
		# "# check: slow-on SERIES -- REASON": opt-in on that kernel series only.
		series=$(sed -n 's/^# check: slow-on \([0-9.]*\) -- .*/\1/p' "$t" | head -n 1)
		if [ "${SLOW:-0}" != 1 ] && [ -n "$series" ] && case $(uname -r) in "$series".*) true ;; *) false ;; esac; then
			slow+=("$t")
			continue
		fi
		if [ "${CORE:-0}" = 1 ] && ! grep -q '^# check: core$' "$t"; then
			notcore+=("$t")
			continue
		fi
		set -- "$@" "$t"
	done
fi
# (A FROM run repeats part of a list: its skips were reported the first time.)
[ -n "${FROM:-}" ] && slow=() notcore=()
for t in "${slow[@]}"; do
	echo "ok - $(basename "$t" .sh) # SKIP $(sed -n 's/^# check: slow\(-on [0-9.]*\)\{0,1\} -- //p' "$t" | head -n 1); make check SLOW=1 runs it"
done
for t in "${notcore[@]}"; do
	echo "ok - $(basename "$t" .sh) # SKIP not a core test: make check runs it on ${FULL_KERNELS:-the full kernels}; FULL_KERNELS= or SLOW=1 runs it here"
done
export PATH=/src/selftests/lib:$PATH

# A heartbeat on ttyS2 (the host keeps it as l3-console.log): make check
# stops an L2 whose heartbeat stops, the silent form of the nested-KVM wedge
# (L1's QEMU livelocked, no line from L2 at all, not even a soft lockup).
#
# Each beat also starts, on every CPU, a task bound to that CPU, unless the
# last one has not run yet. A CPU whose task has waited CPU_LOST_SECS while
# an L3 guest's QEMU runs is said on ttyS2 as "@@CPULOST N SECS@@" (and in the
# kernel log), and make check stops this L2: it is the nested-KVM wedge in
# which a vCPU went into the L3 guest and never came back. Nothing then runs
# on that CPU, not even the timers queued there, so a test that had a task or
# a timer on it (timeout's own, say) never ends, while the other CPU, the
# heartbeat and the RCU and hung-task detectors look fine. A CPU busy in the
# kernel for that long would have been reported as a soft lockup long before.
BEAT=${BEAT:-30}
CPU_LOST_SECS=${CPU_LOST_SECS:-150}
# (comm, not cmdline: reading a wedged QEMU's cmdline can block on its mm,
# as pidof would.)
l3_qemu_runs() {
	local f
	for f in /proc/[0-9]*/comm; do
		[ "$(cat "$f" 2>/dev/null)" = qemu-system-x86 ] && return 0
	done
	return 1
}
probe_cpus() {
	local now c f t0
	now=$(cut -d. -f1 /proc/uptime)
	for c in $(seq 0 $(($(grep -c '^processor' /proc/cpuinfo) - 1))); do
		f=/tmp/cpuprobe.$c
		if [ ! -e "$f" ]; then
			echo "$now" >"$f"
			(taskset "$(printf %x $((1 << c)))" true && rm -f "$f" "$f.said") \
				</dev/null >/dev/null 2>&1 &
			continue
		fi
		t0=$(cat "$f" 2>/dev/null) && [ -n "$t0" ] || continue
		if [ $((now - t0)) -ge "$CPU_LOST_SECS" ] && [ ! -e "$f.said" ] && l3_qemu_runs; then
			echo "run-tests: CPU $c has run no task for $((now - t0)) s while an L3 guest's QEMU runs" >/dev/kmsg
			echo "@@CPULOST $c $((now - t0))@@" >/dev/ttyS2
			touch "$f.said"
		fi
	done
}
if [ -c /dev/ttyS2 ]; then
	rm -f /tmp/cpuprobe.*
	(while :; do
		echo "@@ALIVE $(cut -d' ' -f1 /proc/uptime)@@" >/dev/ttyS2
		probe_cpus
		sleep "$BEAT"
	done) &
	alive_pid=$!
	trap 'kill $alive_pid 2>/dev/null' EXIT
fi

# l3_flake_only (flake.sh): whether the kernel lines of a test's output are
# the flake's and nothing more.
. /src/selftests/lib/flake.sh

# How many times a test may meet the flake before its failure stands: on a bad
# day a test with two L3 guests (40-e2e) met it in four attempts in a row.
L3_ATTEMPTS=8

fails=0
for t in "$@"; do
	name=$(basename "$t" .sh)
	echo "# ---- $name"
	dmesg -c >/dev/null
	start=$(date +%s)
	touch /tmp/test.out.start
	timeout -s KILL "$TEST_TIMEOUT" bash "$t" >/tmp/test.out 2>&1 </dev/null
	rc=$?
	# An L3 guest that reset itself with no kernel message at all (QEMU exit 0,
	# no status, nothing in its log), or that stopped running (killed at its
	# time limit with no report from its watchdog, and no kernel message), is
	# the nested-SVM-under-TCG flake seen on this kind of host (also with no
	# project code in the guest). Such a test runs again, at most
	# L3_ATTEMPTS - 1 times, each time said out loud in the results; the last
	# failure stands. An L3
	# guest that hung while it still ran (its watchdog reported) is a failure.
	# (Only kernel log lines count, "[ seconds] ...":
	# a test's own result text, such as "kernel log clean (no Oops ...)", is
	# not a message.) (A test may report the failure as a "not ok" line and
	# still exit 0.) A test that knows the guest's end had another cause (its
	# vhost-user back-end died under it) says so in a line "# not-the-flake:
	# WHY", and is not run again.
	attempt=1
	while [ $attempt -lt $L3_ATTEMPTS ] &&
	   { [ "$rc" != 0 ] || grep -q '^not ok' /tmp/test.out; } &&
	   grep -Eq 'vmrun: (VM ended without reporting an exit status \(qemu rc=0\)|the guest had stopped running)' /tmp/test.out &&
	   l3_flake_only &&
	   ! grep -q '^# not-the-flake: ' /tmp/test.out &&
	   [ -z "$(dmesg | grep -E "$BAD_RE")" ]; do
		echo "# $name: an L3 guest reset itself or stopped running without a kernel message (or with only a stopped vCPU's RCU stall); attempt $attempt:"
		grep -E '^not ok|vmrun: [A-Za-z]' /tmp/test.out | head -n 20 | sed "s/^/#   $attempt: /"
		attempt=$((attempt + 1))
		echo "ok - $name: run again after an L3 guest reset or stopped with no kernel message (attempt $attempt of at most $L3_ATTEMPTS)"
		dmesg -c >/dev/null
		touch /tmp/test.out.start
		timeout -s KILL "$TEST_TIMEOUT" bash "$t" >/tmp/test.out 2>&1 </dev/null
		rc=$?
	done
	secs=$(($(date +%s) - start))
	results=0 failed=0
	while IFS= read -r line; do
		case $line in
		"ok "*|"not ok "*)
			results=$((results + 1))
			case $line in "not ok "*) failed=1 ;; esac
			desc=${line#ok }; desc=${desc#not ok }; desc=${desc#- }
			case $line in
			"not ok "*) echo "not ok - $name: $desc" ;;
			*) echo "ok - $name: $desc" ;;
			esac ;;
		*) echo "#   $line" ;;
		esac
	done </tmp/test.out
	if [ "$rc" = 77 ]; then
		echo "ok - $name # SKIP $(tail -n 1 /tmp/test.out)"
	elif [ "$rc" = 137 ]; then
		echo "not ok - $name: killed after ${TEST_TIMEOUT}s"; failed=1
		# busybox timeout kills the test's shell only: what it started
		# (L3 QEMUs, a bridge, a storage daemon, fio) would hold devices
		# and modules and fail the tests after it.
		left=$(pidof qemu-system-x86_64 vhost-blk-bridge qemu-storage-daemon fio)
		if [ -n "$left" ]; then
			echo "#   killed what it left running: $(for p in $left; do cat /proc/$p/comm; done | sort | uniq -c | tr -s ' \n' ' ')"
			kill -9 $left 2>/dev/null
			sleep 2
		fi
	elif [ "$rc" != 0 ]; then
		echo "not ok - $name: exit status $rc"; failed=1
	elif [ "$results" = 0 ]; then
		echo "ok - $name"
	fi
	bad=$(dmesg | grep -E "$BAD_RE")
	if [ -n "$bad" ]; then
		echo "not ok - $name: kernel log clean"
		echo "$bad" | head -n 10 | sed 's/^/#   kernel: /'
		failed=1
	fi
	echo "# ---- $name: ${secs}s"
	[ "$failed" = 0 ] || fails=$((fails + 1))
done
exit 0
