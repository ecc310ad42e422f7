#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# L2 half of selftests/e2e/durability.sh.  The L2's /dev/vda is a disk image
# on L1 that outlives this L2.
#   durable-l2.sh write N MODE...   ext4 on vda; per MODE a backing file on
#        it opened --buffered by a bridge of its own (serial MODE); one L3
#        guest writes N known blocks on each disk in turn (MODE fsync: each
#        fsync'ed before it is reported, guest request path; fsync-bio: the
#        same on the guest's bio path; nosync: not fsync'ed; dropflush:
#        fsync'ed, but vhost_blk acknowledges flushes without syncing, through
#        its debugfs fault_drop_flush, which is module-wide: only beside
#        modes that do not flush), then this L2 waits to be killed from L1
#        (passes on the guest's ACK lines and DURABLE-DONE).
#   durable-l2.sh check N MODE...   mount vda, report which of the N blocks of
#        each MODE are in its backing file ("BLOCK MODE k present|missing").
set -u
what=$1
[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null
modprobe virtio_blk
for _ in $(seq 100); do [ -b /dev/vda ] && break; sleep 0.1; done
mkdir -p /mnt/d
img() { echo "/mnt/d/backing-$1.img"; }
pattern() { yes "DURABLE block $1 vhost-blk" | head -c 4096; }

case $what in
write)
	n=$2; shift 2
	# No background writeback: the only way to the disk is a flush.
	echo 0 >/proc/sys/vm/dirty_writeback_centisecs
	echo 360000 >/proc/sys/vm/dirty_expire_centisecs
	echo 90 >/proc/sys/vm/dirty_ratio
	echo 80 >/proc/sys/vm/dirty_background_ratio
	mkfs.ext4 -q -F /dev/vda && mount -t ext4 /dev/vda /mnt/d || exit 1
	modprobe vhost_blk || exit 1
	specs=() qargs=(-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem)
	bpids=
	for mode in "$@"; do
		# Allocated and zeroed on disk, so only the data blocks are at stake.
		dd if=/dev/zero of="$(img "$mode")" bs=1M count=64 conv=fsync 2>/dev/null || exit 1
		case $mode in
		fsync) specs+=("$mode:0:fsync") ;;
		fsync-bio) specs+=("$mode:1:fsync") ;;
		nosync) specs+=("$mode:0:nosync") ;;
		dropflush)
			echo 1 >/sys/kernel/debug/vhost-blk/fault_drop_flush || exit 1
			specs+=("$mode:0:fsync") ;;
		*) echo "durable-l2.sh: unknown mode $mode" >&2; exit 2 ;;
		esac
		vhost-blk-bridge --socket "/tmp/dur-$mode.sock" --backend "$(img "$mode")" --buffered \
			--queues 1 --serial "$mode" >"/tmp/dur-bridge-$mode.log" 2>&1 &
		bpids="$bpids $!"
		for _ in $(seq 50); do [ -S "/tmp/dur-$mode.sock" ] && break; sleep 0.1; done
		qargs+=(-chardev "socket,id=c-$mode,path=/tmp/dur-$mode.sock"
			-device "vhost-user-blk-pci,chardev=c-$mode,num-queues=1")
	done
	sync
	printf '#!/bin/sh\nexec bash /src/selftests/e2e/guest.sh durable %s %s\n' \
		"$n" "${specs[*]}" >/tmp/dur-guest.sh
	l3run -t 240 /tmp/dur-guest.sh "${qargs[@]}" >/tmp/dur-l3.out 2>&1 &
	l3pid=$!
	# The guest prints DURABLE-DONE and then waits, its QEMU and the
	# bridges' sessions alive, until L1 kills this whole L2.  l3run prints
	# the guest's output only when the guest ends (busybox tail cannot
	# follow a pid), so read it from vmrun's file.
	for _ in $(seq 1200); do
		grep -qs DURABLE-DONE /tmp/l3run.*/output.log && break
		kill -0 $l3pid 2>/dev/null || break
		sleep 0.5
	done
	cat /tmp/l3run.*/output.log 2>/dev/null | tr -d '\r' | grep -E '^(ACK |path |DURABLE-DONE|write |no disk)'
	# Until L1 kills this L2, or the guest ended early (the nested-KVM
	# flake: L1 sees no DURABLE-DONE and says so). Not a bare wait: the
	# bridges never end, and L1 would sit out its time limit.
	wait $l3pid
	sed 's/^/# l3: /' /tmp/dur-l3.out
	kill $bpids 2>/dev/null
	;;
check)
	n=$2; shift 2
	mount -t ext4 /dev/vda /mnt/d || exit 1
	for mode in "$@"; do
		for k in $(seq 0 $((n - 1))); do
			# (no /dev/fd in the initramfs: compare digests, not files)
			if [ "$(dd if="$(img "$mode")" bs=4096 skip="$k" count=1 2>/dev/null | md5sum)" = \
			     "$(pattern "$k" | md5sum)" ]; then
				echo "BLOCK $mode $k present"
			else
				echo "BLOCK $mode $k missing"
			fi
		done
	done
	umount /mnt/d
	;;
esac
