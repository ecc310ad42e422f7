#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# In the test VMs of vm-test.sh's hibernation part, run twice:
#
# PHASE=sleep (first boot): virtio_blk_bio with two 2-queue disks, vbb-hib-bio
#   on the bio path and vbb-hib-mq on the request path; swap on the NVMe disk;
#   hibernate to it and power off. vm-test.sh boots again with both disks
#   down to one queue: the restore after the resume cannot build the rings the
#   disks were set up for, so virtio_blk_bio must give both up. This part of
#   the script goes on in the resumed kernel: the restore failed on both disks
#   and every request on them, I/O and GET_ID (the serial attribute), fails
#   at once instead of crashing or hanging; the driver unloads.
# PHASE=wake (second boot): resume from the NVMe disk. Prints a result line
#   only if that returned (no image).
# PHASE=pmio (a VM of its own, no swap): I/O between ->freeze and ->restore.
#   A kernel thread (vbb_pm_io.ko, which the freezer leaves running) reads
#   one disk in a loop while the system hibernates; with no swap the
#   hibernation stops after the snapshot, the devices thawed, and the script
#   goes on. On vbb-hib-bio, given up before (give_up_on_timeout=1), the
#   reads must fail at once, not spin with the CPU held (a spinning thread
#   also keeps the hibernation from taking the other CPU down: it hangs).
#   On vbb-hib-mq, request path with a poll queue, polled reads, each polled
#   again once done: the driver's ->poll runs while the rings are gone and
#   must find nothing, not oops. Three hibernations per disk.
set -u
. "$(dirname "$0")/lib.sh"

swapdev() { # the NVMe namespace (not its nvme0cXnY path devices)
	local i
	for i in $(seq 1 40); do
		[ -e /sys/block/nvme0n1/dev ] && { echo nvme0n1; return 0; }
		sleep 0.25
	done
	return 1
}

# pm_io DISK [poll=1]: the reading thread on DISK across three hibernations
pm_io() {
	local d=$1 m=/sys/module/vbb_pm_io/parameters i rc n0 n1 fr
	shift
	check "insmod vbb_pm_io.ko disk=/dev/$d $*" insmod /root/vbb_pm_io.ko disk="/dev/$d" "$@"
	for i in 1 2 3; do
		dmesg -c >/dev/null
		n0=$(($(cat $m/ok) + $(cat $m/failed)))
		bounded 120 sh -c 'echo disk >/sys/power/state'; rc=$?
		dmesg >/tmp/pmio.log
		if [ $rc = 124 ]; then
			nok "hibernation $i ends (still running after 120 s)"
			sed 's/^/#   /' /tmp/pmio.log | tail -n 30
			return 1
		fi
		fr=$(grep -c "\[$d\] frozen\$" /tmp/pmio.log)
		[ "$fr" -ge 1 ] && ok "hibernation $i froze the disk and came back (status $rc)" ||
			nok "hibernation $i froze the disk and came back (status $rc, $fr freezes)"
		sleep 1
		n1=$(($(cat $m/ok) + $(cat $m/failed)))
		[ "$n1" -gt "$n0" ] && ok "hibernation $i: the thread reads on ($((n1 - n0)) more)" ||
			nok "hibernation $i: the thread reads on ($n0 -> $n1)"
		if grep -E -q 'Oops|BUG:|soft lockup|detected stalls?' /tmp/pmio.log; then
			nok "hibernation $i: kernel log clean"
			grep -E -A12 'Oops|BUG:|soft lockup|detected stalls?' /tmp/pmio.log |
				head -n 30 | sed 's/^/#   /'
			return 1
		fi
		ok "hibernation $i: kernel log clean"
	done
	echo "# thread: $(cat $m/ok) ok, $(cat $m/failed) failed, $(cat $m/polls) polls"
	bounded 20 rmmod vbb_pm_io; rc=$?
	[ $rc = 0 ] && ok "rmmod vbb_pm_io" || nok "rmmod vbb_pm_io (status $rc)"
}

if [ "${PHASE:-}" = pmio ]; then
	modprobe virtio_pci 2>/dev/null
	check "modprobe virtio_blk_bio use_bio=1 poll_queues=1 io_timeout=3" \
		modprobe virtio_blk_bio use_bio=1 poll_queues=1 io_timeout=3
	BIO= MQ=
	for _ in $(seq 1 40); do
		BIO=$(disk_by_serial vbb-hib-bio) && MQ=$(disk_by_serial vbb-hib-mq) && break
		sleep 0.25
	done
	[ -n "$BIO" ] && [ -n "$MQ" ] || { nok "both disks found by their serial"; exit 1; }
	vdev=$(basename "$(readlink -f "/sys/block/$MQ/device")")
	echo 0 >/sys/module/virtio_blk_bio/parameters/use_bio
	echo "$vdev" >/sys/bus/virtio/drivers/virtio_blk_bio/unbind
	echo "$vdev" >/sys/bus/virtio/drivers/virtio_blk_bio/bind
	for _ in $(seq 1 40); do MQ=$(disk_by_serial vbb-hib-mq) && break; sleep 0.25; done
	check "vbb-hib-mq: request path, polling enabled" sh -c \
		"grep -qx 'path mq' /sys/block/$MQ/driver_stats && grep -qx 1 /sys/block/$MQ/queue/io_poll"
	echo shutdown >/sys/power/disk
	echo N >/sys/module/printk/parameters/console_suspend 2>/dev/null

	# polls on the request path while its rings are gone
	P="$MQ (request path, poll queue): "
	pm_io "$MQ" poll=1
	# the bio disk given up (bus mastering off: a read times out)
	P="$BIO (bio path, given up): "
	echo 1 >/sys/module/virtio_blk_bio/parameters/give_up_on_timeout
	pci=$(pci_of "$BIO")
	dmesg -c >/dev/null
	bus_master "$pci" off
	bounded 60 dd if=/dev/$BIO of=/dev/null bs=4k count=1 iflag=direct
	bus_master "$pci" on
	check "the driver gave the device up" sh -c "dmesg | grep -q 'giving the device up'"
	pm_io "$BIO"
	P=""
	bounded 20 rmmod virtio_blk_bio; rc=$?
	[ $rc = 0 ] && ok "rmmod virtio_blk_bio" || nok "rmmod virtio_blk_bio (status $rc)"
	echo "# $fails failed"
	[ "$fails" = 0 ]
	exit
