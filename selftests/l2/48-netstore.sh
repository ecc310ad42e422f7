#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# check: slow -- its L3 guest under NBD and iSCSI servers in the same L2 met the nested-SVM flake in 4 of the 5 L2 deaths of the last two-kernel CI run (20 minutes of fresh L2s); run it with SLOW=1 or alone
# vhost_blk on network storage, in L2. A storage server runs in a network
# namespace of its own, joined to L2's by a veth pair (10.77.0.1 on L2's
# end, 10.77.0.2 on the server's): qemu-nbd exports a file over NBD, and
# the kernel's LIO target exports another over iSCSI (configfs, the portal
# made from inside the namespace; bench/netns.sh). L2 is the client: nbd-client attaches
# /dev/nbd0 (timeout NBD_TIMEOUT), open-iscsi's iscsid and iscsiadm log in
# (the session's replacement_timeout ISCSI_REPLACE, NOP-Outs every 2 s), and
# one vhost-blk-bridge serves each disk to an L3 guest under stock QEMU's
# vhost-user-blk-pci. Guest half: selftests/e2e/netstore-guest.sh (both
# guest paths; then a short link cut, the servers killed and started again,
# a long link cut, each under writes). When the guest asks, L2 sets veth
# down (for 4 s, or until the guest is done), or kills qemu-nbd (-9) and
# disables LIO's target portal group, then starts both again 3 s later, and
# connects NBD again under a new bridge (QEMU reconnects: reconnect-ms).
# Here: the bridges stop within a bound, vhost_blk unloads, the NBD and
# iSCSI sessions end, and the region the guest flushed before the failures
# reads back intact (fio verify_only) through new connections.
set -u
E2E=${E2E_DIR:-/src/selftests/e2e}
D=/tmp/netstore
. ${BENCH_DIR:-/src/bench}/netns.sh
IP=$NETNS_IP
SRV=$NETNS_SERVER
IQN=iqn.2026-12.test.vhost-blk:netstore
# (NETSTORE_NBD_TIMEOUT=0: no NBD timeout, to see the bound fail)
NBD_TIMEOUT=${NETSTORE_NBD_TIMEOUT:-10}
ISCSI_REPLACE=10
# The most seconds an I/O may take while the network or a server is down:
# the NBD timeout, or iSCSI's NOP-Out interval + timeout + replacement
# timeout, plus the requeue and retry of the SCSI layer, rounded up.
BOUND=45
SIZE=$((192 << 20))
T=/sys/kernel/config/target
G=$T/iscsi/$IQN/tpgt_1
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; return 1; fi; }
skip_all() { echo "$*"; exit 77; }

for b in $IP /usr/bin/unshare /usr/bin/nsenter qemu-nbd nbd-client iscsid iscsiadm; do
	command -v $b >/dev/null || skip_all "no $b in this image (make deps installs nbd-client and open-iscsi)"
done

rm -rf $D /tmp/qemu-nbd-netstore.log; mkdir -p $D
declare -A bpid=()
l3= iscsid_pid= nbd= sdev= lio=0

lio_up() {
	modprobe target_core_mod && modprobe target_core_file &&
		modprobe iscsi_target_mod || return 1
	# (configfs is a module here, loaded with the target's)
	grep -q " /sys/kernel/config " /proc/mounts ||
		mount -t configfs configfs /sys/kernel/config || return 1
	lio=1	# (lio_down takes away whatever part was made)
	mkdir -p $T/core/fileio_0/netstore &&
		echo "fd_dev_name=$D/iscsi.img,fd_dev_size=$SIZE" >$T/core/fileio_0/netstore/control &&
		echo 1 >$T/core/fileio_0/netstore/enable &&
		mkdir -p $G/lun/lun_0 &&
		ln -s $T/core/fileio_0/netstore $G/lun/lun_0/netstore &&
		echo 0 >$G/attrib/authentication &&
		echo 1 >$G/attrib/generate_node_acls &&
		echo 0 >$G/attrib/demo_mode_write_protect &&
		in_netns mkdir $G/np/$SRV:3260 &&
		echo 1 >$G/enable
}

