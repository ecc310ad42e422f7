#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The request headers virtio_blk_bio writes, seen by a device: an L3 guest
# (selftests/virtio_blk_bio/hdr-guest.sh) sends GET_ID, DISCARD, WRITE_ZEROES
# and FLUSH on both paths to a vhost-user-blk disk served by vhost-blk-bridge
# and vhost_blk, whose vhost_blk_submit tracepoint shows each header's type
# and sector. The virtio spec has sector 0 in the header of every request
# other than a read or a write (the range of a discard or write zeroes is in
# its segment): a device that checks this fails requests that do not.
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

# "type sector" of each request from the marker write of a path on, up to the
# next path's marker: path 0 from MARK_MB MiB, path 1 from MARK_MB + 1 MiB.
awk -v m0=$((MARK_MB << 11)) -v m1=$(((MARK_MB + 1) << 11)) '
	/vhost_blk_submit:/ {
		type = ""; sector = ""
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^type=/) type = substr($i, 6)
			if ($i ~ /^sector=/) sector = substr($i, 8)
		}
		if (type == 1 && sector == m0) path = 0
		else if (type == 1 && sector == m1) path = 1
		else if (path != "") print path, type, sector
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
[ $fail = 0 ] || sed 's/^/# /' $BLOG | tail -20
exit $fail
