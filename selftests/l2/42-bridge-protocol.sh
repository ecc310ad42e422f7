#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# vhost-blk-bridge's control plane on its own, in L2 (no L3 guest), with the
# real /dev/vhost-blk: command line errors, raw vhost-user messages good and
# malformed (a malformed message ends only its own session), the write-cache
# mode a guest sets with SET_CONFIG lasting for its session only, writeback = 0
# without VIRTIO_BLK_F_FLUSH, and the backend never opened again by path.
# (The socket options, fd passing, timeouts, signals and the rest are tested on
# the host: selftests/bridge/bridge-test.py.)
set -u
SOCK=/tmp/bp.sock
BLOG=/tmp/bp-bridge.log
DISK=/dev/ram0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

modprobe vhost_blk || { nok "modprobe vhost_blk"; exit 1; }
modprobe brd rd_nr=1 rd_size=$((64 * 1024)) || { nok "modprobe brd"; exit 1; }
: >$BLOG
check "bridge: nonzero exit for a missing backend" \
	sh -c '! vhost-blk-bridge --socket /tmp/x.sock --backend /nonexistent 2>/dev/null'
check "bridge: nonzero exit for bad arguments" \
	sh -c '! vhost-blk-bridge --socket /tmp/x.sock --backend /dev/ram0 --queues 99 2>/dev/null'
check "bridge: nonzero exit for a busy poll above 10000 us" \
	sh -c '! vhost-blk-bridge --socket /tmp/x.sock --backend /dev/ram0 --poll-us 10001 2>/dev/null'
check "bridge: nonzero exit for an interrupt delay above 10000 us" \
	sh -c '! vhost-blk-bridge --socket /tmp/x.sock --backend /dev/ram0 --irq-delay-us 10001 2>/dev/null'
check "bridge: nonzero exit for a missing device node" \
	sh -c '! vhost-blk-bridge --socket /tmp/x.sock --backend /dev/ram0 --vhost-dev /dev/nonexistent 2>/dev/null'

vhost-blk-bridge --socket $SOCK --backend $DISK --queues 2 -v >>$BLOG 2>&1 &
bridge_pid=$!
for _ in $(seq 50); do [ -S $SOCK ] && break; sleep 0.1; done
[ -S $SOCK ] || { nok "bridge starts on $DISK"; cat $BLOG; exit 1; }
ok "bridge starts on $DISK"

sessions_ended() { grep -c "session ended" $BLOG; }
wait_sessions() {
	local want=$1 end=$(($(date +%s) + 20))
	while [ "$(date +%s)" -le $end ]; do
		[ "$(sessions_ended)" -ge "$want" ] && return 0
		sleep 0.2
	done
	return 1
}
u32() {
	printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $(($1 & 255)) $((($1 >> 8) & 255)) \
		$((($1 >> 16) & 255)) $((($1 >> 24) & 255)))"
}
u64() { u32 $(($1 & 0xffffffff)); u32 $(($1 >> 32)); }
msg() { u32 "$1"; u32 1; u32 "$2"; }	# request, payload size (version 1)
vu() { socat -t 2 - UNIX-CONNECT:$SOCK 2>/dev/null | od -An -tx1 | tr -s ' \n' ' '; }

# GET_FEATURES: reply = request 1, flags 0x5 (reply, version 1), 8 bytes.
reply=$(msg 1 0 | vu)
check "GET_FEATURES answered (${reply:0:40})" \
	test "${reply:0:36}" = " 01 00 00 00 05 00 00 00 08 00 00 00"
# GET_QUEUE_NUM = 2
reply=$(msg 17 0 | vu)
check "GET_QUEUE_NUM answers 2" test "${reply:36:24}" = " 02 00 00 00 00 00 00 00"

