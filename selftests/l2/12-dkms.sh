#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# check: core
# The modules DKMS built, signed and installed for this kernel (copied to /root/dkms
# by make check, see scripts/dkms-test.sh) load and unload in it: both modules of
# the host package, and the guest package's virtio_blk_bio (/root/dkms/guest).
[ -d /root/dkms ] || { echo "no /root/dkms: DKMS-built modules are only provided by make check"; exit 77; }
load() { # ko name what
	local ko=$1 m=$2 what=$3
	rmmod "$m" 2>/dev/null
	# dependencies from the kernel (virtio core is built in on 6.12, modular on 6.1)
	if [ "$m" = vhost_blk ]; then modprobe vhost; else modprobe virtio_ring 2>/dev/null; modprobe virtio 2>/dev/null; fi
	if insmod "$ko"; then
		if grep -q "^$m " /proc/modules; then
			echo "ok - $what loads"
		else
			echo "not ok - $what loads (not in /proc/modules)"
		fi
		rmmod "$m" && echo "ok - $what unloads" || echo "not ok - $what unloads"
	else
		echo "not ok - $what loads"
	fi
}
for m in vhost_blk virtio_blk_bio; do
	load "/root/dkms/$m.ko" "$m" "DKMS-installed $m.ko (package vhost-blk)"
done
[ -c /dev/vhost-blk ] && echo "not ok - /dev/vhost-blk gone after rmmod" || echo "ok - /dev/vhost-blk gone after rmmod"
if [ -f /root/dkms/guest/virtio_blk_bio.ko ]; then
	load /root/dkms/guest/virtio_blk_bio.ko virtio_blk_bio "DKMS-installed virtio_blk_bio.ko (guest package virtio-blk-bio)"
else
	echo "not ok - the guest package's virtio_blk_bio.ko is there"
fi