lio_down() {
	[ $lio = 1 ] || return 0
	echo 0 >$G/enable
	rmdir $G/np/$SRV:3260
	rm -f $G/lun/lun_0/netstore
	rmdir $G/lun/lun_0 $G $T/iscsi/$IQN
	rmdir $T/core/fileio_0/netstore $T/core/fileio_0
	lio=0
	[ ! -d $T/iscsi/$IQN ]
}

iscsi_login() {
	iscsiadm -m discovery -t sendtargets -p $SRV >$D/discovery.log 2>&1 &&
		iscsiadm -m node -T $IQN -p $SRV -o update \
			-n node.session.timeo.replacement_timeout -v $ISCSI_REPLACE &&
		iscsiadm -m node -T $IQN -p $SRV --login >$D/login.log 2>&1 || return 1
	local i b
	for i in $(seq 100); do
		for b in /sys/class/iscsi_session/session*/device/target*/*/block/*; do
			[ -e "$b" ] && { sdev=/dev/${b##*/}; [ -b "$sdev" ] && return 0; }
		done
		sleep 0.1
	done
	return 1
}

# gone SEC PID...: the PIDs have ended within SEC seconds.
gone() {
	local sec=$1 i p left
	shift
	for i in $(seq $((sec * 4))); do
		left=0
		for p in "$@"; do kill -0 "$p" 2>/dev/null && left=1; done
		[ $left = 0 ] && return 0
		sleep 0.25
	done
	return 1
}

# (Each step bounded: a bridge stuck in vhost_blk's drain waits for the
# initiators, which disconnecting ends.)
cleanup() {
	local p
	[ -n "$l3" ] && kill "$l3" 2>/dev/null
	for p in "${bpid[@]}"; do kill "$p" 2>/dev/null; done
	[ -n "$NETNS_PID" ] && $IP link set vh up 2>/dev/null
	timeout 30 nbd-client -d /dev/nbd0 >/dev/null 2>&1
	timeout 30 nbd-client -d /dev/nbd1 >/dev/null 2>&1
	timeout 30 iscsiadm -m node -U all >/dev/null 2>&1
	gone 30 $l3 "${bpid[@]}"
	rmmod vhost_blk 2>/dev/null
	[ -n "$iscsid_pid" ] && kill "$iscsid_pid" 2>/dev/null
	[ -n "$NBD_SRV_PID" ] && kill "$NBD_SRV_PID" 2>/dev/null
	lio_down 2>/dev/null
	netns_down
}
trap cleanup EXIT

netns_up || { nok "a server namespace joined by veth"; exit 1; }
check "the server namespace answers on $SRV" ping -c 1 -W 5 $SRV >/dev/null

# NBD: qemu-nbd in the namespace, nbd-client here.
truncate -s $SIZE $D/nbd.img $D/iscsi.img
nbd_serve $D/nbd.img netstore --cache=writeback
modprobe nbd nbds_max=4 || { nok "modprobe nbd"; exit 1; }
nbd_attach /dev/nbd0 netstore $NBD_TIMEOUT && nbd=/dev/nbd0
check "nbd-client attaches /dev/nbd0 from $SRV (timeout $NBD_TIMEOUT s)" \
	test "$nbd" = /dev/nbd0 -a "$(blockdev --getsize64 /dev/nbd0 2>/dev/null)" = $SIZE ||
	{ cat /tmp/qemu-nbd-netstore.log; exit 1; }

# iSCSI: LIO in the namespace (configfs is one for all namespaces; the
# portal's socket is the namespace's), open-iscsi here.
check "LIO exports a file on $SRV:3260 ($IQN)" lio_up || exit 1
modprobe iscsi_tcp && modprobe sd_mod 2>/dev/null
mkdir -p /etc/iscsi /var/lib/iscsi /run/lock/iscsi
echo "InitiatorName=iqn.2026-12.test.vhost-blk:l2" >/etc/iscsi/initiatorname.iscsi
cat >/etc/iscsi/iscsid.conf <<EOF
node.startup = manual
node.session.timeo.replacement_timeout = $ISCSI_REPLACE
node.conn[0].timeo.noop_out_interval = 2
node.conn[0].timeo.noop_out_timeout = 2
node.conn[0].timeo.login_timeout = 5
node.session.initial_login_retry_max = 2
EOF
# (a session of its own: iscsid signals its process group when it stops)
setsid iscsid -f >$D/iscsid.log 2>&1 &
iscsid_pid=$!
sleep 1
check "open-iscsi logs in to $IQN" iscsi_login ||
	{ cat $D/discovery.log $D/login.log $D/iscsid.log; exit 1; }

