#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The request headers virtio_blk_bio writes, seen by a device: an L3 guest
# (selftests/virtio_blk_bio/hdr-guest.sh) sends GET_ID, DISCARD, WRITE_ZEROES
# and FLUSH on both paths to a vhost-user-blk disk served by vhost-blk-bridge
# and vhost_blk, whose vhost_blk_submit tracepoint shows each header's type
# and sector. The virtio spec has sector 0 in the header of every request
# other than a read or a write (the range of a discard or write zeroes is in
# its segment): a device that checks this fails requests that do not. Then
# the flushes the bio path sends: once per split PREFLUSH|FUA bio, not per
# part, and shared by concurrent writers. (QEMU's own devices merge adjacent
# writes and drop flushes with no write between them: they cannot count.)
set -u
SOCK=/tmp/vbb-hdr.sock
BLOG=/tmp/vbb-hdr-bridge.log
T=/sys/kernel/tracing
MARK_MB=200
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }

modprobe vhost_blk || { nok "modprobe vhost_blk"; exit 1; }
modprobe brd rd_nr=1 rd_size=$((256 * 1024)) || { nok "modprobe brd"; exit 1; }
[ -d $T/events ] || mount -t tracefs nodev $T 2>/dev/null
if [ ! -d $T/events/vhost_blk ]; then
	echo "no vhost_blk tracepoints"
	exit 77
fi
echo 16384 >$T/buffer_size_kb
echo >$T/trace
echo 1 >$T/events/vhost_blk/vhost_blk_submit/enable

vhost-blk-bridge --socket $SOCK --backend /dev/ram0 --queues 2 >$BLOG 2>&1 &
bpid=$!
for _ in $(seq 50); do [ -S $SOCK ] && break; sleep 0.1; done
printf '#!/bin/sh\nMARK_MB=%s exec bash /src/selftests/virtio_blk_bio/hdr-guest.sh\n' $MARK_MB \
	>/tmp/vbb-hdr-guest.sh
l3run -t 300 /tmp/vbb-hdr-guest.sh \
	-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem \
	-chardev socket,id=c0,path=$SOCK \
	-device vhost-user-blk-pci,chardev=c0,num-queues=2 >/tmp/vbb-hdr.out 2>&1
rc=$?
cat /tmp/vbb-hdr.out
[ $rc = 0 ] && ok "L3 guest run (exit 0)" || nok "L3 guest run (exit $rc)"
echo 0 >$T/events/vhost_blk/enable
kill $bpid
wait $bpid 2>/dev/null

# "part type sector len" of each request after the marker write of part k
# (a write of 4 KiB at MARK_MB + k MiB, see hdr-guest.sh).
awk -v m=$((MARK_MB << 11)) '
	/vhost_blk_submit:/ {
		type = ""; sector = ""; len = ""
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^type=/) type = substr($i, 6) + 0
			if ($i ~ /^sector=/) sector = substr($i, 8) + 0
			if ($i ~ /^len=/) len = substr($i, 5) + 0
		}
		if (type == 1 && len == 4096 && sector >= m && (sector - m) % 2048 == 0 &&
		    (sector - m) / 2048 <= 4)
			part = (sector - m) / 2048
		else if (part != "")
			print part, type, sector, len
	}' $T/trace >/tmp/vbb-hdr.txt
for ub in 0 1; do
	for t in 8:GET_ID 11:DISCARD 13:WRITE_ZEROES 4:FLUSH; do
		n=$(awk -v p=$ub -v t=${t%%:*} '$1 == p && $2 == t' /tmp/vbb-hdr.txt | wc -l)
		bad=$(awk -v p=$ub -v t=${t%%:*} '$1 == p && $2 == t && $3 != 0 { print $3 }' \
			/tmp/vbb-hdr.txt | sort -u | head -n 5 | tr '\n' ' ')
		if [ "$n" -gt 0 ] && [ -z "$bad" ]; then
			ok "use_bio=$ub: $n ${t#*:} request(s) at the device, header sector 0"
		else
			nok "use_bio=$ub: ${t#*:} requests at the device with header sector 0 ($n seen; sectors: ${bad:-none})"
		fi
	done
done
count() { # part type: requests of that type in that part
	awk -v p=$1 -v t=$2 '$1 == p && $2 == t' /tmp/vbb-hdr.txt | wc -l
}
# Part 2: 4 PREFLUSH|FUA bios of 1 MiB, each split in 4: 16 writes at the
# device and 2 flushes per bio (before its first part, after its last), not
# 2 per part.
w=$(count 2 1) f=$(count 2 4)
[ "$w" = 16 ] && [ "$f" -le 8 ] &&
	ok "use_bio=1: 4 split O_SYNC writes of 1 MiB: $w parts, $f flushes at the device (at most 2 per bio)" ||
	nok "use_bio=1: 4 split O_SYNC writes of 1 MiB: 16 parts and at most 8 flushes at the device ($w parts, $f flushes)"
# Part 3: 128 PREFLUSH|FUA writes from 8 jobs at once: the flushes they wait
# for while one is in flight share the next, fewer than 2 per write.
w=$(count 3 1) f=$(count 3 4)
[ "$w" = 128 ] || awk '{ print $1, $2 }' /tmp/vbb-hdr.txt | sort | uniq -c | sed 's/^/# part, type: /'
[ "$w" = 128 ] && [ "$f" -lt 256 ] &&
	ok "use_bio=1: 128 concurrent O_SYNC writes share flushes: $f at the device" ||
	nok "use_bio=1: 128 concurrent O_SYNC writes share flushes: fewer than 256 at the device ($w writes, $f flushes)"
[ $fail = 0 ] || sed 's/^/# /' $BLOG | tail -20
exit $fail
