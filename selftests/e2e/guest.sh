#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# selftests/e2e/guest.sh MODE: the L3 (guest) half of the end-to-end tests.
# The disk is a vhost-user-blk-pci device served by vhost-blk-bridge and
# /dev/vhost-blk in L2; the guest driver is virtio_blk_bio.
#
# Disk layout (at least 256 MiB): [0, 128M) ext4; [128M, 256M) raw fio area.
#
# MODE data [long [BIO]]  both guest paths (use_bio=1, 0): fio
#             verify=crc32c with mixed random writes on 2 jobs, mkfs + file
#             workload with fsync + fsck; a marker file for the next boot;
#             then, with "long", as MODE long.
# MODE check [long [BIO]]  the marker written by "data" is intact, fsck
#             clean; then, with "long", as MODE long.
# MODE long [BIO]  fio on the raw area (guest path use_bio=BIO, default 0)
#             until killed; prints FIO-RUNNING first.
# MODE flush  O_SYNC direct writes on the bio path (flush order, see
#             selftests/l2/41-e2e-flush-order.sh)
# MODE durable N SERIAL:BIO:fsync|nosync...  for each disk, found by its
#             serial, in turn: virtio_blk_bio loaded with use_bio=BIO, N known
#             4 KiB blocks written, each reported ("ACK SERIAL k") after its
#             write (nosync) or its write + fsync (fsync) completed; then
#             DURABLE-DONE and wait to be killed.
set -u
mode=${1:-data}
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

DEV=/dev/vda
MNT=/mnt/e2e
FS_SIZE=128M
RAW_OFF=$((128 << 20))
RAW_JOB=$((32 << 20))

