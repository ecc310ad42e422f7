# SPDX-License-Identifier: GPL-2.0
# flake.sh: sourced by run-tests.sh (and selftests/repo/flake-test.sh, on
# fixtures): the rule that tells the nested-SVM-under-TCG flake of an L3
# guest from a failure (Documentation/testing.rst). TEST_OUT: the test's
# output (default /tmp/test.out; TEST_OUT.start marks when it began),
# L3RUN_DIRS: where l3run's directories are (default /tmp). BAD_RE: the
# kernel log lines that count.

# l3_flake_only: the kernel lines in a test's output that mark it as more than
# the flake: none at all, or only RCU stall reports of an L3 guest that had
# stopped running (with the hung-task reports of tasks that waited on the
# stopped vCPU), with no backtrace in any L3 console of that run (a vCPU
# that no longer runs never takes the NMI that would print one, while a CPU
# stuck in kernel code prints its stack); or, with hung-task or RCU reports
# only, an L3 kernel that stopped before its init ran.
l3_flake_only() {
	local bad
	bad=$(grep -E '\[ *[0-9]+\.[0-9]+\] ' "${TEST_OUT:-/tmp/test.out}" | grep -E "$BAD_RE")
	[ -z "$bad" ] && return 0
	grep -q 'vmrun: the guest had stopped running' "${TEST_OUT:-/tmp/test.out}" || return 1
	# RCU stalls, and the hung-task reports of tasks left waiting on the
	# stopped vCPU (when it stops for more than 120 s): nothing else, and
	# at least one stall that names the vCPU.
	echo "$bad" | grep -Ev 'rcu: INFO: rcu_(preempt|sched) detected stalls|INFO: task [^ ]+ blocked for more than [0-9]+ seconds' |
		grep -q . && return 1
	local f
	# A guest kernel that stopped while it booted, before its init ran
	# ("vm: ... up, running", scripts/vm/init): none of the project's
	# code had run in it (its modules are loaded by the test's script).
	for f in "${L3RUN_DIRS:-/tmp}"/l3run.*/console.log; do
		[ "$f" -nt "${TEST_OUT:-/tmp/test.out}.start" ] || continue
		grep -q '\] Linux version ' "$f" && ! grep -q '\] vm: .* up, running ' "$f" &&
			return 0
	done 2>/dev/null
	echo "$bad" | grep -Eq 'rcu: INFO: rcu_(preempt|sched) detected stalls' || return 1
	for f in "${L3RUN_DIRS:-/tmp}"/l3run.*/console.log; do
		[ "$f" -nt "${TEST_OUT:-/tmp/test.out}.start" ] && cat "$f"
	done 2>/dev/null | grep -Eq 'Call Trace|NMI backtrace for cpu' && return 1
	return 0
}
