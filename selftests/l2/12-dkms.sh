#!/bin/bash
# The modules DKMS built and installed for this kernel (copied to /root/dkms by
# make check, see scripts/dkms-test.sh) load and unload in it.
[ -d /root/dkms ] || { echo "no /root/dkms: DKMS-built modules are only provided by make check"; exit 77; }
for m in vhost_blk virtio_blk_bio; do
	ko=/root/dkms/$m.ko
	rmmod "$m" 2>/dev/null
	[ $m = vhost_blk ] && modprobe vhost
	if insmod "$ko"; then
		want=$(grep -a -o 'srcversion=[0-9A-F]*' "$ko" | head -n 1 | cut -d= -f2)
		have=$(cat /sys/module/$m/srcversion 2>/dev/null)
		if [ -n "$want" ] && [ "$want" = "$have" ]; then
			echo "ok - DKMS-installed $m.ko loads (srcversion $have)"
		else
			echo "not ok - DKMS-installed $m.ko loads (srcversion '$have', want '$want')"
		fi
		rmmod "$m" && echo "ok - DKMS-installed $m unloads" || echo "not ok - DKMS-installed $m unloads"
	else
		echo "not ok - DKMS-installed $m.ko loads"
	fi
done
[ -c /dev/vhost-blk ] && echo "not ok - /dev/vhost-blk gone after rmmod" || echo "ok - /dev/vhost-blk gone after rmmod"
