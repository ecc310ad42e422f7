#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# wedge-test.sh: the rules of scripts/lib.sh that tell make check an L2 boot
# died or wedged in nested KVM (and its tests run again in a fresh L2), on L2
# console logs of known kinds, no VM. Prints TAP-style lines for
# scripts/check.sh.
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# case_is RULE DESC WANT(yes|no) CONSOLE: the console log, as printf %b text
case_is() {
	local rule=$1 desc=$2 want=$3 got=no
	printf '%b' "$4" >"$work/console.log"
	"$rule" "$work/console.log" && got=yes
	if [ "$got" = "$want" ]; then
		echo "ok - $rule: $desc: $want"
	else
		echo "not ok - $rule: $desc: $got, want $want"
		fail=1
	fi
}

start='[  119.742083] l3run: L3 guest #3 starting\n'
ended='[  140.100000] l3run: L3 guest #3 ended (status 0)\n'
khp='[  247.352407] INFO: task khugepaged:36 blocked for more than 61 seconds.\n'
kw='[  247.352407] INFO: task kworker/0:1:21 blocked for more than 61 seconds.\n'
sl='[ 1045.005706] watchdog: BUG: soft lockup - CPU#1 stuck for 26s! [modprobe:7578]\n'
sl+='[ 1045.006147] Modules linked in: loop vhost vhost_iotlb kvm_amd kvm\n'
sl+='[ 1045.006565] CPU: 1 PID: 7578 Comm: modprobe Tainted: G           OE\n'
sl+='[ 1045.006715] Hardware name: QEMU Standard PC (i440FX + PIIX, 1996)\n'
rip='[ 1045.006872] RIP: 0010:smp_call_function_many_cond+0xf1/0x330\n'
other='[ 1045.006872] RIP: 0010:vhost_blk_flush+0x41/0x90 [vhost_blk]\n'

case_is l2_cpu_lost_in_l3 "khugepaged blocked while an L3 guest runs" yes "$start$khp"
case_is l2_cpu_lost_in_l3 "a cross-CPU call spinning while an L3 guest runs" yes "$start$sl$rip"
case_is l2_cpu_lost_in_l3 "khugepaged blocked after the L3 guest ended" no "$start$ended$khp"
case_is l2_cpu_lost_in_l3 "khugepaged blocked, no L3 guest ever" no "$khp"
case_is l2_cpu_lost_in_l3 "another task blocked while an L3 guest runs" no "$start$kw"
case_is l2_cpu_lost_in_l3 "a soft lockup elsewhere while an L3 guest runs" no "$start$sl$other"
case_is l2_cpu_lost_in_l3 "a soft lockup in cross-CPU call after the L3 guest ended" no "$start$ended$sl$rip"

panic='[  228.771074] BUG: TASK stack guard page was hit at 00000000f186ba04\n'
panic+='[  228.771074] CPU: 0 PID: 778 Comm: qemu-system-x86 Tainted: G           OE\n'
panic+='[  228.771074] Kernel panic - not syncing: Fatal exception in interrupt\n'
ours='[  228.771074] BUG: kernel NULL pointer dereference, address: 0000000000000008\n'
ours+='[  228.771074] CPU: 1 PID: 901 Comm: vhost-777 Tainted: G           OE\n'
ours+='[  228.771074] Kernel panic - not syncing: Fatal exception\n'
case_is nested_kvm_panic "a panic in the L3 guest's QEMU" yes "$start$panic"
case_is nested_kvm_panic "a panic in a vhost worker" no "$start$ours"
# l2_death NAME RC LOG WEDGED: the reason make check and make flake-rate give
# for an L2 that ended, from its console, vm.sh's status and output, and
# l2_watch's file.
BUILD=$work/build
mkdir -p "$BUILD/vm/t"
death_is() { # DESC WANT(reason text|no) RC CONSOLE LOG [WEDGED-TEXT]
	local got
	printf '%b' "$4" >"$BUILD/vm/t/console.log"
	printf '%b' "$5" >"$work/l2.log"
	rm -f "$work/wedged"
	[ -n "${6:-}" ] && echo "$6" >"$work/wedged"
	got=$(l2_death t "$3" "$work/l2.log" "$work/wedged") || got=no
	if [ "$got" = "$2" ]; then
		echo "ok - l2_death: $1"
	else
		echo "not ok - l2_death: $1: got '$got', want '$2'"
		fail=1
	fi
}
reset='L2 reset itself with no kernel message while an L3 guest ran'
death_is "a panic in the L3 guest's QEMU" \
	"the L2 kernel panicked inside nested KVM (qemu-system-x86)" 125 "$start$panic" ""
death_is "a wedge l2_watch stopped" "L2 froze in nested KVM" 137 "$start" "" "L2 froze in nested KVM"
death_is "no status while an L3 guest ran" "$reset" 125 "$start" ""
death_is "no status after the L3 guest ended" no 125 "$start$ended" ""
death_is "no status with a bad kernel line" no 125 "$start" "vmrun: kernel log reports a problem\n"
death_is "a failed test, L2 alive" no 1 "$start$ended" ""
death_is "a panic in a vhost worker" no 125 "$start$ours" "vmrun: kernel log reports a problem\n"
exit $fail