[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null

load() {
	modprobe virtio_blk_bio use_bio="$1" || return 1
	for _ in $(seq 100); do
		[ -b $DEV ] && return 0
		sleep 0.1
	done
	return 1
}

unload() {
	rmmod virtio_blk_bio
}

marker() {
	yes "vhost-blk e2e marker: every fsync-acknowledged block counts" | head -c 4194304
}

fio_raw() {
	# 2 jobs (the device has 2 queues), each on its own 32 MiB region.
	fio --name=e2e-raw --filename=$DEV --direct=1 --ioengine=libaio \
		--iodepth=16 --numjobs=2 --offset=$RAW_OFF --offset_increment=$RAW_JOB \
		--size=$RAW_JOB --rw=randwrite \
		--bssplit=4k/35:8k/15:16k/20:64k/20:256k/10 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 \
		--group_reporting "$@" >/tmp/fio.out 2>&1
	local rc=$?
	grep -E "err=|IOPS=|verify" /tmp/fio.out | head -6
	[ $rc = 0 ] && ! grep -q "err= *[1-9]" /tmp/fio.out
}

fs_work() {
	mkdir -p $MNT
	mkfs.ext4 -q -F $DEV $FS_SIZE || return 1
	mount -t ext4 $DEV $MNT || return 1
	# Files written with an fsync every 4 writes, verified.
	fio --name=e2e-fs --directory=$MNT --nrfiles=4 --size=16m --bs=4k \
		--rw=randwrite --ioengine=psync --fsync=4 --verify=crc32c \
		--verify_fatal=1 --do_verify=1 >/tmp/fio-fs.out 2>&1
	local rc=$?
	grep -E "err=" /tmp/fio-fs.out | head -2
	umount $MNT || return 1
	[ $rc = 0 ] || return 1
	e2fsck -fn $DEV >/tmp/fsck.out 2>&1 || { cat /tmp/fsck.out; return 1; }
}

path_tests() {
	local bio=$1 nq
	check "use_bio=$bio: virtio_blk_bio binds the vhost-user disk" load "$bio"
	[ -b $DEV ] || return
	check "use_bio=$bio: capacity matches the backend ($(cat /sys/block/vda/size) sectors)" \
		test "$(cat /sys/block/vda/size)" -ge $((256 << 11))
	if [ "$bio" = 0 ]; then
		nq=$(ls -d /sys/block/vda/mq/* 2>/dev/null | wc -l)
		check "use_bio=0: 2 hardware queues ($nq)" test "$nq" = 2
	fi
	check "use_bio=$bio: fio randwrite mixed sizes, 2 jobs, verify=crc32c" fio_raw
	check "use_bio=$bio: mkfs, file workload with fsync, fsck clean" fs_work
}

# O_DSYNC direct writes through the bio path, one at a time, to a range of
# their own (sectors FLUSH_SECTOR...): L2 checks at the vhost_blk tracepoints
# that each write completes before its flush is sent, and that the next write
# waits for that flush.
FLUSH_SECTOR=$((200 << 11))
FLUSH_N=16
flush_order() {
	load 1 || { nok "use_bio=1 load for the flush order check"; return; }
	echo "# guest queue/fua=$(cat /sys/block/vda/queue/fua 2>/dev/null)" \
		"write_cache=$(cat /sys/block/vda/queue/write_cache 2>/dev/null)"
	echo FLUSH-ORDER-START
	# O_SYNC + O_DIRECT: each write is a REQ_FUA bio (queue/fua=1) or a
	# write followed by a flush; one at a time.
	fio --name=fua --filename=$DEV --rw=write --bs=4k --size=$((FLUSH_N * 4))k \
		--offset=$((FLUSH_SECTOR * 512)) --direct=1 --sync=1 \
		--ioengine=psync >/tmp/fio-fua.out 2>&1 ||
		{ cat /tmp/fio-fua.out; nok "O_SYNC writes for the flush order check"; }
	echo FLUSH-ORDER-DONE
	unload
}

long_run() {
	load "$1" || { nok "load for the long run"; exit 1; }
	echo FIO-RUNNING
	fio_raw --time_based --runtime=600 --do_verify=0
}

case $mode in
data)
	path_tests 1
	unload || nok "rmmod virtio_blk_bio (use_bio=1)"
	path_tests 0
	if [ -b $DEV ]; then
		mkdir -p $MNT
		if mount -t ext4 $DEV $MNT && marker >$MNT/marker && sync &&
		   umount $MNT; then
			ok "marker file written for the next boot"
		else
			nok "marker file written for the next boot"
		fi
	fi
	unload || nok "rmmod virtio_blk_bio (use_bio=0)"
	[ "${2:-}" = long ] && long_run "${3:-0}"
	;;
check)
	check "disk comes back on a new QEMU (virtio_blk_bio use_bio=0)" load 0
	mkdir -p $MNT
	check "fsck clean after the restart" e2fsck -fn $DEV
	if mount -t ext4 $DEV $MNT &&
	   [ "$(md5sum <$MNT/marker)" = "$(marker | md5sum)" ]; then
		ok "marker from the previous boot intact"
	else
		nok "marker from the previous boot intact"
	fi
	umount $MNT 2>/dev/null
	unload
	[ "${2:-}" = long ] && long_run "${3:-0}"
	;;
long)
	long_run "${2:-0}"
	;;
flush)
	flush_order
	;;
durable)
	n=$2; shift 2
	loaded=
	for spec in "$@"; do
		IFS=: read -r serial bio sync <<<"$spec"
		if [ "$loaded" != "$bio" ]; then
			[ -z "$loaded" ] || unload || { echo "rmmod failed"; exit 1; }
			load "$bio" || { nok "load for the durability run"; exit 1; }
			loaded=$bio
		fi
		dev=
		for _ in $(seq 100); do
			for d in /sys/block/vd*; do
				[ "$(cat "$d/serial" 2>/dev/null)" = "$serial" ] && dev=/dev/${d##*/}
			done
			[ -n "$dev" ] && break
			sleep 0.1
		done
		[ -n "$dev" ] || { echo "no disk with serial $serial"; exit 1; }
		echo "path $serial $(sed -n 's/^path //p' "/sys/block/${dev#/dev/}/driver_stats")"
		conv=; [ "$sync" = fsync ] && conv=conv=fsync
		for k in $(seq 0 $((n - 1))); do
			yes "DURABLE block $k vhost-blk" | head -c 4096 >/tmp/blk
			dd if=/tmp/blk of="$dev" bs=4096 seek="$k" count=1 oflag=direct $conv \
				2>/dev/null || { echo "write $serial $k failed"; exit 1; }
			echo "ACK $serial $k"
		done
	done
	echo DURABLE-DONE
	sleep 600
	;;
*)
	echo "guest.sh: unknown mode $mode" >&2
	exit 2
	;;
esac
exit $fail
