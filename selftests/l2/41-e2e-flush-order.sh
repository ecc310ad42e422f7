#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Flush/FUA order of the guest's bio path (virtio_blk_bio use_bio=1), seen
# end to end at the vhost_blk tracepoints in L2: an L3 guest does 16 O_SYNC
# direct 4 KiB writes, one at a time, through vhost-blk-bridge and
# /dev/vhost-blk.  Each write must complete before its flush is submitted
# (FUA = write, then flush, then completion) and the next write must wait
# for it: the request sequence at the device is 16 x (W w F f F f) with
# queue/fua=1 (FUA emulation flush + the O_SYNC fsync flush), 16 x (W w F f)
# without (W/F submitted, w/f completed).
set -u
SOCK=/tmp/e2e-fl.sock
BLOG=/tmp/e2e-fl-bridge.log
T=/sys/kernel/tracing
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

modprobe vhost_blk || { nok "modprobe vhost_blk"; exit 1; }
modprobe brd rd_nr=1 rd_size=$((256 * 1024)) || { nok "modprobe brd"; exit 1; }
[ -d $T/events ] || mount -t tracefs nodev $T 2>/dev/null
if [ ! -d $T/events/vhost_blk ]; then
	ok "bio path flush order # SKIP no vhost_blk tracepoints"
	exit 0
fi
echo 16384 >$T/buffer_size_kb
echo >$T/trace
echo 1 >$T/events/vhost_blk/vhost_blk_submit/enable
echo 1 >$T/events/vhost_blk/vhost_blk_complete/enable

vhost-blk-bridge --socket $SOCK --backend /dev/ram0 --queues 2 >$BLOG 2>&1 &
bpid=$!
for _ in $(seq 50); do [ -S $SOCK ] && break; sleep 0.1; done
printf '#!/bin/sh\nexec bash /src/selftests/e2e/guest.sh flush\n' >/tmp/e2e-fl-guest.sh
l3run -t 300 /tmp/e2e-fl-guest.sh \
	-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem \
	-chardev socket,id=c0,path=$SOCK \
	-device vhost-user-blk-pci,chardev=c0,num-queues=2 | tee /tmp/e2e-fl.out
check "L3 O_SYNC writes on the bio path" test "${PIPESTATUS[0]}" = 0
echo 0 >$T/events/vhost_blk/enable
kill $bpid
wait $bpid 2>/dev/null

# Requests on the test range (guest.sh FLUSH_SECTOR, 16 x 8 sectors) and
# the flushes from the first of them on.
seq_=$(awk -v lo=$((200 << 11)) -v hi=$(((200 << 11) + 16 * 8)) '
	/vhost_blk_(submit|complete):/ {
		ev = ($0 ~ /vhost_blk_submit:/) ? "s" : "c"
		type = ""; sector = -1
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^type=/) type = substr($i, 6)
			if ($i ~ /^sector=/) sector = substr($i, 8) + 0
		}
		if (type == 1 && sector >= lo && sector < hi) {
			started = 1
			out = out (ev == "s" ? "W" : "w")
		} else if (type == 4 && started) {
			out = out (ev == "s" ? "F" : "f")
		}
	}
	END { print out }' $T/trace)
# With queue/fua=1 each write is a REQ_FUA bio: the driver's FUA emulation
# flush, then the flush of the O_SYNC fsync.  Without FUA only the latter.
if grep -q 'queue/fua=1' /tmp/e2e-fl.out; then unit=WwFfFf; else unit=WwFf; fi
want=$(for _ in $(seq 16); do printf $unit; done)
echo "# request order at vhost_blk: ${seq_:0:96}"
echo "# expected (16 x $unit):      $want"
check "bio path: each O_SYNC write completes before its flush(es); the next write waits for them" \
	test "${seq_:0:${#want}}" = "$want"
[ $fail = 0 ] || sed 's/^/# /' $BLOG | tail -20
exit $fail
