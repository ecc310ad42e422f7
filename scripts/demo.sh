#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make demo: vhost_blk under stock QEMU, end to end, with numbers.
#
#   scripts/demo.sh [--kernel 6.1|6.12] [--runtime SEC]
#
# Boots an L2 host (scripts/vm.sh), loads vhost_blk, starts vhost-blk-bridge on
# a null_blk disk and boots one L3 guest with two views of that same disk:
# QEMU's vhost-user-blk-pci (-> bridge -> /dev/vhost-blk, datapath in the L2
# kernel) and QEMU's own virtio-blk-pci (aio=native, iothread).  In the guest,
# virtio_blk_bio drives both; fio (4k random read and write, QD32, libaio,
# direct) runs on: QEMU virtio-blk, vhost-blk with the blk-mq path
# (use_bio=0) and vhost-blk with the bio path (use_bio=1).  Prints IOPS, mean
# and p99 completion latency, and each IOPS ratio to QEMU's virtio-blk.
# Compare numbers within one run only (nested virtualization, TCG at L1).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
kernel=6.1 runtime=8
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=$2; shift 2 ;;
	--runtime) runtime=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "demo.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
case $runtime in ''|*[!0-9]*) echo "demo.sh: --runtime needs seconds" >&2; exit 2 ;; esac

echo "demo: building modules and tools, assembling the L2 image (kernel $kernel)..."
start=$(date +%s)
"$top/scripts/vm.sh" --kernel "$kernel" --timeout 900 --name "demo-$kernel" \
	"$top/selftests/e2e/demo-l2.sh" "$runtime"
rc=$?
echo "demo: done in $(($(date +%s) - start)) s (logs: build/vm/demo-*/)"
exit $rc