fi

if [ "${PHASE:-}" = wake ]; then
	sw=$(swapdev) || { nok "resume: the NVMe swap disk is there"; exit 1; }
	echo "# resuming from $sw ($(cat /sys/block/$sw/dev))"
	echo N >/sys/module/printk/parameters/console_suspend 2>/dev/null
	echo "$(cat /sys/block/$sw/dev)" >/sys/power/resume
	dmesg | grep -i -E 'PM:|hibern|swsusp|resume' | tail -n 10 | sed 's/^/#   /'
	nok "resume from the hibernation image on $sw (echo to /sys/power/resume returned $?)"
	exit 1
fi

modprobe virtio_pci 2>/dev/null
check "modprobe virtio_blk_bio use_bio=1" modprobe virtio_blk_bio use_bio=1
BIO= MQ=
for _ in $(seq 1 40); do
	BIO=$(disk_by_serial vbb-hib-bio) && MQ=$(disk_by_serial vbb-hib-mq) && break
	sleep 0.25
done
[ -n "$BIO" ] && [ -n "$MQ" ] || { nok "both disks found by their serial"; exit 1; }
vdev=$(basename "$(readlink -f "/sys/block/$MQ/device")")
echo 0 >/sys/module/virtio_blk_bio/parameters/use_bio
echo "$vdev" >/sys/bus/virtio/drivers/virtio_blk_bio/unbind
echo "$vdev" >/sys/bus/virtio/drivers/virtio_blk_bio/bind
for _ in $(seq 1 40); do MQ=$(disk_by_serial vbb-hib-mq) && break; sleep 0.25; done
check "vbb-hib-bio: bio path, 2 queues" sh -c \
	"grep -qx 'path bio' /sys/block/$BIO/driver_stats && grep -qx 'queues 2' /sys/block/$BIO/driver_stats"
check "vbb-hib-mq: request path, 2 queues" sh -c \
	"grep -qx 'path mq' /sys/block/$MQ/driver_stats && grep -qx 'queues 2' /sys/block/$MQ/driver_stats"
for d in $BIO $MQ; do
	dd if=/dev/urandom of=/dev/$d bs=64k count=16 oflag=direct 2>/dev/null
done
sw=$(swapdev) || { nok "the NVMe swap disk is there"; exit 1; }
check "swap on /dev/$sw" sh -c "mkswap /dev/$sw >/dev/null && swapon /dev/$sw"
echo shutdown >/sys/power/disk
# the console stays on: what goes wrong while devices sleep is seen
echo N >/sys/module/printk/parameters/console_suspend 2>/dev/null
echo 7 >/proc/sys/kernel/printk
dmesg -c >/dev/null
echo "# hibernating to /dev/$sw"
echo disk >/sys/power/state
rc=$?
# Here in the resumed kernel, booted with one queue per disk.
[ $rc = 0 ] && ok "hibernated and resumed" || nok "hibernated and resumed (status $rc)"
dmesg >/tmp/resume.log
check "restore refused the new queue count on both disks" sh -c \
	"[ \$(grep -c 'restore: 1 queues instead of 2' /tmp/resume.log) = 2 ]"
for d in $BIO $MQ; do
	P="$d ($(sed -n 's/^path //p' /sys/block/$d/driver_stats) path, not restored): "
	bounded 20 cat /sys/block/$d/serial; rc=$?
	if [ $rc = 124 ]; then
		nok "reading serial fails at once (still blocked after 20 s)"
	elif [ $rc != 0 ] && grep -q 'Input/output error' /tmp/bounded.out; then
		ok "reading serial fails at once with EIO"
	else
		nok "reading serial fails at once with EIO (status $rc: $(head -c 200 /tmp/bounded.out))"
	fi
	bounded 20 dd if=/dev/$d of=/dev/null bs=4k count=1 iflag=direct; rc=$?
	[ $rc != 0 ] && [ $rc != 124 ] && ok "a read fails at once" ||
		nok "a read fails at once (status $rc)"
	bounded 20 dd if=/dev/zero of=/dev/$d bs=4k count=1 oflag=direct; rc=$?
	[ $rc != 0 ] && [ $rc != 124 ] && ok "a write fails at once" ||
		nok "a write fails at once (status $rc)"
done
P=""
swapoff -a 2>/dev/null
bounded 20 rmmod virtio_blk_bio; rc=$?
[ $rc = 0 ] && ok "rmmod virtio_blk_bio" || nok "rmmod virtio_blk_bio (status $rc)"
echo "# $fails failed"
[ "$fails" = 0 ]
