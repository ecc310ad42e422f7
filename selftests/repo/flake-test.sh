#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# flake-test.sh: the rule of selftests/lib/flake.sh (which failures of an L3
# guest run-tests.sh runs again as the nested-SVM-under-TCG flake) on test
# outputs of known kinds, no VM. Prints TAP-style lines for scripts/check.sh.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
BAD_RE=$(sed -n "s/^BAD_RE='\(.*\)'$/\1/p" "$top/selftests/lib/run-tests.sh")
export TEST_OUT=$work/test.out L3RUN_DIRS=$work
. "$top/selftests/lib/flake.sh"
fail=0

# case DESC WANT(flake|failure) CONSOLE-LINES: the output is read from stdin
case_is() {
	local desc=$1 want=$2 console=$3 got=failure
	rm -rf "$work"/l3run.*
	touch "$TEST_OUT.start"
	sleep 0.01
	cat >"$TEST_OUT"
	mkdir -p "$work/l3run.0"
	printf '%b' "$console" >"$work/l3run.0/console.log"
	l3_flake_only && got=flake
	if [ "$got" = "$want" ]; then
		echo "ok - flake rule: $desc: $want"
	else
		echo "not ok - flake rule: $desc: $got, want $want"
		fail=1
	fi
}

stopped='vmrun: the guest had stopped running: no report from its watchdog, due before the limit'
stall='vmrun:   [   63.765100] rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:'
hung='vmrun:   [  243.230264] INFO: task kworker/u4:1:44 blocked for more than 120 seconds.'

printf 'not ok - a check\nvmrun: VM ended without reporting an exit status (qemu rc=0)\n' |
	case_is "a reset with no kernel message" flake ''
printf '%s\n%s\n' "$stopped" "$stall" |
	case_is "stopped, an RCU stall only" flake '[   63.7] rcu: INFO: rcu_preempt detected stalls\n'
printf '%s\n%s\n%s\n' "$stopped" "$stall" "$hung" |
	case_is "stopped in early boot, an RCU stall and a hung task waiting on the vCPU" flake \
	'[   63.7] rcu: INFO: rcu_preempt detected stalls\n'
printf '%s\n%s\n' "$stopped" "$hung" |
	case_is "stopped, a hung task with no RCU stall" failure ''
boot='[    0.000000] Linux version 6.1.0-57-cloud-amd64\n[    1.111389] audit: type=2000\n'
printf '%s\n%s\n' "$stopped" "$hung" |
	case_is "stopped while its kernel booted (no init yet), a hung task" flake \
	"${boot}[  243.187565] INFO: task kthreadd:37 blocked for more than 120 seconds.\n"
printf '%s\n%s\n' "$stopped" "$hung" |
	case_is "stopped after its init ran, a hung task with no RCU stall" failure \
	"${boot}[    9.2] vm: 6.1.0-57-cloud-amd64 up, running /run.sh\n[  243.1] INFO: task kthreadd:37 blocked for more than 120 seconds.\n"
printf '%s\n%s\n%s\n' "$stopped" "$hung" 'vmrun:   [  80.1] BUG: kernel NULL pointer dereference, address: 0' |
	case_is "stopped while its kernel booted, a hung task and a BUG" failure \
	"${boot}[   80.1] BUG: kernel NULL pointer dereference\n"
printf '%s\n%s\n%s\n' "$stopped" "$stall" 'vmrun:   [  80.1] BUG: kernel NULL pointer dereference, address: 0' |
	case_is "stopped, an RCU stall and a BUG" failure ''
printf '%s\n%s\n' "$stopped" "$stall" |
	case_is "stopped, an RCU stall with a CPU's backtrace in the console" failure \
	'[   63.7] rcu: INFO: rcu_preempt detected stalls\n[   63.8] NMI backtrace for cpu 0\n'
printf '%s\n%s\n' 'vmrun: the guest was running at its limit; its watchdog'"'"'s report:' "$hung" |
	case_is "running at its limit, a hung task" failure ''
# The rule needs vmrun's status line in the test's output. vmrun prints it
# before the guest's console tail and QEMU's log, so an L2 test that keeps
# an L3 guest's output in a file and shows only its last lines loses it:
# such a test passes vmrun's lines on itself (or shows the whole file).
missing=
for t in "$top"/selftests/l2/*.sh; do
	grep -q '^[^#]*l3run ' "$t" || continue
	grep -Eq '^[^#]*>"?\$[^ ]*(l3[^ ]*\.out|out)"?( |$)' "$t" || continue
	grep -Eq '^[^#]*(grep[^|]*vmrun|^cat "?\$[^ ]*l3[^ ]*\.out)' "$t" ||
		missing="$missing ${t##*/}"
done
if [ -z "$missing" ]; then
	echo "ok - flake rule: every L2 test that keeps an L3 guest's output in a file passes vmrun's lines on"
else
	echo "not ok - flake rule: L2 tests that keep an L3 guest's output in a file but drop vmrun's lines:$missing"
	fail=1
fi
exit $fail
