#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# selftests/e2e/resize-guest.sh GROW_MIB SERIAL...: the L3 half of
# selftests/l2/45-resize.sh. Each SERIAL is a vhost-user disk served by a
# bridge and /dev/vhost-blk in L2, which L2 grows by GROW_MIB and shrinks
# back when this guest asks ("RESIZE-GROW n", "RESIZE-SHRINK n"; it then
# sends SIGHUP to the bridges).
#
# Three rounds, one per guest driver: stock virtio_blk, virtio_blk_bio on
# the request path (use_bio=0) and on the bio path (use_bio=1). In each:
#  - fio verify=crc32c runs on a region of the old size while the disks
#    grow; the guest sees the new size (sysfs) and fio verify=crc32c passes
#    on the new region (its first and last MiBs);
#  - fio verify=crc32c runs on another region while the disks shrink back;
#    the guest sees the old size again and a read past it gets nothing.
# Then the disks grow while no driver runs, and virtio_blk_bio loaded
# afterwards sees the new size, and they shrink back.
# Every fio region is one nothing earlier wrote (round r: [r*16M, +16M)
# while growing, [48M + r*16M, +16M) while shrinking, the new region is
# zeros again after each shrink).
set -u
grow_mib=$1
shift
serials=("$@")
. /src/selftests/virtio_blk_bio/lib.sh

[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null
declare -A dev size0

find_disks() {
	local s i
	for i in $(seq 100); do
		for s in "${serials[@]}"; do
			dev[$s]=$(disk_by_serial "$s") || dev[$s]=
		done
		for s in "${serials[@]}"; do
			[ -n "${dev[$s]}" ] || { sleep 0.1; continue 2; }
		done
		return 0
	done
	return 1
}

# wait_size SECTORS: every disk has SECTORS 512-byte sectors (60 s at most).
wait_size() {
	local s i want=$1
	for i in $(seq 600); do
		for s in "${serials[@]}"; do
			[ "$(cat /sys/block/${dev[$s]}/size)" = "$want" ] || { sleep 0.1; continue 2; }
		done
		return 0
	done
	for s in "${serials[@]}"; do
		echo "# $s (${dev[$s]}): $(cat /sys/block/${dev[$s]}/size) sectors, want $want"
	done
	return 1
}

# fio_bg NAME OFFSET_MIB: fio verify on 16 MiB of every disk, in the
# background; fio_wait NAME: its result.
fio_bg() {
	local s args=()
	for s in "${serials[@]}"; do
		args+=(--name="$1-$s" --filename=/dev/${dev[$s]} --offset=$(($2 << 20)))
	done
	fio --direct=1 --ioengine=libaio --iodepth=8 --size=16m --rw=randwrite \
		--bssplit=4k/30:64k/70 --verify=crc32c --verify_fatal=1 --do_verify=1 \
		"${args[@]}" >/tmp/fio-$1.out 2>&1 &
	echo $! >/tmp/fio-$1.pid
}

fio_wait() {
	local rc
	wait "$(cat /tmp/fio-$1.pid)"
	rc=$?
	grep -E "err=|verify:" /tmp/fio-$1.out | head -4
	[ $rc = 0 ] && ! grep -q "err= *[1-9]" /tmp/fio-$1.out
}

# fio_new: verify on the first and the last MiB of the grown part (fio
# would do no I/O at all past the end of a disk that did not grow).
fio_new() {
	local s args=() first
	for s in "${serials[@]}"; do
		[ "$(cat /sys/block/${dev[$s]}/size)" -ge $((size0[$s] + (grow_mib << 11))) ] ||
			{ echo "# $s: not grown"; return 1; }
		first=$((size0[$s] * 512))
		args+=(--name="new-$s" --filename=/dev/${dev[$s]} --offset=$first --size=1m
		       --name="end-$s" --filename=/dev/${dev[$s]}
		       --offset=$((first + ((grow_mib - 1) << 20))) --size=1m)
	done
	fio --direct=1 --ioengine=libaio --iodepth=8 --rw=randwrite --bs=4k \
		--verify=crc32c --verify_fatal=1 --do_verify=1 "${args[@]}" >/tmp/fio-new.out 2>&1
	local rc=$?
	grep -E "err=" /tmp/fio-new.out | head -4
	[ $rc = 0 ] && ! grep -q "err= *[1-9]" /tmp/fio-new.out
}

# past_end_empty: a direct read at the end of every disk returns no data.
past_end_empty() {
	local s n
	for s in "${serials[@]}"; do
		n=$(dd if=/dev/${dev[$s]} of=/dev/null bs=4k iflag=direct \
			skip=$((size0[$s] / 8)) count=1 2>&1 | sed -n 's/ bytes.*//p' | tail -n 1)
		[ "${n:-0}" = 0 ] || { echo "# $s: $n bytes read past the end"; return 1; }
	done
}

round=0
for drv in "virtio_blk" "virtio_blk_bio use_bio=0" "virtio_blk_bio use_bio=1"; do
	P="${drv/virtio_blk_bio use_bio=/use_bio=}: "
	mod=${drv%% *}
	if ! modprobe $drv || ! find_disks; then
		nok "the disks appear (${serials[*]})"
		grep -H . /sys/block/*/serial 2>/dev/null
		break
	fi
	for s in "${serials[@]}"; do size0[$s]=$(cat /sys/block/${dev[$s]}/size); done
	s=${serials[0]}
	grown=$((size0[$s] + (grow_mib << 11)))

	fio_bg grow$round $((round * 16))
	sleep 2
	echo "RESIZE-GROW $round"
	check "every disk grows to $grown sectors (sysfs) under fio" wait_size $grown
	check "fio verify=crc32c on the first and last MiB of the new part" fio_new
	check "fio verify=crc32c across the growth" fio_wait grow$round

	fio_bg shrink$round $((48 + round * 16))
	sleep 2
	echo "RESIZE-SHRINK $round"
	check "every disk shrinks back to ${size0[$s]} sectors (sysfs) under fio" wait_size "${size0[$s]}"
	check "a read past the new end gets no data" past_end_empty
	check "fio verify=crc32c across the shrink" fio_wait shrink$round
	rmmod $mod || nok "rmmod $mod"
	round=$((round + 1))
done
# A change while no driver runs: QEMU's device is stopped and drops the
# bridge's message; the bridge sends it again when the rings start, so the
# driver loaded afterwards sees the new size.
P="resize while no driver runs: "
echo "RESIZE-GROW $round"
sleep 5
if modprobe virtio_blk_bio use_bio=1 && find_disks; then
	check "the disks, found again, grow to $grown sectors" wait_size $grown
	check "fio verify=crc32c on the first and last MiB of the new part" fio_new
	echo "RESIZE-SHRINK $round"
	check "and shrink back to ${size0[$s]} sectors" wait_size "${size0[$s]}"
	rmmod virtio_blk_bio || nok "rmmod virtio_blk_bio"
else
	nok "the disks appear again (${serials[*]})"
fi
P=""
echo "RESIZE-DONE"
[ $fails = 0 ]
