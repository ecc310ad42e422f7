#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# End to end, in L2: vhost_blk.ko + vhost-blk-bridge on a brd disk, stock
# QEMU's vhost-user-blk-pci, an L3 guest with virtio_blk_bio (guest half:
# selftests/e2e/guest.sh).
#  (the bridge's control plane alone, raw vhost-user messages: 42-bridge-protocol)
#  1. L3 boot: both guest paths: fio verify=crc32c (mixed random writes, 2
#     queues), mkfs + fsync'ed file workload + fsck; a marker file for boot
#     2; then fio running: the bridge's CPU time stays ~0 and it holds no
#     eventfd (no datapath in userspace); QEMU killed with -9: the bridge
#     survives, vhost_blk unloads and reloads;
#  2. L3 boot: a new QEMU on the same bridge (guest "reboot", after the
#     kill), with QEMU's default devices as users' VMs have them (a VGA card:
#     SeaBIOS and the guest change the memory map while the disk runs, and
#     QEMU sends SET_MEM_TABLE again; it crashed the bridge once): new
#     handshake, marker intact, fsck clean; fio running, the bridge killed
#     with -9: /dev/vhost-blk is released (vhost_blk unloads while QEMU
#     lives).
set -u
E2E=${E2E_DIR:-/src/selftests/e2e}
SOCK=/tmp/e2e-vb.sock
BLOG=/tmp/e2e-bridge.log
DISK=/dev/ram0
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

QARGS=(-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem
       -chardev socket,id=c0,path=$SOCK
       -device vhost-user-blk-pci,chardev=c0,num-queues=2)

guest_script() {
	# l3run takes no script arguments: one small script per call.
	local f=/tmp/e2e-guest-$(echo "$*" | tr ' ' '-').sh
	printf '#!/bin/sh\nexec bash %s/guest.sh %s\n' "$E2E" "$*" >"$f"
	echo "$f"
}

bridge_pid=
start_bridge() {
	vhost-blk-bridge --socket $SOCK --backend $DISK --queues 2 \
		--serial e2e-disk -v >>$BLOG 2>&1 &
	bridge_pid=$!
	for _ in $(seq 50); do
		[ -S $SOCK ] && return 0
		sleep 0.1
	done
	return 1
}

# utime + stime of the bridge's main thread, in clock ticks.  (On 6.12 the
# vhost worker is a thread of the bridge process: it is the in-kernel
# datapath and is not counted here.)
bridge_ticks() {
	awk '{ print $14 + $15 }' /proc/$bridge_pid/task/$bridge_pid/stat
}

# Requests vhost_blk completed, all devices (its debugfs statistics).
vhost_reqs() {
	cat /sys/kernel/debug/vhost-blk/[0-9]*/stats 2>/dev/null |
		awk '$1 == "reqs" { r += $2 } END { print r + 0 }'
}

bridge_eventfds() {
	ls -l /proc/$bridge_pid/fd 2>/dev/null | grep -c eventfd
}

sessions_ended() {
	grep -c "session ended" $BLOG
}

wait_sessions() {
	local want=$1 end=$(($(date +%s) + 20))
	while [ "$(date +%s)" -le $end ]; do
		[ "$(sessions_ended)" -ge "$want" ] && return 0
		sleep 0.2
	done
	return 1
}

kill_qemu() {
	local p
	p=$(pidof qemu-system-x86_64) && kill -9 $p
}

# A background L3 guest that reset itself (the nested-SVM flake): vmrun's
# line goes to our output, where run-tests.sh's rerun rule looks for it.
l3_reset_said() {
	grep -h 'vmrun: VM ended without reporting an exit status (qemu rc=0)' "$@" 2>/dev/null
	return 0
}

# Pass on the sub-check lines of a background L3 run (the guest's output as
# far as it got: see start_long_guest).
forward() {
	tr -d '\r' <"$1" 2>/dev/null | grep -E '^(not )?ok - '
	tr -d '\r' <"$1" 2>/dev/null | grep -q '^not ok - ' && fail=1
	return 0
}

# The newest L3 run directory (l3run takes the first free /tmp/l3run.N).
newest_l3dir() {
	ls -d /tmp/l3run.* 2>/dev/null | sort -t. -k2 -n | tail -n 1
}

l3_bg_pid= l3_out= l3_opts=
# Start an L3 in the background, wait until fio runs in it.  l3run prints
# the guest's output only when the guest ends (L2's busybox tail cannot
# follow a pid), so watch the file vmrun writes it to instead; l3_out names
# it for forward().  A guest that never gets there is left to reach its own
# time limit (a normal one gets there in about 60 s): then vmrun says if it
# hung or had stopped running (the nested-SVM flake, which run-tests.sh
# runs again), and the guest's last lines are shown.
start_long_guest() {
	local out=$1 prev
	shift
	: >"$out"
	prev=$(newest_l3dir)
	# shellcheck disable=SC2086
	l3run -t 300 $l3_opts "$(guest_script "$@")" "${QARGS[@]}" >"$out" 2>&1 &
	l3_bg_pid=$!
	l3_out=
	while kill -0 $l3_bg_pid 2>/dev/null; do
		if [ -z "$l3_out" ] && [ "$(newest_l3dir)" != "$prev" ]; then
			l3_out=$(newest_l3dir)/output.log
		fi
		if [ -n "$l3_out" ] && grep -qs FIO-RUNNING "$l3_out"; then
			sleep 5
			return 0
		fi
		sleep 0.5
	done
	wait $l3_bg_pid
	sed 's/^/# L3: /' "$out"
	bridge_died
	diag
	return 1
}

