#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The nested path works: an L3 guest boots with KVM inside L2 and runs a short
# fio verify=crc32c job on a stock virtio-blk disk (QEMU's virtio-blk-pci, stock
# virtio_blk driver in L3).
truncate -s 256M /tmp/nested-disk.img
cat >/tmp/l3-fio.sh <<'X'
modprobe virtio_pci 2>/dev/null
modprobe virtio_blk || exit 1
for i in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.5; done
[ -b /dev/vda ] || { echo "no /dev/vda"; exit 1; }
fio --name=nested --filename=/dev/vda --ioengine=libaio --direct=1 --rw=randwrite \
	--bs=4k --iodepth=16 --size=8M --verify=crc32c --verify_fatal=1 \
	--do_verify=1 --output-format=terse --terse-version=3 >/tmp/fio.out 2>&1
rc=$?
cut -d';' -f3-8 /tmp/fio.out | head -n 2
grep -i -E 'verify|error|bad' /tmp/fio.out | head -n 5
exit $rc
X
out=$(l3run -t 240 /tmp/l3-fio.sh \
	-drive file=/tmp/nested-disk.img,if=none,id=d0,format=raw \
	-device virtio-blk-pci,drive=d0 2>&1); rc=$?
echo "$out"
[ "$rc" = 0 ] && echo "ok - L3 fio randwrite verify=crc32c on stock virtio-blk (nested KVM)" ||
	echo "not ok - L3 fio randwrite verify=crc32c on stock virtio-blk (nested KVM) (rc=$rc)"
