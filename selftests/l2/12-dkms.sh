#!/bin/bash
# The modules DKMS built and installed for this kernel (copied to /root/dkms by
# make check, see scripts/dkms-test.sh) load and unload in it.
[ -d /root/dkms ] || { echo "no /root/dkms: DKMS-built modules are only provided by make check"; exit 77; }
for m in vhost_blk virtio_blk_bio; do
	ko=/root/dkms/$m.ko
	rmmod "$m" 2>/dev/null
	# dependencies from the kernel (virtio core is built in on 6.12, modular on 6.1)
	if [ $m = vhost_blk ]; then modprobe vhost; else modprobe virtio_ring 2>/dev/null; modprobe virtio 2>/dev/null; fi
	if insmod "$ko"; then
		if grep -q "^$m " /proc/modules; then
			echo "ok - DKMS-installed $m.ko loads"
		else
			echo "not ok - DKMS-installed $m.ko loads (not in /proc/modules)"
		fi
		rmmod "$m" && echo "ok - DKMS-installed $m unloads" || echo "not ok - DKMS-installed $m unloads"
	else
		echo "not ok - DKMS-installed $m.ko loads"
	fi
done
[ -c /dev/vhost-blk ] && echo "not ok - /dev/vhost-blk gone after rmmod" || echo "ok - /dev/vhost-blk gone after rmmod"
