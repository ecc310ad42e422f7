#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# selftests/e2e/libvirt-guest.sh SERIAL SECTORS PATTERN_SECTOR: the L3 half of
# selftests/l2/43-libvirt.sh, in the guest libvirt started. Its only disk is
# the vhost-user disk of the domain (vhost-blk-bridge + /dev/vhost-blk in L2).
#
# Both paths of virtio_blk_bio: the disk with virtio serial SERIAL appears with
# SECTORS 512-byte sectors; fio verify=crc32c; then a 1 MiB pattern is written
# at PATTERN_SECTOR with O_DIRECT (L2 reads it back from the backend after the
# domain is destroyed) and read back through the other path. Prints
# L3-CHECKS-DONE and waits to be destroyed (virsh destroy).
set -u
serial=$1 sectors=$2 psect=$3
. /src/selftests/virtio_blk_bio/lib.sh

[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null

dev=
load() {
	modprobe virtio_blk_bio use_bio="$1" || return 1
	for _ in $(seq 100); do
		dev=$(disk_by_serial "$serial") && return 0
		sleep 0.1
	done
	echo "no disk with serial $serial:"
	grep -H . /sys/block/*/serial 2>/dev/null
	return 1
}

pattern() {
	yes "vhost-blk libvirt e2e: written by the L3 guest of the domain" | head -c 1048576
}

fio_verify() { # offset (MiB)
	fio --name=lv --filename=/dev/$dev --direct=1 --ioengine=libaio --iodepth=16 \
		--numjobs=2 --offset=$(($1 << 20)) --offset_increment=16m --size=16m \
		--rw=randwrite --bssplit=4k/40:16k/30:64k/30 --verify=crc32c \
		--verify_fatal=1 --do_verify=1 --group_reporting >/tmp/fio.out 2>&1
	local rc=$?
	grep -E "err=|verify" /tmp/fio.out | head -4
	[ $rc = 0 ] && ! grep -q "err= *[1-9]" /tmp/fio.out
}

write_pattern() {
	pattern >/tmp/pattern
	dd if=/tmp/pattern of=/dev/$dev bs=1M seek=$((psect / 2048)) count=1 \
		oflag=direct conv=fsync 2>/dev/null
}

read_pattern() {
	[ "$(dd if=/dev/$dev bs=1M skip=$((psect / 2048)) count=1 iflag=direct \
		2>/dev/null | md5sum)" = "$(pattern | md5sum)" ]
}

if check "use_bio=1: virtio_blk_bio binds the vhost-user disk (serial $serial)" load 1; then
	check "use_bio=1: capacity $sectors sectors ($(cat /sys/block/$dev/size))" \
		test "$(cat /sys/block/$dev/size)" = "$sectors"
	check "use_bio=1: fio randwrite, 2 jobs, verify=crc32c" fio_verify 0
	check "use_bio=1: 1 MiB pattern written (O_DIRECT, fsync)" write_pattern
	check "rmmod virtio_blk_bio (use_bio=1)" rmmod virtio_blk_bio
fi
if check "use_bio=0: virtio_blk_bio binds the vhost-user disk again" load 0; then
	check "use_bio=0: fio randwrite, 2 jobs, verify=crc32c" fio_verify 32
	check "use_bio=0: the pattern reads back (O_DIRECT)" read_pattern
fi
echo "L3-CHECKS-DONE $fails"
sleep 3600
