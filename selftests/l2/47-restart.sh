#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A bridge that restarts under I/O, in L2: one L3 guest on a vhost-user-blk
# disk whose QEMU reconnects (-chardev socket,reconnect-ms=500). The disk is
# a memory-backed null_blk behind dm-delay: reads take 30 ms, writes 5 ms,
# so requests are in flight at every kill and complete out of order (writes
# fetched after a read are published before it). Guest half:
# selftests/e2e/restart-guest.sh. Each time the guest asks ("RESTART-KILL
# n", fio writing with verify=crc32c beside fio reading), the bridge is
# killed with SIGKILL and started again on the same socket, twice, 5 s
# apart; QEMU reconnects and the guest's I/O carries on. Once per guest path
# (virtio_blk_bio use_bio=0, then use_bio=1). The guest checks every byte
# and that it saw no I/O error; here: every bridge killed had served
# requests, vhost_blk failed none, no bridge gave up waiting for the
# backend, and vhost_blk unloads with no device left. (Rings a new bridge
# resumed at a used index ahead of QEMU's position are shown; they need
# QEMU to see the socket close before the old device is released, which the
# order the dying bridge's files are closed in makes rare. That case is
# tested on its own: selftests/bridge/bridge-test.py.)
set -u
export DM_DISABLE_UDEV=1
E2E=${E2E_DIR:-/src/selftests/e2e}
D=/tmp/restart
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }

rm -rf $D; mkdir -p $D
NB=/sys/kernel/config/nullb/restart
bridge= l3= nbridges=0
cleanup() {
	[ -n "$l3" ] && kill "$l3" 2>/dev/null
	[ -n "$bridge" ] && kill "$bridge" 2>/dev/null
	wait 2>/dev/null
	timeout 60 dmsetup remove --noudevsync restart 2>/dev/null
	[ -d $NB ] && { echo 0 >$NB/power; rmdir $NB; } 2>/dev/null
	rmmod null_blk 2>/dev/null
	rmmod vhost_blk 2>/dev/null
}
trap cleanup EXIT

# A counter summed over vhost_blk's devices (debugfs): reqs, ioerr.
dev_stat() { # FIELD
	cat /sys/kernel/debug/vhost-blk/[0-9]*/stats 2>/dev/null |
		awk -v f="$1" '$1 == f { n += $2 } END { print n + 0 }'
}

start_bridge() {
	local i
	nbridges=$((nbridges + 1))
	vhost-blk-bridge --socket $D/r.sock --backend "$dev" --queues 2 \
		--serial restart-disk >$D/bridge-$nbridges.log 2>&1 &
	bridge=$!
	for i in $(seq 100); do
		[ -S $D/r.sock ] && return 0
		sleep 0.1
	done
	return 1
}

modprobe vhost_blk || { nok "modprobe vhost_blk"; exit 1; }
grep -q " /sys/kernel/debug " /proc/mounts || mount -t debugfs none /sys/kernel/debug
modprobe null_blk nr_devices=0 || { nok "modprobe null_blk"; exit 1; }
modprobe dm_delay || { nok "modprobe dm_delay"; exit 1; }
[ -d /sys/kernel/config/nullb ] || mount -t configfs configfs /sys/kernel/config
if mkdir $NB && echo 512 >$NB/size && echo 1 >$NB/memory_backed &&
   echo 2 >$NB/submit_queues && echo 1 >$NB/power; then
	# (6.12 names the disk after the configfs directory, 6.1 nullbN)
	nb=/dev/restart
	[ -b $nb ] || nb=/dev/nullb$(cat $NB/index)
	# delay: reads after 30 ms, writes (and flushes) after 5 ms.
	# dmsetup without udev (a test before may have left udev's control
	# socket behind; dmsetup would wait for its events forever): it makes
	# the /dev/mapper node itself.
	[ -b "$nb" ] && timeout 60 dmsetup create --noudevsync restart --table \
		"0 $((512 << 11)) delay $nb 0 30 $nb 0 5" &&
		timeout 60 dmsetup mknodes restart && dev=/dev/mapper/restart