modprobe vhost_blk || { nok "modprobe vhost_blk"; exit 1; }
grep -q " /sys/kernel/debug " /proc/mounts || mount -t debugfs none /sys/kernel/debug
start_bridge() { # NAME DEV
	local i
	vhost-blk-bridge --socket $D/$1.sock --backend "$2" --queues 2 \
		--serial "net-$1" >>$D/bridge-$1.log 2>&1 &
	bpid[$1]=$!
	for i in $(seq 100); do
		[ -S $D/$1.sock ] && return 0
		sleep 0.1
	done
	return 1
}
check "bridges start on $nbd and $sdev" \
	eval "start_bridge nbd $nbd && start_bridge iscsi $sdev" || { cat $D/bridge-*.log; exit 1; }

QARGS=(-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem
       -chardev socket,id=c0,path=$D/nbd.sock,reconnect-ms=500 -device vhost-user-blk-pci,chardev=c0,num-queues=2
       -chardev socket,id=c1,path=$D/iscsi.sock -device vhost-user-blk-pci,chardev=c1,num-queues=2)
printf '#!/bin/sh\nexec bash %s/netstore-guest.sh %s net-nbd net-iscsi\n' "$E2E" $BOUND >$D/guest.sh
prev=$(ls -d /tmp/l3run.* 2>/dev/null | sort -t. -k2 -n | tail -n 1)
l3run -t 600 $D/guest.sh "${QARGS[@]}" >$D/l3.out 2>&1 &
l3=$!