# A worker per queue where the vhost core has the worker ioctls (6.5 and
# later): since 6.4 a worker is a task of the owner named vhost-PID, so a
# session of a --queues 2 bridge holds two.  Without them (6.1) the device's
# one worker is a kernel thread, and the bridge says the queues share it.
workers() { grep -lx "vhost-$bridge_pid" /proc/$bridge_pid/task/*/comm 2>/dev/null | wc -l; }
{ msg 1 0; sleep 2; } | socat - UNIX-CONNECT:$SOCK >/dev/null 2>&1 &
for _ in $(seq 20); do [ "$(workers)" -ge 1 ] && break; sleep 0.1; done
sleep 0.5
nw=$(workers)
wait $!
kv=$(uname -r); kv=${kv%%-*}
if [ "${kv%%.*}" -gt 6 ] || { [ "${kv%%.*}" = 6 ] && [ "$(echo "$kv" | cut -d. -f2)" -ge 5 ]; }; then
	check "--queues 2 on $kv: a vhost worker per queue ($nw tasks vhost-$bridge_pid)" \
		sh -c "test $nw = 2 && grep -q 'queue 1: own vhost worker' $BLOG"
else
	check "--queues 2 on $kv: no worker ioctls, the queues share the device's worker" \
		sh -c "test $nw = 0 && grep -q 'VHOST_NEW_WORKER: .* (queues share one worker)' $BLOG"
fi

base=$(sessions_ended)
{ msg 99 0; } | vu >/dev/null
{ msg 2 4; u32 0; } | vu >/dev/null
{ msg 8 8; u32 5; u32 256; } | vu >/dev/null
{ msg 8 8; u32 0; u32 256; msg 9 40; u32 0; u32 0; u64 0x1000; u64 0x2000; u64 0x3000; u64 0; } | vu >/dev/null
{ printf 'xyz'; } | vu >/dev/null
check "malformed messages end their sessions" wait_sessions $((base + 5))
check "  unknown request logged" grep -q "unknown request 99" $BLOG
check "  wrong payload size logged" grep -q "malformed SET_FEATURES" $BLOG
check "  ring index out of range logged" grep -q "malformed SET_VRING_NUM: ring 5" $BLOG
check "  ring address outside guest memory logged" grep -q "ring outside guest memory" $BLOG
check "  short header logged" grep -q "short header" $BLOG
check "bridge keeps listening after malformed sessions" kill -0 $bridge_pid

# Write cache: wce is byte 32 of virtio_blk_config.  GET_CONFIG (24) and
# SET_CONFIG (25) carry offset, size, flags, then the bytes; the wce byte is
# the last byte of the GET_CONFIG reply.
get_wce() { msg 24 13; u32 32; u32 1; u32 0; printf '\x00'; }
set_wce() { msg 25 13; u32 32; u32 1; u32 0; printf "\\x0$1"; }
wce=$(get_wce | vu | awk '{ print $NF }')
check "a new session starts in write-back mode (wce=$wce)" test "$wce" = 01
wce=$({ set_wce 0; get_wce; } | vu | awk '{ print $NF }')
check "SET_CONFIG wce=0 switches the session to write-through (wce=$wce)" test "$wce" = 00
check "  logged" grep -q "write cache off (write-through, O_DSYNC)" $BLOG
wce=$(get_wce | vu | awk '{ print $NF }')
check "the next session starts in write-back mode again (wce=$wce)" test "$wce" = 01
# The backend's descriptors: the two opened at start, no other, none reopened.
bdev_fds() { for f in /proc/$1/fd/*; do [ "$(readlink "$f")" = "$2" ] && echo "${f##*/}"; done | sort | tr '\n' ' '; }
check "the bridge holds the two descriptors of $DISK it opened at start ($(bdev_fds $bridge_pid $DISK))" \
	test "$(bdev_fds $bridge_pid $DISK | wc -w)" = 2
{ msg 25 13; u32 0; u32 1; u32 0; printf '\x01'; } | vu >/dev/null
check "SET_CONFIG outside the wce byte is refused" grep -q "only the wce byte is writable" $BLOG

