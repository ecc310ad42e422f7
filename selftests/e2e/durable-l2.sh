#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# L2 half of selftests/e2e/durability.sh.  The L2's /dev/vda is a disk image
# on L1 that outlives this L2.
#   durable-l2.sh write MODE N   ext4 on vda, backing file on it opened
#        --buffered by the bridge; the L3 guest writes N known blocks
#        (MODE fsync: each fsync'ed before it is reported, guest request
#        path; fsync-bio: the same on the guest's bio path; nosync: not
#        fsync'ed; dropflush: fsync'ed, but vhost_blk acknowledges flushes
#        without syncing, through its debugfs fault_drop_flush), then this L2 waits
#        to be killed from L1 (passes on the guest's ACK lines and DURABLE-DONE).
#   durable-l2.sh check N        mount vda, report which of the N blocks
#        are in the backing file ("BLOCK k present|missing").
set -u
what=$1
[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null
modprobe virtio_blk
for _ in $(seq 100); do [ -b /dev/vda ] && break; sleep 0.1; done
mkdir -p /mnt/d
IMG=/mnt/d/backing.img
pattern() { yes "DURABLE block $1 vhost-blk" | head -c 4096; }

case $what in
write)
	mode=$2 n=$3
	# No background writeback: the only way to the disk is a flush.
	echo 0 >/proc/sys/vm/dirty_writeback_centisecs
	echo 360000 >/proc/sys/vm/dirty_expire_centisecs
	echo 90 >/proc/sys/vm/dirty_ratio
	echo 80 >/proc/sys/vm/dirty_background_ratio
	mkfs.ext4 -q -F /dev/vda && mount -t ext4 /dev/vda /mnt/d || exit 1
	# Allocated and zeroed on disk, so only the data blocks are at stake.
	dd if=/dev/zero of=$IMG bs=1M count=64 conv=fsync 2>/dev/null || exit 1
	sync
	modprobe vhost_blk || exit 1
	bio=0
	case $mode in
	dropflush)
		echo 1 >/sys/kernel/debug/vhost-blk/fault_drop_flush || exit 1
		mode=fsync ;;
	fsync-bio)
		bio=1 mode=fsync ;;
	esac
	vhost-blk-bridge --socket /tmp/dur.sock --backend $IMG --buffered \
		--queues 1 >/tmp/dur-bridge.log 2>&1 &
	bpid=$!
	for _ in $(seq 50); do [ -S /tmp/dur.sock ] && break; sleep 0.1; done
	printf '#!/bin/sh\nE2E_BIO=%s exec bash /src/selftests/e2e/guest.sh durable %s %s\n' \
		"$bio" "$mode" "$n" >/tmp/dur-guest.sh
	l3run -t 240 /tmp/dur-guest.sh \
		-object memory-backend-memfd,id=mem,size=1G,share=on \
		-numa node,memdev=mem -chardev socket,id=c0,path=/tmp/dur.sock \
		-device vhost-user-blk-pci,chardev=c0,num-queues=1 >/tmp/dur-l3.out 2>&1 &
	l3pid=$!
	# The guest prints DURABLE-DONE and then waits, its QEMU and the
	# bridge's session alive, until L1 kills this whole L2.  l3run prints
	# the guest's output only when the guest ends (busybox tail cannot
	# follow a pid), so read it from vmrun's file.
	for _ in $(seq 1200); do
		grep -qs DURABLE-DONE /tmp/l3run.*/output.log && break
		kill -0 $l3pid 2>/dev/null || break
		sleep 0.5
	done
	cat /tmp/l3run.*/output.log 2>/dev/null | tr -d '\r' | grep -E '^(ACK |DURABLE-DONE|write )'
	# Until L1 kills this L2, or the guest ended early (the nested-KVM
	# flake: L1 sees no DURABLE-DONE and says so). Not a bare wait: the
	# bridge never ends, and L1 would sit out its time limit.
	wait $l3pid
	sed 's/^/# l3: /' /tmp/dur-l3.out
	kill $bpid 2>/dev/null
	;;
check)
	n=$2
	mount -t ext4 /dev/vda /mnt/d || exit 1
	for k in $(seq 0 $((n - 1))); do
		# (no /dev/fd in the initramfs: compare digests, not files)
		if [ "$(dd if=$IMG bs=4096 skip=$k count=1 2>/dev/null | md5sum)" = \
		     "$(pattern $k | md5sum)" ]; then
			echo "BLOCK $k present"
		else
			echo "BLOCK $k missing"
		fi
	done
	umount /mnt/d
	;;
esac
