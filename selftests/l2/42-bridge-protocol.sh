#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# vhost-blk-bridge's control plane on its own, in L2 (no L3 guest): command
# line errors, raw vhost-user messages good and malformed (a malformed
# message ends only its own session), and the write-cache mode a guest sets
# with SET_CONFIG lasting for its session only.
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
check "  the backend is reopened with O_DSYNC" grep -q "write cache off" $BLOG
wce=$(get_wce | vu | awk '{ print $NF }')
check "the next session starts in write-back mode again (wce=$wce)" test "$wce" = 01
check "  the backend is reopened without O_DSYNC" grep -q "write cache on" $BLOG
{ msg 25 13; u32 0; u32 1; u32 0; printf '\x01'; } | vu >/dev/null
check "SET_CONFIG outside the wce byte is refused" grep -q "only the wce byte is writable" $BLOG

kill $bridge_pid
wait $bridge_pid 2>/dev/null
check "vhost_blk unloads after the bridge exits" rmmod vhost_blk
rmmod brd
