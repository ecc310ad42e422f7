#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# selftests/e2e/migrate-guest.sh [PHASES]: the L3 half of
# selftests/l2/46-migrate.sh (all three phases) and 49-virsh-migrate.sh
# (PHASES "1 2").
# "mig-disk" is served by vhost_blk through a bridge in L2; "mig-mbox" is
# QEMU's own virtio-blk on a file, a mailbox: once L2 has migrated this
# guest to another QEMU it writes "MIGRATED-n" into its first sector.
#
# Phase 1 (virtio_blk_bio use_bio=0) and phase 2 (use_bio=1): the guest asks
# for a migration ("MIGRATE n") and writes fresh 4 MiB regions with fio
# verify=crc32c, one after another, until the mailbox says it moved, then
# one more region on the destination; then every region written so far,
# on either side, is read back and verified. Phase 3: no I/O at all while
# L2 migrates the guest; then every region is verified again.
# No region is written twice: region i is [4i MiB, 4i + 4 MiB).
set -u
phases=${1:-1 2 3}
. /src/selftests/virtio_blk_bio/lib.sh
REG_MIB=4
MAX_REGIONS=56
nreg=0

[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null

find_disks() {
	local i
	for i in $(seq 100); do
		disk=$(disk_by_serial mig-disk) && mbox=$(disk_by_serial mig-mbox) &&
			return 0
		sleep 0.1
	done
	return 1
}

mailbox() {
	dd if=/dev/$mbox bs=512 count=1 iflag=direct 2>/dev/null | tr -dc 'A-Z0-9-'
}

# region I FIO_ARGS...: fio on region I, the same pattern every time.
region() {
	local i=$1; shift
	fio --name=r$i --filename=/dev/$disk --offset=$((i * REG_MIB))m \
		--size=${REG_MIB}m --direct=1 --ioengine=libaio --iodepth=16 \
		--rw=randwrite --bs=4k --randseed=$((1000 + i)) --verify=crc32c \
		--verify_fatal=1 "$@" >/tmp/fio-r$i.out 2>&1 &&
		! grep -q "err= *[1-9]" /tmp/fio-r$i.out
}

write_region() {
	region $nreg --do_verify=1 ||
		{ grep -E "err=|verify" /tmp/fio-r$nreg.out | head -5; return 1; }
	nreg=$((nreg + 1))
}

verify_all() {
	local i bad=0
	for i in $(seq 0 $((nreg - 1))); do
		region $i --verify_only=1 ||
			{ echo "# region $i:"; grep -E "err=|verify" /tmp/fio-r$i.out | head -3; bad=$((bad + 1)); }
	done
	echo "# $nreg regions verified, $bad bad"
	[ $bad = 0 ]
}

# write_until WORD: regions until the mailbox says WORD, then one more.
write_until() {
	local first=$nreg
	while [ "$(mailbox)" != "$1" ]; do
		[ $nreg -lt $MAX_REGIONS ] || { echo "# the mailbox never said $1"; return 1; }
		write_region || return 1
	done
	write_region || return 1
	echo "# regions $first..$((nreg - 1)) written, the last one after the migration"
}

# wait_mailbox WORD: idle until the mailbox says WORD (600 s at most).
wait_mailbox() {
	local i
	for i in $(seq 600); do
		[ "$(mailbox)" = "$1" ] && return 0
		sleep 1
	done
	return 1
}

for phase in 1 2; do
	[[ " $phases " == *" $phase "* ]] || continue
	P="use_bio=$((phase - 1)): "
	if ! modprobe virtio_blk_bio use_bio=$((phase - 1)) || ! find_disks; then
		nok "the disks appear"
		grep -H . /sys/block/*/serial 2>/dev/null
		break
	fi
	echo "MIGRATE $phase"
	check "fio verify=crc32c on fresh regions, one after another, while L2 migrates the guest" \
		write_until MIGRATED-$phase
	check "every region written so far, before, during and after the migration, reads back intact" \
		verify_all
	rmmod virtio_blk_bio || nok "rmmod virtio_blk_bio"
done
P="idle: "
if [[ " $phases " != *" 3 "* ]]; then
	:	# not asked for
elif modprobe virtio_blk_bio use_bio=1 && find_disks; then
	echo "MIGRATE 3"
	check "the guest migrated while it did no I/O" wait_mailbox MIGRATED-3
	check "every region reads back intact after it" verify_all
	check "and a fresh region is written and verified" write_region
	rmmod virtio_blk_bio || nok "rmmod virtio_blk_bio"
else
	nok "the disks appear"
fi
P=""
echo "MIGRATE-DONE"
[ $fails = 0 ]
