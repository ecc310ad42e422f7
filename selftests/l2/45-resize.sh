#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Online resize, in L2: vhost_blk.ko and two vhost-blk-bridges, one on a
# regular file (--buffered), one on a loop device, both disks in one L3
# guest under stock QEMU's vhost-user-blk-pci (guest half:
# selftests/e2e/resize-guest.sh). Each time the guest asks, both backends
# grow by 32 MiB (truncate; losetup -c for the loop device) or shrink back,
# and the bridges get SIGHUP: they tell vhost_blk (VHOST_BLK_SET_CAPACITY)
# and QEMU (the back-end channel's config change message), QEMU tells the
# guest. Three rounds in the guest: stock virtio_blk, virtio_blk_bio
# use_bio=0 and use_bio=1, fio verify=crc32c running across every change;
# then a growth while no guest driver runs (QEMU drops the message then:
# the bridge sends it again at ring start), seen by the driver loaded after.
# Here: every change reached both bridges and vhost_blk, QEMU was told each
# time, and vhost_blk failed no request.
set -u
E2E=${E2E_DIR:-/src/selftests/e2e}
D=/tmp/resize
BASE=$((256 << 20))
GROW_MIB=32
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

rm -rf $D; mkdir -p $D
QARGS=(-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem
       -chardev socket,id=c0,path=$D/file.sock -device vhost-user-blk-pci,chardev=c0,num-queues=2
       -chardev socket,id=c1,path=$D/loop.sock -device vhost-user-blk-pci,chardev=c1,num-queues=2)

pids=() loopdev=
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	[ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
	rmmod vhost_blk 2>/dev/null
}
trap cleanup EXIT

start_bridge() { # name backend [options]
	local name=$1 be=$2 i
	shift 2
	vhost-blk-bridge --socket $D/$name.sock --backend "$be" --queues 2 \
		--serial "resize-$name" -v "$@" >$D/$name.log 2>&1 &
	pids+=($!)
	for i in $(seq 50); do
		[ -S $D/$name.sock ] && return 0
		sleep 0.1
	done
	return 1
}

# resize BYTES: both backends to BYTES, then tell the bridges.
resize() {
	truncate -s "$1" $D/file.img && truncate -s "$1" $D/loop.img &&
		losetup -c "$loopdev" || return 1
	kill -HUP "${pids[@]}"
}

modprobe vhost_blk || { nok "modprobe vhost_blk"; exit 1; }
modprobe loop 2>/dev/null
truncate -s $BASE $D/file.img && truncate -s $BASE $D/loop.img &&
	loopdev=$(losetup -f --show $D/loop.img) || { nok "backing file and loop device"; exit 1; }
check "bridges start on a file and on $loopdev" \
	eval 'start_bridge file $D/file.img --buffered && start_bridge loop "$loopdev"' ||
	{ cat $D/*.log; exit 1; }

printf '#!/bin/sh\nexec bash %s/resize-guest.sh %s resize-file resize-loop\n' \
	"$E2E" $GROW_MIB >$D/guest.sh
prev=$(ls -d /tmp/l3run.* 2>/dev/null | sort -t. -k2 -n | tail -n 1)
l3run -t 300 $D/guest.sh "${QARGS[@]}" >$D/l3.out 2>&1 &
l3=$!
# Requests vhost_blk completed with an error, over its devices (debugfs; a
# device's counters go with it when its session ends).
ioerrs() {
	cat /sys/kernel/debug/vhost-blk/[0-9]*/stats 2>/dev/null |
		awk '$1 == "ioerr" { e += $2 } END { print e + 0 }'
}
out= grows=0 shrinks=0 bad=0 errs=0
# The guest's output as vmrun writes it (l3run prints it only at the end).
while kill -0 $l3 2>/dev/null; do
	if [ -z "$out" ]; then
		cur=$(ls -d /tmp/l3run.* 2>/dev/null | sort -t. -k2 -n | tail -n 1)
		[ -n "$cur" ] && [ "$cur" != "$prev" ] && out=$cur/output.log
	fi
	if [ -n "$out" ]; then
		g=$(grep -c 'RESIZE-GROW' "$out" 2>/dev/null)
		s=$(grep -c 'RESIZE-SHRINK' "$out" 2>/dev/null)
		if [ "${g:-0}" -gt $grows ]; then
			resize $((BASE + (GROW_MIB << 20))) || bad=$((bad + 1))
			grows=$((grows + 1))
		elif [ "${s:-0}" -gt $shrinks ]; then
			resize $BASE || bad=$((bad + 1))
			shrinks=$((shrinks + 1))
		fi
	fi
	e=$(ioerrs)
	[ "$e" -gt $errs ] && errs=$e
	sleep 0.3
done
wait $l3
rc=$?
tr -d '\r' <$D/l3.out | grep -E '^(not )?ok - '
tr -d '\r' <$D/l3.out | grep -q '^not ok - ' && fail=1
grep -h 'vmrun: VM ended without reporting an exit status (qemu rc=0)' $D/l3.out
if ! tr -d '\r' <$D/l3.out | grep -q RESIZE-DONE; then
	nok "the L3 guest ran its three rounds (status $rc)"
	tr -d '\r' <$D/l3.out | tail -n 30 | sed 's/^/# L3: /'
fi
check "L2 grew and shrank both backends as asked ($grows and $shrinks times, $bad failed)" \
	test $grows = 4 -a $shrinks = 4 -a $bad = 0
for b in file loop; do
	n=$(grep "resize: backend" $D/$b.log | grep -c -- '-> ')
	check "bridge on the $b: 8 capacity changes logged ($n)" test "$n" = 8
	check "  none refused by the device, QEMU told of each (its back-end channel)" \
		eval "! grep -qE 'refused by the device|was not told' $D/$b.log"
done
check "vhost_blk failed no request ($errs I/O errors while the guest ran)" test "$errs" = 0
if [ $fail != 0 ]; then
	for b in file loop; do sed "s/^/# $b bridge: /" $D/$b.log | grep -v ' <- ' | tail -n 20; done
fi
exit $fail