# What the guest asks for, each once.
short_cut() {
	echo "# link down for 4 s"
	$IP link set vh down; sleep 4; $IP link set vh up
}
restart_servers() {
	echo "# qemu-nbd killed, LIO's portal group disabled; both back 3 s later"
	kill -9 "$NBD_SRV_PID"; wait "$NBD_SRV_PID" 2>/dev/null
	echo 0 >$G/enable
	sleep 3
	nbd_serve $D/nbd.img netstore --cache=writeback
	echo 1 >$G/enable
	sleep 1
	kill -0 "$NBD_SRV_PID" && restarted=1
}
# An NBD disk whose connection broke stays dead until it is connected
# again, which its opener (the bridge) must let go of first; QEMU keeps the
# guest waiting and reconnects to the new bridge (reconnect-ms).
revive_nbd() {
	echo "# NBD: bridge stopped, /dev/nbd0 connected again, bridge started again"
	kill "${bpid[nbd]}"
	gone 30 "${bpid[nbd]}" || { echo "# the NBD bridge did not stop"; return 1; }
	rm -f $D/nbd.sock
	nbd-client -d /dev/nbd0 >/dev/null 2>&1
	nbd_attach /dev/nbd0 netstore $NBD_TIMEOUT && start_bridge nbd /dev/nbd0 && revived=1
}
long_cut() {
	echo "# link down until the guest is done"
	$IP link set vh down
}
declare -A done_=()
out= restarted=0 revived=0
while kill -0 $l3 2>/dev/null; do
	if [ -z "$out" ]; then
		cur=$(ls -d /tmp/l3run.* 2>/dev/null | sort -t. -k2 -n | tail -n 1)
		[ -n "$cur" ] && [ "$cur" != "$prev" ] && out=$cur/output.log
	fi
	for m in "CUT short:short_cut" "KILL:restart_servers" "REVIVE:revive_nbd" "CUT long:long_cut" \
		 "END:$IP link set vh up"; do
		[ -z "${done_[${m%%:*}]:-}" ] || continue
		grep -q "NETSTORE-${m%%:*}" "${out:-/dev/null}" 2>/dev/null || continue
		done_[${m%%:*}]=1
		${m#*:}
	done
	sleep 0.3
done
wait $l3
rc=$?
l3=
$IP link set vh up
tr -d '\r' <$D/l3.out | grep -E '^(not )?ok - |^# '
tr -d '\r' <$D/l3.out | grep -q '^not ok - ' && fail=1
# vmrun's own lines (how the guest ended) precede its console's tail:
# run-tests.sh's rule for the nested-SVM flake looks for them.
grep -E '^vmrun: [A-Za-z]' $D/l3.out
if ! tr -d '\r' <$D/l3.out | grep -q NETSTORE-DONE; then
	nok "the L3 guest ran to its end (status $rc)"
	tr -d '\r' <$D/l3.out | tail -n 30 | sed 's/^/# L3: /'
fi
check "the guest asked for the short cut, the restart, the reconnect and the long cut (${!done_[*]})" \
	test ${#done_[@]} = 5
check "qemu-nbd was killed and a new one served" test $restarted = 1
check "NBD connected again under a new bridge" test $revived = 1

# Teardown, bounded: the bridges stop on SIGTERM, vhost_blk unloads, the
# sessions end.
stopped=1
for p in "${bpid[@]}"; do kill "$p"; done
for p in "${bpid[@]}"; do
	for i in $(seq 120); do kill -0 "$p" 2>/dev/null || break; sleep 0.25; done
	kill -0 "$p" 2>/dev/null && stopped=0
done
check "the bridges stop within 30 s of SIGTERM" test $stopped = 1
[ $stopped = 1 ] && { wait "${bpid[@]}"; bpid=(); }
left=$(ls /sys/kernel/debug/vhost-blk 2>/dev/null | grep -c '^[0-9][0-9]*$')
check "no vhost-blk device left behind ($left)" test "$left" = 0
check "rmmod vhost_blk (no leaked references)" rmmod vhost_blk
nbd_gone() { timeout 30 nbd-client -d /dev/nbd0 && gone_file 10 /sys/block/nbd0/pid; }
gone_file() { local i; for i in $(seq $(($1 * 4))); do [ -e "$2" ] || return 0; sleep 0.25; done; return 1; }
check "nbd-client -d ends the NBD session (no /sys/block/nbd0/pid)" nbd_gone
check "iscsiadm logs out" timeout 60 iscsiadm -m node -T $IQN -p $SRV --logout

# What the guest flushed before the failures reads back through new
# connections (the same fio job as the guest's, verify only).
flushed() { # DEV
	fio --filename="$1" --name=flushed --direct=1 --ioengine=libaio --iodepth=8 \
		--rw=write --bs=64k --offset=160m --size=16m --verify=crc32c \
		--verify_only >$D/readback.out 2>&1 && ! grep -q "err= *[1-9]" $D/readback.out ||
		{ grep -m 5 -E 'verify|err' $D/readback.out; false; }
}
nbd=
nbd_attach /dev/nbd1 netstore $NBD_TIMEOUT && nbd=/dev/nbd1
check "NBD: the flushed region reads back intact on a new connection" eval "[ -n \"$nbd\" ] && flushed $nbd"
timeout 30 nbd-client -d /dev/nbd1 >/dev/null 2>&1
sdev=
check "iSCSI: the flushed region reads back intact in a new session" eval "iscsi_login && flushed \$sdev"
check "iscsiadm logs out again" timeout 60 iscsiadm -m node -T $IQN -p $SRV --logout
kill "$iscsid_pid"; iscsid_pid=
kill "$NBD_SRV_PID"; NBD_SRV_PID=
check "LIO's target and backstore are removed" lio_down
if [ $fail != 0 ]; then
	for f in $D/bridge-*.log /tmp/qemu-nbd-netstore.log $D/iscsid.log; do
		sed "s|^|# ${f##*/}: |" "$f" | tail -n 15
	done
	dmesg | grep -E 'nbd|iSCSI|iscsi|connection|sd ' | tail -n 30 | sed 's/^/# dmesg: /'
fi
exit $fail
