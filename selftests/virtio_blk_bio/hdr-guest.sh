#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# In L3, for selftests/l2/33-virtio-blk-bio-header.sh: on the one disk (a
# vhost-user-blk device served by vhost_blk in L2, which traces every request
# it takes), the requests whose headers and flushes L2 checks. Marker writes
# at MARK_MB + k MiB tell L2 where part k starts:
#   0, 1  use_bio=0, 1: GET_ID, discard, write zeroes and flush, each away
#         from sector 0
#   2     use_bio=1: 4 O_SYNC writes of 1 MiB, each split in 4 parts by
#         max_sectors_kb=256 (each bio PREFLUSH|FUA)
#   3     use_bio=1: 8 jobs x 16 O_SYNC 4k writes at once
#   4     the end
# Prints TAP-style lines.
set -u
MARK_MB=${MARK_MB:-200}
. "$(dirname "$0")/lib.sh"
DEV=/dev/vda

marker() { # k
	check "marker write $1 at $((MARK_MB + $1)) MiB" \
		dd if=/dev/zero of=$DEV bs=4k count=1 seek=$(((MARK_MB + $1) * 256)) oflag=direct
}

[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null
for ub in 0 1; do
	P="use_bio=$ub: "
	check "modprobe virtio_blk_bio use_bio=$ub" modprobe virtio_blk_bio use_bio=$ub
	for _ in $(seq 100); do [ -b $DEV ] && break; sleep 0.1; done
	marker "$ub"
	check "serial read (GET_ID)" cat /sys/block/vda/serial
	check "discard of 1 MiB at $((8 + 4 * ub)) MiB" blkdiscard -o $(((8 + 4 * ub) << 20)) -l 1M $DEV
	check "write zeroes of 1 MiB at $((9 + 4 * ub)) MiB" \
		blkdiscard -z -o $(((9 + 4 * ub) << 20)) -l 1M $DEV
	check "write at $((10 + 4 * ub)) MiB + fsync (flush)" \
		dd if=/dev/zero of=$DEV bs=4k count=1 seek=$(((10 + 4 * ub) * 256)) conv=fsync
	[ "$ub" = 1 ] || { check "rmmod virtio_blk_bio" rmmod virtio_blk_bio; continue; }

	marker 2
	msk=$(cat /sys/block/vda/queue/max_sectors_kb)
	echo 256 >/sys/block/vda/queue/max_sectors_kb
	check "4 O_SYNC writes of 1 MiB, 4 parts each" \
		fio --name=split --filename=$DEV --ioengine=psync --direct=1 --sync=1 \
		--rw=write --bs=1M --offset=32M --size=4M --output-format=terse
	echo "$msk" >/sys/block/vda/queue/max_sectors_kb
	marker 3
	check "8 jobs x 16 O_SYNC 4k writes" \
		fio --name=cf --filename=$DEV --ioengine=psync --direct=1 --sync=1 \
		--rw=write --bs=4k --size=64k --numjobs=8 --offset=48M \
		--offset_increment=256k --group_reporting --output-format=terse
	marker 4
	check "rmmod virtio_blk_bio" rmmod virtio_blk_bio
done
P=""
[ "$fails" = 0 ]
