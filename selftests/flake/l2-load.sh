#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# l2-load.sh: the L2 side of make flake-rate (scripts/flake-rate.sh), run by
# run-tests.sh in L2 (its heartbeat and vCPU probe are what tell a wedge).
# Starts L3 guests back to back for SECS seconds, taking the rows of ROWS in
# turn, each guest running 4k random fio at depth 32 (15 s read, 15 s write)
# on /dev/vda with the stock virtio_blk driver:
#   virtio-blk  QEMU's own virtio-blk (aio=native, an iothread) on null_blk
#   vhost-blk   vhost-user-blk-pci, served by vhost-blk-bridge through
#               vhost_blk on null_blk (guest RAM a shared memfd)
# Everything the host counts goes to the kernel log, which survives an L2
# that dies: the setup ("flake-rate: setup: ..."), each guest's row
# ("flake-rate: row R") before l3run's own start and end markers.
# Settings (environment): SECS, ROWS, L3C (L3 vCPUs), KVM and KVM_AMD (module
# parameters to reload kvm/kvm_amd with), THP (transparent_hugepage mode).
set -u
SECS=${SECS:-600} ROWS=${ROWS:-"virtio-blk vhost-blk"} L3C=${L3C:-2}
KVM=${KVM:-} KVM_AMD=${KVM_AMD:-} THP=${THP:-}
D=/tmp/flake-load
say() { echo "flake-rate: $*" >/dev/kmsg; echo "# $*"; }
bridge=
cleanup() {
	[ -n "$bridge" ] && kill "$bridge" 2>/dev/null
	wait 2>/dev/null
}
trap cleanup EXIT
rm -rf $D; mkdir -p $D

if [ -n "$KVM$KVM_AMD" ]; then
	rmmod kvm_amd 2>/dev/null
	if [ -n "$KVM" ]; then
		rmmod kvm 2>/dev/null
		# shellcheck disable=SC2086
		modprobe kvm $KVM || { echo "not ok - modprobe kvm $KVM"; exit 1; }
	fi
	# shellcheck disable=SC2086
	modprobe kvm_amd $KVM_AMD || { echo "not ok - modprobe kvm_amd $KVM_AMD"; exit 1; }
fi
[ -e /dev/kvm ] || modprobe kvm_amd
[ -n "$THP" ] && echo "$THP" >/sys/kernel/mm/transparent_hugepage/enabled

# The setup, as L2 sees it.
params() { # MODULE: its parameters as name=value
	local f
	for f in /sys/module/"$1"/parameters/*; do
		[ -r "$f" ] && printf '%s=%s ' "${f##*/}" "$(cat "$f" 2>/dev/null)"
	done
}
say "setup: L2 kernel $(uname -r), $(grep -c '^processor' /proc/cpuinfo) CPUs," \
	"$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1)," \
	"THP $(cat /sys/kernel/mm/transparent_hugepage/enabled), rows: $ROWS, L3 vCPUs: $L3C"
say "setup: kvm_amd $(params kvm_amd)"
say "setup: kvm $(params kvm)"
# (the flags line is long: in pieces a kernel log line holds)
sed -n 's/^flags[^:]*: //p' /proc/cpuinfo | head -n 1 | fold -s -w 700 |
	while IFS= read -r part; do say "setup: CPU flags: $part"; done

modprobe null_blk nr_devices=2 gb=1 irqmode=0 queue_mode=2 ||
	{ echo "not ok - modprobe null_blk"; exit 1; }
case " $ROWS " in
*" vhost-blk "*)
	modprobe vhost_blk || { echo "not ok - modprobe vhost_blk"; exit 1; }
	;;
esac

cat >$D/l3.sh <<'EOF'
modprobe virtio_pci 2>/dev/null; modprobe virtio_blk
for i in $(seq 20); do [ -b /dev/vda ] && break; sleep 0.5; done
for rw in randread randwrite; do
	fio --name=s --filename=/dev/vda --ioengine=libaio --direct=1 --rw=$rw --bs=4k \
		--iodepth=32 --time_based --runtime=15 --output-format=terse \
		--terse-version=3 | cut -d';' -f3-8
done
EOF

start_bridge() {
	rm -f $D/b.sock
	vhost-blk-bridge --socket $D/b.sock --backend /dev/nullb1 --queues "$L3C" \
		>>$D/bridge.log 2>&1 &
	bridge=$!
	for _ in $(seq 100); do
		[ -S $D/b.sock ] && return 0
		sleep 0.1
	done
	return 1
}

read -r -a rows <<<"$ROWS"
end=$(($(date +%s) + SECS)) n=0 said=0
while [ "$(date +%s)" -lt $end ]; do
	row=${rows[$((n % ${#rows[@]}))]}
	n=$((n + 1))
	case $row in
	virtio-blk)
		args=(-object iothread,id=io0
		      -drive file=/dev/nullb0,if=none,id=d0,format=raw,aio=native,cache=none
		      -device virtio-blk-pci,drive=d0,iothread=io0) ;;
	vhost-blk)
		start_bridge || { echo "not ok - vhost-blk-bridge starts"; cat $D/bridge.log; exit 1; }
		args=(-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem
		      -chardev socket,id=c0,path=$D/b.sock
		      -device vhost-user-blk-pci,chardev=c0) ;;
	*) echo "not ok - unknown row $row"; exit 1 ;;
	esac
	say "row $row"
	t0=$(date +%s)
	l3run -t 200 -c "$L3C" $D/l3.sh "${args[@]}" >$D/o.$n 2>&1
	rc=$?
	echo "# L3 guest $n ($row): status $rc after $(($(date +%s) - t0)) s," \
		"$(grep -c '^s;' $D/o.$n) of 2 fio runs done"
	if [ $rc != 0 ]; then
		grep -v '^s;' $D/o.$n | tail -n 8 | sed 's/^/#   l3run: /'
		[ -n "$bridge" ] && tail -n 5 $D/bridge.log | sed 's/^/#   bridge: /'
	fi
	if [ -n "$bridge" ]; then
		kill "$bridge" 2>/dev/null
		wait "$bridge" 2>/dev/null
		bridge=
	fi
	if [ $said = 0 ]; then
		for f in /tmp/l3run.*/qemu.cmdline; do
			[ -r "$f" ] && say "setup: L3 QEMU ($row): $(cut -c1-900 "$f")" && said=1
			break
		done
	fi
done
echo "ok - $n L3 guests in ${SECS}s"
