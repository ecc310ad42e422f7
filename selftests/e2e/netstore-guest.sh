#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# selftests/e2e/netstore-guest.sh BOUND SERIAL...: the L3 half of
# selftests/l2/48-netstore.sh. Each SERIAL is a vhost-user disk whose
# backend in L2 is a network block device (NBD, iSCSI) on a server in
# another network namespace. BOUND is the most seconds any I/O may take to
# end, completed or failed, while the network or the server is down.
#
# 1. With virtio_blk_bio use_bio=0 (the request path), on every disk: fio
#    random writes of mixed sizes with verify=crc32c, and mkfs, a file
#    workload with fsync, fsck (on the first 48 MiB). Once, not per path:
#    the network storage is vhost_blk's backend, the paths differ in the
#    guest (40-e2e runs this on both), and each pass costs minutes here.
# 2. With use_bio=1 loaded (the bio path), on every disk:
#    - F: 16 MiB written and flushed (fio end_fsync); L2 reads it back
#      through new connections after everything below.
#    - short cut: writes across a 4 s link cut ("NETSTORE-CUT short"),
#      then read back: every block verifies, no I/O error.
#    - server restart: L2 kills the servers and starts them again under
#      writes ("NETSTORE-KILL"); each fio must end within BOUND seconds
#      more than its writes take, its I/O completed or failed (EIO), never
#      hung. Then
#      ("NETSTORE-REVIVE") L2 connects NBD again under a new bridge, and
#      every disk must serve reads again.
#    - long cut: the link stays down longer than the timeouts
#      ("NETSTORE-CUT long"); the same rule.
#    What fio saw on each disk is printed (time, error); which disk fails
#    is the initiator's business (the docs say what each does).
set -u
bound=$1
shift
serials=("$@")
. /src/selftests/virtio_blk_bio/lib.sh

