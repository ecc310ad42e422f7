#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The nested level of the harness: l3run boots an L3 guest with KVM inside L2 and
# propagates its script's output and exit status, and reports a kernel WARN in L3
# as a failure even when the script exits 0.
cat >/tmp/l3-pass.sh <<'X'
echo "l3-marker $(uname -r)"
X
cat >/tmp/l3-fail.sh <<'X'
exit 7
X
cat >/tmp/l3-warn.sh <<'X'
insmod /root/harness_warn.ko
exit 0
X
out=$(l3run -t 120 /tmp/l3-pass.sh 2>&1); rc=$?
if [ "$rc" = 0 ] && echo "$out" | grep -q "l3-marker $(uname -r)"; then
	echo "ok - l3run boots an L3 guest with nested KVM and returns its output"
else
	echo "not ok - l3run boots an L3 guest with nested KVM and returns its output (rc=$rc)"
	echo "$out"
fi
# (On a mismatch the output is shown: run-tests.sh looks in it for an L3
# guest that reset itself.)
out=$(l3run -t 120 /tmp/l3-fail.sh 2>&1); rc=$?
[ "$rc" = 7 ] && echo "ok - l3run propagates a failing script's status" || {
	echo "not ok - l3run propagates a failing script's status (got $rc, want 7)"
	echo "$out"
}
out=$(l3run -t 120 /tmp/l3-warn.sh 2>&1); rc=$?
[ "$rc" = 126 ] && echo "ok - l3run reports a WARN in the L3 kernel log" || {
	echo "not ok - l3run reports a WARN in the L3 kernel log (got $rc, want 126)"
	echo "$out"
}