fi
[ -b "${dev:-}" ] || { nok "a memory-backed null_blk behind dm-delay"; exit 1; }
check "bridge starts on $dev" start_bridge || { cat $D/bridge-1.log; exit 1; }

QARGS=(-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem
       -chardev socket,id=c0,path=$D/r.sock,reconnect-ms=500
       -device vhost-user-blk-pci,chardev=c0,num-queues=2)
printf '#!/bin/sh\nexec bash %s/restart-guest.sh restart-disk\n' "$E2E" >$D/guest.sh
prev=$(ls -d /tmp/l3run.* 2>/dev/null | sort -t. -k2 -n | tail -n 1)
l3run -t 420 $D/guest.sh "${QARGS[@]}" >$D/l3.out 2>&1 &
l3=$!

# restart: SIGKILL the bridge, start another. The device of the one killed
# must have served requests (the guest's I/O went on through it).
rounds=0 kills=0 idle=0 errs=0
restart() {
	local n
	n=$(dev_stat reqs)
	[ "$n" -gt 0 ] || idle=$((idle + 1))
	echo "# bridge $nbridges: killed after $n requests"
	kill -9 "$bridge"
	wait "$bridge" 2>/dev/null
	kills=$((kills + 1))
	sleep 1
	start_bridge || { nok "bridge $((nbridges)) starts again"; return 1; }
}

out=
while kill -0 $l3 2>/dev/null; do
	if [ -z "$out" ]; then
		cur=$(ls -d /tmp/l3run.* 2>/dev/null | sort -t. -k2 -n | tail -n 1)
		[ -n "$cur" ] && [ "$cur" != "$prev" ] && out=$cur/output.log
	fi
	n=$(grep -c 'RESTART-KILL' "${out:-/dev/null}" 2>/dev/null)
	if [ "${n:-0}" -gt $rounds ]; then
		rounds=$((rounds + 1))
		restart && sleep 5 && restart
	fi
	e=$(dev_stat ioerr)
	[ "$e" -gt $errs ] && errs=$e
	sleep 0.3
done
wait $l3
rc=$?
l3=
tr -d '\r' <$D/l3.out | grep -E '^(not )?ok - '
tr -d '\r' <$D/l3.out | grep -q '^not ok - ' && fail=1
# vmrun's own lines (how the guest ended) precede its console's tail:
# run-tests.sh's rule for the nested-SVM flake looks for them.
grep -E '^vmrun: [A-Za-z]' $D/l3.out
if ! tr -d '\r' <$D/l3.out | grep -q RESTART-DONE; then
	nok "the L3 guest ran its two rounds (status $rc)"
	tr -d '\r' <$D/l3.out | tail -n 30 | sed 's/^/# L3: /'
fi
check "the bridge was killed and started again 4 times ($kills), twice per round ($rounds rounds)" \
	test $kills = 4 -a $rounds = 2
check "each killed bridge had served requests ($idle had not)" test $idle = 0
check "vhost_blk failed no request ($errs I/O errors)" test "$errs" = 0
waited=$(grep -l 'locked by another device' $D/bridge-*.log 2>/dev/null | wc -l)
echo "# bridges that waited for the device before them: $waited"
check "no bridge gave up waiting for the backend" \
	eval "! grep -q 'still locked after' $D/bridge-*.log"
grep -h 'resuming at used index' $D/bridge-*.log | sed 's/^/# /'
kill "$bridge" 2>/dev/null
wait "$bridge" 2>/dev/null
bridge=
left=$(ls /sys/kernel/debug/vhost-blk 2>/dev/null | grep -c '^[0-9][0-9]*$')
check "no vhost-blk device left behind ($left)" test "$left" = 0
check "rmmod vhost_blk (no leaked references)" rmmod vhost_blk
if [ $fail != 0 ]; then
	for f in $D/bridge-*.log; do sed "s|^|# ${f##*/}: |" "$f" | tail -n 15; done
fi
exit $fail
