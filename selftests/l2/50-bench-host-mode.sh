#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# 50-bench-host-mode: bench/l2-bench.sh, the script make bench runs in L2 here
# and on a KVM host itself (HOST_MODE=1, scripts/bench.sh), run here the way a
# host runs it: vhost_blk inserted from a file, the guest's kernel and image
# named by L3_KERNEL/L3_INITRD, its console in a file, KVM's settings left
# alone. A short run (one workload, one repetition, few I/Os) of the rows a
# host bench compares: every row prints a whole fio result, the vhost rows show
# vhost_blk serving requests, each run has its cost window (its counters read
# by L2 before the guest went on: L2 answered, the guests' own counters
# reported), the guests have no HPET, and
# the host is left as it was (null_blk unloaded, no bridge running).
ok() { echo "ok - bench host mode: $*"; }
nok() { echo "not ok - bench host mode: $*"; }
out=/tmp/bench-host-mode.log
rmmod vhost_blk 2>/dev/null
rmmod null_blk 2>/dev/null
modprobe kvm_amd 2>/dev/null || modprobe kvm_intel 2>/dev/null
hp0=$(cat /sys/module/kvm/parameters/halt_poll_ns 2>/dev/null)
HOST_MODE=1 VHOST_BLK_KO=/lib/modules/$(uname -r)/extra/vhost_blk.ko \
L3_KERNEL=/l3/vmlinuz L3_INITRD=/l3/initrd.img L3_CONSOLE=/tmp/bench-l3-console.log L3_MARK_KMSG=0 \
QUICK=1 REPS=1 IOS=512 ROWS="native vhost-blk-mq vhost-blk-bio selftest-load" BACKENDS=nullb \
WORKLOADS=4k-randread-qd32 RUNTIME=1 \
	/src/bench/l2-bench.sh >$out 2>&1
rc=$?
sed 's/^/# /' $out | grep -v '^# {' | tail -n 60
[ $rc = 0 ] && ok "l2-bench.sh exits 0" || nok "l2-bench.sh exits 0 (status $rc)"
for row in native vhost-blk-mq vhost-blk-bio selftest-load; do
	if awk -v r="nullb/$row" '$0 == "@@JSON " r " 4k-randread-qd32 1@@" { getline; if ($0 ~ /"total_ios" *: *[1-9]/) f = 1 }
		END { exit !f }' $out; then
		ok "$row: a whole fio result with I/Os done"
	else
		nok "$row: a whole fio result with I/Os done"
	fi
done
for row in vhost-blk-mq vhost-blk-bio; do
	# (A row run again after an L3 reset (@@RERUN) has the lines of both
	# runs: the last one counts.)
	reqs=$(sed -n "s|^@@KVM nullb/$row 4k-randread-qd32 1 [0-9]* [0-9]* \([0-9]*\) [0-9 ]*@@|\1|p" $out |
		tail -n 1)
	# (L2 reads its counters when the guest's START and JSON lines reach
	# it, a little late now and then: at least half of the 512.)
	[ "${reqs:-0}" -ge 256 ] && ok "$row: vhost_blk served the run's requests ($reqs of 512)" ||
		nok "$row: vhost_blk served the run's requests (${reqs:-none} of 512)"
done
n=$(grep -c '^@@WIN [0-9]* nullb/' $out)
[ "$n" -ge 7 ] && ok "every run has its cost window ($n, base runs included)" ||
	nok "every run has its cost window ($n, want 7: 3 rows x (base + 1), selftest-load 1)"
! grep -q '^@@FAIL' $out && ok "no row failed" || nok "no row failed: $(grep '^@@FAIL' $out | head -n 3)"
# Each guest waited for L2's answer to its START and JSON lines, and had it.
n=$(grep -c '^# L2 answers on ' $out)
[ "$n" -ge 1 ] && ! grep -q '^# no answer from L2' $out &&
	ok "L2 answered every START and JSON line of the guests ($n guest(s))" ||
	nok "L2 answered every START and JSON line of the guests: $n guest(s) waited for answers; $(grep '^# no answer from L2' $out | head -n 1)"
# The guests had no HPET (L3_HPET's default, benchmarks.rst): said, and on the
# command line of every guest's QEMU (l3run's first console line).
n=$(grep -c '^=== L3 #' /tmp/bench-l3-console.log 2>/dev/null)
m=$(grep -c '^=== L3 #.* -machine hpet=off ' /tmp/bench-l3-console.log 2>/dev/null)
grep -qx '@@SET l3_hpet off@@' $out && [ "${n:-0}" -ge 1 ] && [ "$m" = "$n" ] &&
	ok "the guests ran without an HPET ($m of $n)" ||
	nok "the guests ran without an HPET: $(grep '^@@SET l3_hpet' $out), ${m:-0} of ${n:-0} with -machine hpet=off"
# The guests' counters of each run: queue interrupts, kicks, busy jiffies
# and local timer interrupts (the last field).
n=$(grep -c '^@@GUEST nullb/vhost-blk-' $out)
m=$(grep -cE '^@@GUEST nullb/vhost-blk-(mq|bio) 4k-randread-qd32 [^ ]+ [1-9][0-9]* [0-9-]+ [0-9]+ [0-9]+@@$' $out)
[ "${n:-0}" -ge 2 ] && [ "$m" = "$n" ] &&
	ok "each guest run reports its queue and timer interrupts ($m of $n)" ||
	nok "each guest run reports its queue and timer interrupts: ${m:-0} of ${n:-0}: $(grep -m 1 '^@@GUEST' $out)"
[ ! -d /sys/module/null_blk ] && ok "null_blk unloaded afterwards" || nok "null_blk unloaded afterwards"
[ -z "$(pidof vhost-blk-bridge)" ] && ok "no bridge left running" || nok "no bridge left running"
[ "$(cat /sys/module/kvm/parameters/halt_poll_ns 2>/dev/null)" = "$hp0" ] &&
	ok "KVM's halt polling left as it was ($hp0)" || nok "KVM's halt polling left as it was"
rmmod vhost_blk 2>/dev/null
exit 0