[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null

declare -A dev
find_disks() {
	local i s d
	for i in $(seq 100); do
		for s in "${serials[@]}"; do
			d=$(disk_by_serial "$s") && dev[$s]=/dev/$d
		done
		[ ${#dev[@]} = ${#serials[@]} ] && return 0
		sleep 0.1
	done
	return 1
}

fio_ok() { # OUT
	grep -E "err=|verify:" "$1" | head -4
	! grep -q "err= *[1-9]" "$1"
}

fio_raw() { # DEV OFFSET
	fio --name=raw --filename="$1" --direct=1 --ioengine=libaio --iodepth=16 \
		--numjobs=2 --offset="$2" --offset_increment=8m --size=8m \
		--rw=randwrite --bssplit=4k/40:16k/30:64k/30 \
		--verify=crc32c --verify_fatal=1 --do_verify=1 >/tmp/fio-raw.out 2>&1 &&
		fio_ok /tmp/fio-raw.out
}

fs_work() { # DEV
	mkdir -p /mnt/t
	mkfs.ext4 -q -F "$1" 48m || return 1
	mount -t ext4 "$1" /mnt/t || return 1
	fio --name=fs --directory=/mnt/t --nrfiles=4 --size=8m --bs=4k \
		--rw=randwrite --ioengine=psync --fsync=4 --verify=crc32c \
		--verify_fatal=1 --do_verify=1 >/tmp/fio-fs.out 2>&1
	local rc=$?
	umount /mnt/t || return 1
	[ $rc = 0 ] && fio_ok /tmp/fio-fs.out || return 1
	e2fsck -fn "$1"
}

# (The bio path logs no "I/O error" line of its own: there fio's error count
# is the check; this one catches the driver's timeouts and the request path.)
ERR_RE='I/O error|virtio_blk_bio.*(timed out|timeout|broken)'
io_errors() {
	dmesg | grep -cE "$ERR_RE"
}

# The region L2 reads back (same fio job: 48-netstore.sh).
FLUSHED_JOB=(--name=flushed --direct=1 --ioengine=libaio --iodepth=8 --rw=write
	     --bs=64k --offset=160m --size=16m --verify=crc32c)

# writes_until TAG S DEV... : on each DEV at once, fio writes S seconds'
# worth at 100 a second (4 KiB, each block of the region at 96 MiB once),
# then reads them all back (verify=crc32c); status in /tmp/TAG-N.rc,
# output in /tmp/TAG-N.out, the seconds each took in /tmp/TAG-N.sec.
writes_until() {
	local tag=$1 s=$2 n=0 d
	shift 2
	for d in "$@"; do
		(
			t0=$(cut -d. -f1 /proc/uptime)
			fio --name=cut --filename="$d" --direct=1 --ioengine=libaio \
				--iodepth=8 --rw=randwrite --bs=4k --offset=96m \
				--size=$((s * 400))k --rate_iops=,100 \
				--verify=crc32c --verify_fatal=1 --do_verify=1 \
				>/tmp/$tag-$n.out 2>&1
			echo $? >/tmp/$tag-$n.rc
			echo $(( $(cut -d. -f1 /proc/uptime) - t0 )) >/tmp/$tag-$n.sec
		) &
		n=$((n + 1))
	done
}

# ended_within TAG SEC N: the N writers of TAG all ended within SEC seconds
# (from now); 1 if any still runs.
ended_within() {
	local i j k
	for i in $(seq $(($2 * 4))); do
		k=0
		for j in $(seq 0 $(($3 - 1))); do
			[ -f /tmp/$1-$j.sec ] && k=$((k + 1))
		done
		[ $k = "$3" ] && return 0
		sleep 0.25
	done
	return 1
}

# verified TAG J: writer J of TAG wrote everything, then read it all back
# and it verified.
verified() {
	[ "$(cat /tmp/$1-$2.rc)" = 0 ] && fio_ok /tmp/$1-$2.out &&
		grep -q "read: IOPS" /tmp/$1-$2.out
}

report() { # TAG PHASE N
	local j
	for j in $(seq 0 $(($3 - 1))); do
		echo "# $2: ${serials[$j]}: fio status $(cat /tmp/$1-$j.rc 2>/dev/null)," \
			"$(cat /tmp/$1-$j.sec 2>/dev/null) s," \
			"$(grep -oE 'err= *[0-9]+[^:]*' /tmp/$1-$j.out | head -n 1)"
		grep -m 3 -E 'error|verify' /tmp/$1-$j.out | sed 's/^/#   /'
	done
}

n=${#serials[@]}
# load PATH: virtio_blk_bio with use_bio=PATH, and its disks found.
load() {
	P="use_bio=$1: "
	modprobe virtio_blk_bio use_bio=$1 && find_disks && return 0
	nok "the disks appear (${serials[*]})"
	return 1
}
load 0 || { echo "NETSTORE-DONE"; exit 1; }
for s in "${serials[@]}"; do
	check "$s: mkfs, file workload with fsync, fsck clean" fs_work "${dev[$s]}"
	check "$s: fio randwrite mixed sizes, 2 jobs, verify=crc32c" \
		fio_raw "${dev[$s]}" 64m
done
rmmod virtio_blk_bio || nok "rmmod virtio_blk_bio"
dev=()
load 1 && [ ${#dev[@]} = $n ] || { echo "NETSTORE-DONE"; exit 1; }

errs0=$(io_errors)
for s in "${serials[@]}"; do
	check "$s: 16 MiB written, verified and flushed before the failures" \
		fio --filename="${dev[$s]}" "${FLUSHED_JOB[@]}" --do_verify=1 --end_fsync=1
done

devs=()
for s in "${serials[@]}"; do devs+=("${dev[$s]}"); done
writes_until short 15 "${devs[@]}"
sleep 3
echo "NETSTORE-CUT short"
ended_within short 90 $n
report short "short cut" $n
for j in $(seq 0 $((n - 1))); do
	check "${serials[$j]}: every write across a short link cut completes and verifies" \
		verified short $j
done
errs=$(( $(io_errors) - errs0 ))
check "no I/O error or driver timeout in the kernel log across the short cut ($errs)" test $errs = 0

# reads_again SEC DEV: DEV serves reads again within SEC seconds.
reads_again() {
	local i
	for i in $(seq "$1"); do
		dd if="$2" of=/dev/null bs=4k count=16 iflag=direct 2>/dev/null && return 0
		sleep 1
	done
	return 1
}

for phase in "KILL:server restart" "CUT long:long cut"; do
	tag=${phase%%:*}; tag=${tag#* }; tag=${tag,,}
	writes_until $tag 10 "${devs[@]}"
	sleep 3
	echo "NETSTORE-${phase%%:*}"
	# what is left of 10 s of writes and their read-back, and BOUND s
	# for the I/O the failure holds up
	check "${phase#*:}: every writer ended within $((bound + 20)) s (completed or EIO)" \
		ended_within $tag $((bound + 20)) $n
	report $tag "${phase#*:}" $n
	[ "${phase%%:*}" = KILL ] || continue
	# L2 connects NBD again (a new bridge; QEMU reconnects); iSCSI
	# recovers by itself.
	echo "NETSTORE-REVIVE"
	for s in "${serials[@]}"; do
		check "$s: serves I/O again after the server restart" reads_again 90 "${dev[$s]}"
	done
done
echo "NETSTORE-END"
# L2 brings the link up again, then tells us: a disk whose initiator
# recovered serves I/O again (printed, not judged here).
sleep 5
for s in "${serials[@]}"; do
	if bounded $bound dd if="${dev[$s]}" of=/dev/null bs=4k count=16 iflag=direct; then
		echo "# $s: reads after the failures: ok"
	else
		echo "# $s: reads after the failures: failed ($(tail -n 1 /tmp/bounded.out))"
	fi
done
P=""
check "rmmod virtio_blk_bio" rmmod virtio_blk_bio
echo "NETSTORE-DONE"
[ $fails = 0 ]
