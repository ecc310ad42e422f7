#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# selftests/e2e/real-host-guest.sh SERIAL SECTORS PATTERN_SECTOR: the L3 half of
# selftests/l2/44-real-host.sh, a guest of the README's quick start. Its disk is
# the vhost-user disk served by the installed bridge and /dev/vhost-blk in L2.
#
# virtio_blk_bio on the bio path (as the README loads it): the disk with serial
# SERIAL has SECTORS 512-byte sectors and passes fio verify=crc32c; then a 1 MiB
# pattern is written at PATTERN_SECTOR with O_DIRECT, which L2 reads back from the
# backend after the guest has gone.
set -u
serial=$1 sectors=$2 psect=$3
. /src/selftests/virtio_blk_bio/lib.sh

[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null
dev=
load() {
	modprobe virtio_blk_bio use_bio=1 || return 1
	for _ in $(seq 100); do
		dev=$(disk_by_serial "$serial") && return 0
		sleep 0.1
	done
	grep -H . /sys/block/*/serial 2>/dev/null
	return 1
}
pattern() { yes "vhost-blk real-host quick start: written by the L3 guest" | head -c 1048576; }
fio_verify() {
	fio --name=rh --filename=/dev/$dev --direct=1 --ioengine=libaio --iodepth=16 \
		--numjobs=2 --offset=0 --offset_increment=16m --size=16m --rw=randwrite \
		--bssplit=4k/40:16k/30:64k/30 --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--group_reporting >/tmp/fio.out 2>&1
	local rc=$?
	grep -E "err=|verify" /tmp/fio.out | head -4
	[ $rc = 0 ] && ! grep -q "err= *[1-9]" /tmp/fio.out
}
write_pattern() {
	pattern | dd of=/dev/$dev bs=1M seek=$((psect / 2048)) count=1 iflag=fullblock \
		oflag=direct conv=fsync 2>/dev/null
}

if check "guest: virtio_blk_bio (use_bio=1) binds the disk with serial $serial" load; then
	check "guest: capacity $sectors sectors ($(cat /sys/block/$dev/size))" \
		test "$(cat /sys/block/$dev/size)" = "$sectors"
	check "guest: fio randwrite, 2 jobs, verify=crc32c" fio_verify
	check "guest: 1 MiB pattern written (O_DIRECT, fsync)" write_pattern
fi
exit $fails
