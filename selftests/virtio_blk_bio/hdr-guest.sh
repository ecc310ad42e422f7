#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# In L3, for selftests/l2/33-virtio-blk-bio-header.sh: on the one disk (a
# vhost-user-blk device served by vhost_blk in L2, which traces every request
# header it takes), once per path (use_bio=0, then use_bio=1): a marker write
# at MARK_MB + path MiB that tells L2 where the path's requests start, then
# GET_ID, discard, write zeroes and flush, each away from sector 0. L2 reads
# their headers from the trace. Prints TAP-style lines.
set -u
MARK_MB=${MARK_MB:-200}
. "$(dirname "$0")/lib.sh"
DEV=/dev/vda

[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null
for ub in 0 1; do
	P="use_bio=$ub: "
	check "modprobe virtio_blk_bio use_bio=$ub" modprobe virtio_blk_bio use_bio=$ub
	for _ in $(seq 100); do [ -b $DEV ] && break; sleep 0.1; done
	check "marker write at $((MARK_MB + ub)) MiB" \
		dd if=/dev/zero of=$DEV bs=4k count=1 seek=$(((MARK_MB + ub) * 256)) oflag=direct
	check "serial read (GET_ID)" cat /sys/block/vda/serial
	check "discard of 1 MiB at $((8 + 4 * ub)) MiB" blkdiscard -o $(((8 + 4 * ub) << 20)) -l 1M $DEV
	check "write zeroes of 1 MiB at $((9 + 4 * ub)) MiB" \
		blkdiscard -z -o $(((9 + 4 * ub) << 20)) -l 1M $DEV
	check "write at $((10 + 4 * ub)) MiB + fsync (flush)" \
		dd if=/dev/zero of=$DEV bs=4k count=1 seek=$(((10 + 4 * ub) * 256)) conv=fsync
	check "rmmod virtio_blk_bio" rmmod virtio_blk_bio
done
P=""
[ "$fails" = 0 ]
