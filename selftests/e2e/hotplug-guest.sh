#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# selftests/e2e/hotplug-guest.sh SERIAL: the L3 half of
# selftests/l2/51-mem-hotplug.sh. SERIAL is a vhost-user disk served by a
# bridge and /dev/vhost-blk in L2. This guest boots with 1 GiB on NUMA node
# 0 and an empty node 1; L2 plugs a 256 MiB DIMM into node 1 when asked
# ("HOTPLUG-ADD n") and unplugs it again ("HOTPLUG-REMOVE n").
#
# One round per guest path (virtio_blk_bio use_bio=0, then 1):
#  - fio verify=crc32c runs while the DIMM is plugged; the new memory
#    appears on node 1 and is onlined (movable, so it can go again);
#  - fio verify=crc32c with its buffers bound to node 1: the device reads
#    and writes guest memory that did not exist at boot;
#  - fio verify=crc32c runs while the DIMM is unplugged; node 1 is empty
#    again.
# Round r writes [r*48M, +48M) of the disk, 16 MiB per fio: nothing earlier
# wrote any of it.
set -u
serial=$1
. /src/selftests/virtio_blk_bio/lib.sh

[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null
# Blocks the kernel onlines itself (6.12's default) go movable: the DIMM
# can then be unplugged again.
echo online_movable >/sys/devices/system/memory/auto_online_blocks 2>/dev/null

node1_kib() {
	sed -n 's/^Node 1 MemTotal: *\([0-9]*\) kB/\1/p' \
		/sys/devices/system/node/node1/meminfo 2>/dev/null || echo 0
}

# wait_node1 MORE|NONE: until node 1 has memory (MORE) or has none (NONE),
# onlining new blocks as they come; 90 s at most.
wait_node1() {
	local i f kib
	for i in $(seq 900); do
		for f in /sys/devices/system/memory/memory*/state; do
			[ "$(cat "$f" 2>/dev/null)" = offline ] &&
				echo online_movable >"$f" 2>/dev/null
		done
		kib=$(node1_kib)
		kib=${kib:-0}
		if [ "$1" = MORE ] && [ "$kib" -gt 0 ]; then return 0; fi
		if [ "$1" = NONE ] && [ "$kib" -eq 0 ]; then return 0; fi
		sleep 0.1
	done
	echo "# node 1: ${kib} KiB"
	return 1
}

# fio_run NAME OFFSET_MIB [FIO-ARGS...]: verify on 16 MiB of the disk
fio_run() {
	local name=$1 off=$2
	shift 2
	fio --name="$name" --filename="/dev/$dev" --offset=$((off << 20)) --size=16m \
		--direct=1 --ioengine=libaio --iodepth=16 --rw=randwrite \
		--bssplit=4k/40:64k/60 --verify=crc32c --verify_fatal=1 --do_verify=1 \
		"$@" >"/tmp/fio-$name.out" 2>&1
	local rc=$?
	grep -E "err=|verify:" "/tmp/fio-$name.out" | head -4
	[ $rc = 0 ] && ! grep -q "err= *[1-9]" "/tmp/fio-$name.out"
}

round=0
for use_bio in 0 1; do
	P="use_bio=$use_bio: "
	base=$((round * 48))
	if ! modprobe virtio_blk_bio use_bio=$use_bio; then
		nok "modprobe virtio_blk_bio"
		break
	fi
	dev=
	for i in $(seq 100); do
		dev=$(disk_by_serial "$serial") && break
		sleep 0.1
	done
	[ -n "$dev" ] || { nok "the vhost-user disk appears"; break; }

	# 4096 writes at 300 a second: fio runs across the plug.
	fio_run plug-$round $base --bssplit=4k/100 --rate_iops=300 >/tmp/plug.out 2>&1 &
	fpid=$!
	echo "HOTPLUG-ADD $round"
	check "a 256 MiB DIMM plugged under fio shows up on node 1 and goes online" \
		wait_node1 MORE
	wait $fpid
	rc=$?
	cat /tmp/plug.out
	if [ $rc = 0 ]; then ok "fio verify=crc32c while the DIMM was plugged"; else
		nok "fio verify=crc32c while the DIMM was plugged"; fi
	echo "# node 1 holds $(node1_kib) KiB"
	check "fio verify=crc32c with its buffers on node 1 (the new memory)" \
		fio_run node1-$round $((base + 16)) --numa_mem_policy=bind:1

	fio_run unplug-$round $((base + 32)) --bssplit=4k/100 --rate_iops=300 \
		>/tmp/unplug.out 2>&1 &
	fpid=$!
	echo "HOTPLUG-REMOVE $round"
	check "the DIMM unplugged under fio: node 1 empty again" wait_node1 NONE
	wait $fpid
	rc=$?
	cat /tmp/unplug.out
	if [ $rc = 0 ]; then ok "fio verify=crc32c while the DIMM was unplugged"; else
		nok "fio verify=crc32c while the DIMM was unplugged"; fi
	rmmod virtio_blk_bio || nok "rmmod virtio_blk_bio"
	round=$((round + 1))
done
echo "HOTPLUG-DONE"
[ $fails = 0 ]