# A guest that never came up because the bridge died under it is not the
# nested-KVM flake: say so (run-tests.sh then does not run the test again).
bridge_died() {
	local st
	kill -0 $bridge_pid 2>/dev/null && return 1
	wait $bridge_pid 2>/dev/null
	st=$?
	echo "# not-the-flake: the bridge died (exit status $st) while the L3 guest ran"
	nok "the bridge lived through the L3 guest's boot (exit status $st)"
	tail -n 5 $BLOG | sed 's/^/# bridge: /'
	return 0
}

diag() {
	echo "# bridge state: $(cat /proc/$bridge_pid/wchan 2>/dev/null)"
	sed 's/^/# bridge stack: /' /proc/$bridge_pid/stack 2>/dev/null
	for t in /proc/$bridge_pid/task/*; do
		echo "# task ${t##*/}: $(cat $t/comm) $(cat $t/wchan 2>/dev/null)"
	done
}

# ---- setup ---------------------------------------------------------------
modprobe vhost_blk || { nok "modprobe vhost_blk"; exit 1; }
modprobe brd rd_nr=1 rd_size=$((256 * 1024)) || { nok "modprobe brd"; exit 1; }
: >$BLOG
check "bridge starts on $DISK" start_bridge || { cat $BLOG; exit 1; }

# ---- 1. data paths, bridge idle under load, QEMU killed with -9 ------------
base=$(sessions_ended)
t0=$(bridge_ticks)
if start_long_guest /tmp/e2e-run1.out data long 0; then
	forward "$l3_out"
	t1=$(bridge_ticks)
	echo "# bridge main thread CPU, session setup + data checks: $((t1 - t0)) ticks"
	check "rings stopped and restarted across guest driver reloads" \
		test "$(grep -c 'rings started' $BLOG)" -ge 3
	t0=$(bridge_ticks) r0=$(vhost_reqs)
	sleep 5
	t1=$(bridge_ticks) r1=$(vhost_reqs)
	echo "# bridge main thread CPU during 5 s of guest fio: $((t1 - t0)) ticks"
	check "the guest's fio runs meanwhile: $((r1 - r0)) requests at vhost_blk in 5 s" \
		test $((r1 - r0)) -gt 0
	check "bridge does no datapath work: CPU $((t1 - t0)) ticks <= 2 in 5 s of fio" \
		test $((t1 - t0)) -le 2
	check "bridge holds no kick/call eventfd ($(bridge_eventfds))" \
		test "$(bridge_eventfds)" = 0
	kill_qemu
	wait $l3_bg_pid 2>/dev/null
	l3_reset_said /tmp/e2e-run1.out
	check "bridge ends the session when QEMU is killed -9" wait_sessions $((base + 1))
	check "bridge survives QEMU kill -9" kill -0 $bridge_pid
	check "vhost_blk unloads after the QEMU kill (bridge idle)" rmmod vhost_blk
	check "vhost_blk loads again" modprobe vhost_blk
else
	forward "${l3_out:-/tmp/e2e-run1.out}"
	nok "L3 data checks, then fio running (use_bio=0)"
	kill_qemu
fi

# ---- 2. new QEMU on the same bridge; bridge killed with -9 -----------------
mark=$(wc -l <$BLOG)
l3_opts=-d
if start_long_guest /tmp/e2e-long2.out check long 1; then
	forward "$l3_out"
	ok "fio running in L3 after a new handshake (use_bio=1, QEMU's default devices)"
	tables=$(tail -n +$((mark + 1)) $BLOG | grep -c 'memory table:')
	check "QEMU sent the memory table again while the rings ran ($tables tables), the bridge lives" \
		test "$tables" -ge 2 -a -d /proc/$bridge_pid
	kill -9 $bridge_pid
	wait $bridge_pid 2>/dev/null
	sleep 1
	check "vhost_blk unloads after the bridge is killed -9 (device released)" \
		rmmod vhost_blk
	kill_qemu
	wait $l3_bg_pid 2>/dev/null
	l3_reset_said /tmp/e2e-long2.out
else
	forward "${l3_out:-/tmp/e2e-long2.out}"
	nok "fio running in L3 after a new handshake (use_bio=1, QEMU's default devices)"
	kill -9 $bridge_pid 2>/dev/null
	kill_qemu
fi

if [ $fail != 0 ]; then
	echo "# ---- bridge log ----"
	grep -v 'region [0-9]' $BLOG | sed 's/^/# /'
fi
exit $fail
