#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# L2 half of scripts/demo.sh: host side. Argument: fio runtime per job (s).
set -u
runtime=${1:-8}
SOCK=/tmp/demo-vb.sock
say() { echo "demo[L2]: $*"; }

say "loading vhost_blk and null_blk"
modprobe vhost_blk || exit 1
modprobe null_blk nr_devices=1 gb=2 irqmode=0 queue_mode=2 submit_queues=2 || exit 1
say "starting vhost-blk-bridge on /dev/nullb0 ($SOCK)"
vhost-blk-bridge --socket $SOCK --backend /dev/nullb0 --queues 2 \
	--serial vhost-blk-demo >/tmp/demo-bridge.log 2>&1 &
bpid=$!
for _ in $(seq 50); do [ -S $SOCK ] && break; sleep 0.1; done
[ -S $SOCK ] || { cat /tmp/demo-bridge.log; exit 1; }

printf '#!/bin/sh\nexec bash /src/selftests/e2e/demo-guest.sh %s\n' "$runtime" >/tmp/demo-guest.sh
say "booting the L3 guest (vhost-user-blk-pci + QEMU virtio-blk-pci on the same disk)"
l3run -t 600 -m 1G -c 2 /tmp/demo-guest.sh \
	-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem \
	-chardev socket,id=c0,path=$SOCK \
	-device vhost-user-blk-pci,chardev=c0,num-queues=2 \
	-object iothread,id=io0 \
	-drive file=/dev/nullb0,if=none,id=d1,format=raw,cache=none,aio=native \
	-device virtio-blk-pci,drive=d1,iothread=io0,num-queues=2,serial=qemu-virtio-blk
rc=$?
kill $bpid 2>/dev/null
wait $bpid 2>/dev/null
exit $rc
