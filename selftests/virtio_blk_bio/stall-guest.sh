#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# In the test VM of stall-test.sh: for each path in $PATHS, fio with
# verify=crc32c on the vbb-stall disk while stall-test.sh stops its backend
# for $STALL seconds (asked for by writing VBB-STALL-<path> into the
# vbb-mark disk). With the default io_timeout (30 s) and give_up_on_timeout
# off, the driver must wait for the device: no I/O error, the disk alive.
# Then, per path, a device that stops answering (bus mastering off) must be
# given up with EIO in bounded time.
# With /old/virtio_blk_bio.ko (stall-test.sh --old-ko), the same runs with
# that module first, its lines prefixed "old module".
set -u
PATHS=${PATHS:-0 1}
STALL=${STALL:-60}
. "$(dirname "$0")/lib.sh"

modprobe virtio_pci 2>/dev/null
runs=""
[ -f /old/virtio_blk_bio.ko ] && for ub in $PATHS; do runs="$runs old:$ub"; done
for ub in $PATHS; do runs="$runs new:$ub"; done
n=0 old=0
for run in $runs; do
	ub=${run#*:} n=$((n + 1))
	if [ $old = 1 ] && [ "${run%%:*}" = new ]; then
		# what the old module failed is what the fix is for
		echo "# old module: $fails checks failed"
		fails=0 old=0
	fi
	if [ "${run%%:*}" = old ]; then
		old=1
		P="old module, use_bio=$ub: "
		check "insmod old virtio_blk_bio use_bio=$ub" \
			insmod /old/virtio_blk_bio.ko use_bio="$ub"
	else
		P="use_bio=$ub: "
		check "modprobe virtio_blk_bio use_bio=$ub" \
			modprobe virtio_blk_bio use_bio="$ub"
	fi
	S= M=
	for _ in $(seq 1 40); do
		S=$(disk_by_serial vbb-stall) && M=$(disk_by_serial vbb-mark) && break
		sleep 0.25
	done
	if [ -z "$S" ] || [ -z "$M" ]; then
		nok "both disks found by serial"
		continue
	fi
	dmesg -c >/dev/null
	fio --name=s --filename="/dev/$S" --ioengine=libaio --direct=1 --rw=randwrite \
		--bs=4k --iodepth=16 --size=32M --verify=crc32c --verify_fatal=1 \
		--verify_backlog=64 --time_based --runtime=$((STALL + 30)) \
		--output-format=terse --terse-version=3 >/tmp/stall-fio.out 2>&1 &
	fpid=$!
	sleep 5
	printf 'VBB-STALL-%s' "$n" | dd of="/dev/$M" bs=512 conv=sync oflag=direct 2>/dev/null
	t0=$SECONDS
	wait $fpid
	rc=$?
	dt=$((SECONDS - t0))
	if [ $rc = 0 ]; then
		ok "fio verify=crc32c across a ${STALL} s backend stall: no error (${dt} s)"
	else
		nok "fio verify=crc32c across a ${STALL} s backend stall (status $rc after ${dt} s)"
		tail -n 5 /tmp/stall-fio.out | sed 's/^/#   /'
	fi
	check "fio ran through the stall (${dt} s >= ${STALL} s)" [ "$dt" -ge "$STALL" ]
	check "no I/O error and the device not given up (kernel log)" \
		sh -c "! dmesg | grep -E 'I/O error|giving the device up'"
	check "the driver waited for the device (notified it again)" \
		sh -c "dmesg | grep -q 'device notified again, waiting'"
	check "the disk is alive after: fio verify=crc32c" \
		fio --name=a --filename="/dev/$S" --ioengine=libaio --direct=1 --rw=randwrite \
		--bs=4k --iodepth=8 --size=8M --offset=64M --verify=crc32c --verify_fatal=1 \
		--output-format=terse
	dmesg | grep -E 'virtio_blk_bio|virtio' | tail -n 5 | sed 's/^/#   /'
	check "rmmod virtio_blk_bio" rmmod virtio_blk_bio
done
# A device that stops (bus mastering off, as blktests block/011 does: QEMU
# then clears DRIVER_OK) is given up in bounded time, in the default mode.
for ub in $PATHS; do
	P="use_bio=$ub, bus mastering off: "
	check "modprobe virtio_blk_bio use_bio=$ub io_timeout=5" \
		modprobe virtio_blk_bio use_bio="$ub" io_timeout=5
	M=
	for _ in $(seq 1 40); do M=$(disk_by_serial vbb-mark) && break; sleep 0.25; done
	[ -n "$M" ] || { nok "marker disk found"; continue; }
	pci=$(pci_of "$M")
	dmesg -c >/dev/null
	fio --name=d --filename="/dev/$M" --ioengine=libaio --direct=1 --rw=randwrite \
		--bs=4k --iodepth=16 --time_based --runtime=120 --size=1M \
		--output-format=terse >/tmp/dead-fio.out 2>&1 &
	fpid=$!
	sleep 2
	bus_master "$pci" off
	t0=$SECONDS
	for _ in $(seq 1 240); do kill -0 $fpid 2>/dev/null || break; sleep 0.25; done
	dt=$((SECONDS - t0))
	if kill -0 $fpid 2>/dev/null; then
		nok "fio ends with EIO in bounded time (still running after $dt s)"
	else
		wait $fpid
		rc=$?
		[ $rc != 0 ] && grep -q 'Input/output error' /tmp/dead-fio.out &&
			ok "fio ends with EIO after $dt s" ||
			nok "fio ends with EIO in bounded time (status $rc, $dt s)"
	fi
	check "the driver gave the stopped device up (message)" \
		sh -c "dmesg | grep -q 'device stopped: giving the device up'"
	bounded 30 rmmod virtio_blk_bio
	rc=$?
	[ $rc = 0 ] && ok "rmmod completes" || nok "rmmod completes (status $rc)"
	bus_master "$pci" on
done
exit $fails
