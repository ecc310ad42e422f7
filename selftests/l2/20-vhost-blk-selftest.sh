#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# check: core
# vhost_blk on its own, no VM: the userspace virtio driver (vhost_blk_test) plays the
# guest against /dev/vhost-blk. Functional + hostile suites on four backends (file on
# tmpfs through the page cache, file on ext4 with O_DIRECT, brd and null_blk with
# O_DIRECT), a seeded fuzz run, a short load run, a worker flooded with status-less
# chains (25 s: long enough for a worker that never yields to show as a soft lockup),
# the owner-context and durability suite on ext4 with reserved blocks, the functional
# suite with max_inflight=2 (throttling), the owner killed with reads in flight on a
# null_blk whose reads take a second, interrupt moderation on the same null_blk, the
# review's defects (issue 47: WRITE_ZEROES without UNMAP on tmpfs, a chain of too
# many buffers, a release racing a held interrupt, a zoned null_blk, the page cache
# after a direct bio write on brd), then
# the module must unload.
# Results are prefixed with the backend; the kernel log is checked by the runner.
# VBT_KO=PATH: that vhost_blk.ko (insmod; its vhost.ko already loaded) instead
# of modprobe's, as 21-upstream-series runs the suites on the upstream series' module.
T=vhost_blk_test
rc=0
tag() { sed -E "s/^(not ok|ok) - /\1 - [$1] /"; }
run() { # tag args...
	local t=$1; shift
	"$T" "$@" >/tmp/vbt.out 2>&1 || rc=1
	tag "$t" </tmp/vbt.out
}
result() { if [ "$1" = 0 ]; then echo "ok - $2"; else echo "not ok - $2"; rc=1; fi; }
load() { # [PARAM=VALUE...]
	if [ -n "${VBT_KO:-}" ]; then insmod "$VBT_KO" "$@"; else modprobe vhost_blk "$@"; fi
}

how="modprobe vhost_blk"
[ -z "${VBT_KO:-}" ] || how="insmod $VBT_KO"
load; result $? "$how"
[ -c /dev/vhost-blk ] || { echo "not ok - /dev/vhost-blk exists"; exit 1; }
grep -q " /sys/kernel/debug " /proc/mounts || mount -t debugfs none /sys/kernel/debug
grep -q " /sys/kernel/tracing " /proc/mounts || mount -t tracefs none /sys/kernel/tracing 2>/dev/null

run tmpfs --file /tmp/vbt.img --size 64
# The review's defects (issue 47): tmpfs cannot zero a range in place.
run tmpfs-review --file /tmp/vbt.img --size 64 --review wz-nounmap
run tmpfs-review --file /tmp/vbt.img --size 64 --review long-chain
rm -f /tmp/vbt.img

rmmod brd 2>/dev/null  # our own size, whatever ran before
modprobe brd rd_nr=1 rd_size=131072 || echo "# brd unavailable"
if [ -b /dev/ram0 ]; then
	mkfs.ext4 -q -F /dev/ram0 && mkdir -p /mnt/vbt && mount /dev/ram0 /mnt/vbt &&
	run ext4-odirect --file /mnt/vbt/img --size 64 --direct --functional
	umount /mnt/vbt 2>/dev/null
	run brd-odirect --bdev /dev/ram0 --direct
	run brd-review --bdev /dev/ram0 --direct --review bio-stale
	run fuzz --bdev /dev/ram0 --direct --fuzz "${VBT_FUZZ_SEED:-20261130}" "${VBT_FUZZ_COUNT:-400}"
	"$T" --bdev /dev/ram0 --direct --load --seconds 2 --qd 16 --rw randrw \
		>/tmp/vbt.out 2>&1 || rc=1
	grep "^load:" /tmp/vbt.out | sed 's/^/# /'
	tag load </tmp/vbt.out | grep "ok -"
	run flood --bdev /dev/ram0 --direct --flood "${VBT_FLOOD_SECONDS:-25}"
	# Two requests in flight per queue: the throttle path under async I/O.
	rmmod vhost_blk && load max_inflight=2 &&
	run inflight2-brd --bdev /dev/ram0 --direct --functional
	rmmod vhost_blk && load
else
	echo "ok - brd backends # SKIP brd module unavailable"
fi

# Owner context and durability: a file on ext4 with 25 % reserved blocks (on a loop
# device), cgroup v2 for the memory and cgroup cases, the ext4 tracepoints.
grep -q " /sys/fs/cgroup " /proc/mounts || mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
modprobe loop 2>/dev/null
rm -f /tmp/vbt-ctx.fs
if truncate -s 32M /tmp/vbt-ctx.fs && mkfs.ext4 -q -F -m 25 /tmp/vbt-ctx.fs &&
   loopdev=$(losetup -f --show /tmp/vbt-ctx.fs) && mkdir -p /mnt/vbt-ctx &&
   mount "$loopdev" /mnt/vbt-ctx; then
	run context --file /mnt/vbt-ctx/img --size 16 --context
	umount /mnt/vbt-ctx
	losetup -d "$loopdev"
else
	echo "not ok - ext4 on a loop device for the owner-context suite"; rc=1
fi
rm -f /tmp/vbt-ctx.fs

if modprobe null_blk nr_devices=1 gb=1 && [ -b /dev/nullb0 ]; then
	run nullb-odirect --bdev /dev/nullb0 --direct --nodata --functional
	rmmod null_blk
	# Reads that take a second (a timer completes them): the owner is
	# killed with them in flight.
	if modprobe null_blk nr_devices=1 gb=1 irqmode=2 completion_nsec=1000000000 &&
	   [ -b /dev/nullb0 ]; then
		run nullb-slow --bdev /dev/nullb0 --direct --nodata --owner-killed
		run nullb-slow-irq --bdev /dev/nullb0 --direct --nodata --irq-moderation
		# Released while a completion holding the interrupt sleeps in
		# retire (fault injection): no timer left on the freed device.
		run nullb-slow-release --bdev /dev/nullb0 --direct --nodata --review irq-release
		rmmod null_blk
	else
		echo "not ok - null_blk with timer completions for the owner-killed suite"; rc=1
	fi
	# A zoned device is refused as a backend.
	if modprobe null_blk nr_devices=1 gb=1 zoned=1 && [ -b /dev/nullb0 ]; then
		run nullb-zoned --bdev /dev/nullb0 --direct --nodata --review zoned
		rmmod null_blk
	else
		echo "ok - zoned backend refused # SKIP no zoned null_blk"
	fi
else
	echo "ok - null_blk backend # SKIP null_blk unavailable"
fi

# Every device is gone: no per-device directory (named by its number) is left
# in debugfs; the module-wide files (fault_drop_flush) stay until rmmod.
left=$(ls /sys/kernel/debug/vhost-blk 2>/dev/null | grep -c '^[0-9][0-9]*$')
result "$left" "no vhost-blk device left behind ($left)"
rmmod vhost_blk; result $? "rmmod vhost_blk after all tests (no leaked references)"
rmmod brd 2>/dev/null
exit $rc
