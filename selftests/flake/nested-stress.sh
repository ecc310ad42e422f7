#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The nested-SVM-under-TCG flake, reproduced without any project code: from L1,
#   selftests/flake/nested-stress.sh [--kernel 6.1|6.12] [--secs N]
#       [--kvm "PARAMS"] [--kvm-amd "PARAMS"] [--l2-cpus N] [--l3-cpus N] [--thp always|madvise|never]
#       [--memfd] [--qemu-arg ARG]...
# boots one L2 that starts L3 guests back to back for N seconds (default 600),
# each running 4k random fio at depth 32 (15 s read, 15 s write) on QEMU's own
# virtio-blk (aio=native, iothread) over null_blk with the stock virtio_blk
# driver (L3 RAM anonymous memory of its QEMU, or with --memfd a shared memfd
# as the vhost-user rows of make bench have it), and reports each L3 boot's status (125: the guest reset itself with
# no message). An L2 panic or reset ends the run early; vmrun says so. Not part
# of make check (it is an experiment, not a test); Documentation/testing.rst
# lists what it measured.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
kernel=6.12 secs=600 kvm= kvm_amd= l2c=2 l3c=2 thp= memfd=0 qargs=()
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=$2; shift 2 ;;
	--secs) secs=$2; shift 2 ;;
	--kvm) kvm=$2; shift 2 ;;
	--kvm-amd) kvm_amd=$2; shift 2 ;;
	--l2-cpus) l2c=$2; shift 2 ;;
	--l3-cpus) l3c=$2; shift 2 ;;
	--thp) thp=$2; shift 2 ;;
	--memfd) memfd=1; shift ;;
	--qemu-arg) qargs+=(--qemu-arg "$2"); shift 2 ;;
	*) echo "nested-stress.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
work=$top/build/flake
mkdir -p "$work"
# The L2 side; settings are written into it (environment does not reach L2).
{
	printf 'SECS=%s KVM="%s" KVM_AMD="%s" L3C=%s THP=%s MEMFD=%s\n' "$secs" "$kvm" "$kvm_amd" "$l3c" "$thp" "$memfd"
	cat <<'L2'
if [ -n "$KVM$KVM_AMD" ]; then
	rmmod kvm_amd 2>/dev/null
	if [ -n "$KVM" ]; then
		rmmod kvm 2>/dev/null
		modprobe kvm $KVM || { echo "modprobe kvm $KVM failed"; exit 1; }
	fi
	modprobe kvm_amd $KVM_AMD || { echo "modprobe kvm_amd $KVM_AMD failed"; exit 1; }
fi
[ -n "$THP" ] && echo "$THP" >/sys/kernel/mm/transparent_hugepage/enabled
[ -e /dev/kvm ] || modprobe kvm_amd
echo "# L2: kvm_amd npt=$(cat /sys/module/kvm_amd/parameters/npt 2>/dev/null)" \
	"vgif=$(cat /sys/module/kvm_amd/parameters/vgif 2>/dev/null)" \
	"tdp_mmu=$(cat /sys/module/kvm/parameters/tdp_mmu 2>/dev/null)" \
	"THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)" \
	"la57: $(grep -c -m1 -w la57 /proc/cpuinfo)"
modprobe null_blk nr_devices=1 gb=1 irqmode=0 queue_mode=2 || exit 1
cat >/tmp/l3.sh <<L3
modprobe virtio_pci 2>/dev/null; modprobe virtio_blk
[ -n "$THP" ] && echo "$THP" >/sys/kernel/mm/transparent_hugepage/enabled
for i in \$(seq 20); do [ -b /dev/vda ] && break; sleep 0.5; done
for rw in randread randwrite; do
	fio --name=s --filename=/dev/vda --ioengine=libaio --direct=1 --rw=\$rw --bs=4k \
		--iodepth=32 --time_based --runtime=15 --output-format=terse \
		--terse-version=3 | cut -d';' -f3-8
done
L3
mem=()
[ "$MEMFD" = 1 ] && mem=(-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem)
echo "# L3 RAM: ${mem[*]:-anonymous}"
end=$(($(date +%s) + SECS)) n=0 bad=0
while [ "$(date +%s)" -lt $end ]; do
	n=$((n + 1)) t0=$(date +%s)
	l3run -t 200 -c "$L3C" /tmp/l3.sh "${mem[@]}" -object iothread,id=io0 \
		-drive file=/dev/nullb0,if=none,id=d0,format=raw,aio=native,cache=none \
		-device virtio-blk-pci,drive=d0,iothread=io0 >/tmp/o.$n 2>&1
	rc=$?
	[ $rc = 0 ] || bad=$((bad + 1))
	echo "# L3 boot $n: status $rc after $(($(date +%s) - t0)) s, $(grep -c '^s;' /tmp/o.$n) of 2 fio runs done"
done
echo "# $n L3 boots, $bad without status 0"
L2
} >"$work/l2-stress.sh"
exec "$top/scripts/vm.sh" --kernel "$kernel" --name flake-stress --timeout $((secs + 400)) --smp "$l2c" \
	"${qargs[@]}" "$work/l2-stress.sh"