# Without VIRTIO_BLK_F_FLUSH the guest cannot flush: writes are durable at
# completion and the config says writeback = 0 (VIRTIO_F_VERSION_1 and
# VIRTIO_BLK_F_CONFIG_WCE acked, FLUSH not).
set_features() { msg 2 8; u64 "$1"; }
wce=$({ set_features $(((1 << 32) | (1 << 11))); get_wce; } | vu | awk '{ print $NF }')
check "without VIRTIO_BLK_F_FLUSH the config says writeback = 0 (wce=$wce)" test "$wce" = 00
check "  logged as write-through" grep -q "VIRTIO_BLK_F_FLUSH not negotiated: write-through" $BLOG
wce=$({ set_features $(((1 << 32) | (1 << 11))); set_wce 1; get_wce; } | vu | awk '{ print $NF }')
check "  SET_CONFIG writeback=1 is refused then (wce=$wce)" \
	sh -c "test '$wce' = 00 && grep -q 'SET_CONFIG wce=1: refused' $BLOG"
wce=$({ set_features $(((1 << 32) | (1 << 11) | (1 << 9))); get_wce; } | vu | awk '{ print $NF }')
check "with VIRTIO_BLK_F_FLUSH: writeback = 1 (wce=$wce)" test "$wce" = 01

kill $bridge_pid
wait $bridge_pid 2>/dev/null

# --poll-us: each ring's busy poll timeout is set on the device with its size.
: >$BLOG.poll
vhost-blk-bridge --socket $SOCK --backend $DISK --queues 2 --poll-us 50 -v >>$BLOG.poll 2>&1 &
bridge_pid=$!
for _ in $(seq 50); do [ -S $SOCK ] && break; sleep 0.1; done
{ msg 8 8; u32 0; u32 256; msg 8 8; u32 1; u32 128; } | vu >/dev/null
for _ in $(seq 50); do grep -q "ring 1: 50 us" $BLOG.poll && break; sleep 0.1; done
check "--poll-us 50: the device takes it for each ring sized" \
	sh -c "grep -q 'BUSYLOOP_TIMEOUT ring 0: 50 us' $BLOG.poll && grep -q 'BUSYLOOP_TIMEOUT ring 1: 50 us' $BLOG.poll &&
	       ! grep -q 'BUSYLOOP_TIMEOUT:' $BLOG.poll"
kill $bridge_pid
wait $bridge_pid 2>/dev/null

# --irq-delay-us: set on the device of each session.
: >$BLOG.irq
vhost-blk-bridge --socket $SOCK --backend $DISK --irq-delay-us 40 -v >>$BLOG.irq 2>&1 &
bridge_pid=$!
for _ in $(seq 50); do [ -S $SOCK ] && break; sleep 0.1; done
{ msg 8 8; u32 0; u32 256; } | vu >/dev/null
for _ in $(seq 50); do grep -q "VHOST_BLK_SET_IRQ_DELAY 40 us" $BLOG.irq && break; sleep 0.1; done
check "--irq-delay-us 40: the session's device takes it" \
	sh -c "grep -q 'VHOST_BLK_SET_IRQ_DELAY 40 us' $BLOG.irq && ! grep -q 'VHOST_BLK_SET_IRQ_DELAY:' $BLOG.irq"
kill $bridge_pid
wait $bridge_pid 2>/dev/null

# A file backend renamed and replaced after start: the sessions (and the
# device's backend) stay on the original inode.
F=/tmp/bp.img
rm -f $F $F.old; dd if=/dev/zero of=$F bs=1M count=8 2>/dev/null
orig=$(stat -c %i $F)
vhost-blk-bridge --socket $SOCK --backend $F --buffered >>$BLOG 2>&1 &
bridge_pid=$!
for _ in $(seq 50); do [ -S $SOCK ] && break; sleep 0.1; done
mv $F $F.old; dd if=/dev/zero of=$F bs=1M count=8 2>/dev/null
{ set_wce 0; set_wce 1; get_wce; } | vu >/dev/null
get_wce | vu >/dev/null
inos=$(for f in /proc/$bridge_pid/fd/*; do case $(readlink "$f") in $F*) stat -L -c %i "$f" ;; esac; done | sort | tr '\n' ' ')
check "a backend file replaced after start: the bridge keeps two descriptors of the original inode $orig ($inos)" \
	test "$inos" = "$orig $orig "
kill $bridge_pid
wait $bridge_pid 2>/dev/null
rm -f $F $F.old
check "vhost_blk unloads after the bridge exits" rmmod vhost_blk
rmmod brd
