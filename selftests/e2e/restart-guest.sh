#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# selftests/e2e/restart-guest.sh SERIAL: the L3 half of
# selftests/l2/47-restart.sh. SERIAL is a vhost-user disk whose bridge L2
# kills (SIGKILL) and starts again twice when this guest asks
# ("RESTART-KILL n"); QEMU reconnects to the new one.
#
# Two rounds, one per path of virtio_blk_bio (use_bio=0, then 1). On each
# vCPU (so on each queue) fio writes 8 MiB in 4 KiB blocks at 150 a second
# with verify=crc32c, on a region nothing earlier wrote, while another job
# reads at queue depth 8 for 20 s: in L2 a read takes 30 ms and a write
# 5 ms, so reads are in flight and writes complete around them when the
# kills come. Every write must read back, no request may fail
# (fio's error count, the kernel log), and the disk must serve I/O after.
set -u
serial=$1
. /src/selftests/virtio_blk_bio/lib.sh

[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null

find_disk() {
	local i
	for i in $(seq 100); do
		dev=$(disk_by_serial "$serial") && return 0
		sleep 0.1
	done
	return 1
}

ERR_RE='I/O error|virtio_blk_bio.*(timed out|timeout|broken)'
io_errors() {
	dmesg | grep -cE "$ERR_RE"
}

fio_ok() { # OUT
	grep -E "err=|verify:" "$1" | head -4
	! grep -q "err= *[1-9]" "$1"
}

round=0
for path in 0 1; do
	P="use_bio=$path: "
	if ! modprobe virtio_blk_bio use_bio=$path || ! find_disk; then
		nok "the disk appears ($serial)"
		break
	fi
	errs0=$(io_errors)
	fio --filename=/dev/$dev --direct=1 --ioengine=libaio --bs=4k \
		--cpus_allowed=0-1 --cpus_allowed_policy=split \
		--name=write --rw=randwrite --iodepth=16 --numjobs=2 \
		--offset=$((round * 64))m --offset_increment=16m --size=8m \
		--rate_iops=150 --verify=crc32c --verify_fatal=1 --do_verify=1 \
		--name=read --rw=randread --iodepth=8 --numjobs=2 \
		--offset=256m --size=64m --time_based --runtime=20 \
		>/tmp/fio-restart.out 2>&1 &
	fpid=$!
	sleep 3
	echo "RESTART-KILL $round"
	wait $fpid
	rc=$?
	check "fio verify=crc32c across two bridge restarts (status $rc)" \
		eval "[ $rc = 0 ] && fio_ok /tmp/fio-restart.out"
	errs=$(( $(io_errors) - errs0 ))
	check "no I/O error or timeout in the kernel log ($errs)" \
		eval "[ $errs = 0 ] || { dmesg | grep -E \"\$ERR_RE\" | tail -n 5; false; }"
	check "the disk serves I/O afterwards" \
		dd if=/dev/$dev of=/dev/null bs=4k count=256 iflag=direct
	rmmod virtio_blk_bio || nok "rmmod virtio_blk_bio"
	round=$((round + 1))
done
P=""
echo "RESTART-DONE"
[ $fails = 0 ]
