#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# check: slow -- two live migrations of an L3 guest under nested KVM meet the nested-SVM flake of this host in many runs (as 46-migrate does); run it with SLOW=1 or alone
# virsh migrate, in L2: a libvirt domain on a vhost-user disk (the domain
# XML of Documentation/vhost-blk-bridge.rst, "libvirt") moves from one
# libvirtd to another and back while the guest writes with fio
# verify=crc32c. libvirt will not migrate a domain to the host it runs on,
# so the destination "host" is a second libvirtd in this L2 with a host
# name (UTS namespace), host UUID and state directories (mount namespace)
# of its own; each libvirtd's QEMU gets its own vhost-blk-bridge on the same
# loop device. Guest half: selftests/e2e/migrate-guest.sh, phases 1
# (use_bio=0) and 2 (use_bio=1): when the guest asks ("MIGRATE n"), virsh
# migrate --live moves it, and the mailbox disk then says "MIGRATED-n".
# Checked here: both migrations complete with the domain running on the
# other side and gone from the first, both bridges took the dirty log,
# vhost_blk failed no request, and the guest verified every byte it wrote
# on either side and ended with status 0.
set -u
E2E=${E2E_DIR:-/src/selftests/e2e}
D=/tmp/vmig
DOM=vb-mig
DST=$D/dst
SRC_URI=qemu:///system
DST_URI="qemu+unix:///system?socket=$DST/run/libvirt-sock"
BAD_RE='Oops|BUG:|WARNING:|KASAN|UBSAN|lockdep|possible (recursive|circular) locking|blocked for more than|Kernel panic|general protection fault|soft lockup|hard LOCKUP|rcu.*detected stalls?'
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; return 1; fi; }
# note TEXT: a comment line, also in L2's kernel log (kept if L2 dies).
note() { echo "# $*"; echo "49-virsh-migrate: $*" >/dev/kmsg 2>/dev/null; }

. /src/selftests/lib/libvirt.sh
. /src/selftests/lib/migrate.sh
if ! lv_have || ! command -v unshare >/dev/null; then
	echo "libvirt or unshare is not in the L2 image (install them on the host: make deps)"
	exit 77
fi

rm -rf $D
mkdir -p $D $DST/run $DST/lib/qemu $DST/cache/qemu $DST/log/qemu
lv_prepare
lv_config /etc/libvirt $D/libvirtd.log 6a0e2b7c-41d9-4f35-8c1e-5b9d3a27f604
lv_config $DST/etc $DST/libvirtd.log 9c4f1d82-7e3a-4b60-a5d1-0f8e6b2c9a13

pids=() loopdev=
cleanup() {
	virsh -c $SRC_URI destroy $DOM >/dev/null 2>&1
	virsh -c "$DST_URI" destroy $DOM >/dev/null 2>&1
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	[ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
	rmmod vhost_blk 2>/dev/null
}
trap cleanup EXIT

[ -e /dev/kvm ] || modprobe kvm_amd 2>/dev/null || modprobe kvm_intel 2>/dev/null
modprobe vhost_blk || { nok "modprobe vhost_blk"; exit 1; }
modprobe loop 2>/dev/null
ip link set lo up 2>/dev/null
truncate -s 256M $D/disk.img && truncate -s 1M $D/mbox.img &&
	loopdev=$(losetup -f --show $D/disk.img) || { nok "backing file and loop device"; exit 1; }

check "two bridges start on $loopdev" eval 'start_bridge a && start_bridge b' ||
	{ cat $D/*.log; exit 1; }

# The source libvirtd as 43-libvirt runs it; the destination in namespaces
# of its own: its /etc/libvirt, /run/libvirt, /var/{lib,cache,log}/libvirt
# are directories under $DST, so its socket is $DST/run/libvirt-sock here.
libvirtd >$D/libvirtd.out 2>&1 &
pids+=($!)
src_pid=$!
unshare --mount --uts sh -c "
	hostname vb-dst &&
	mount --bind $DST/etc /etc/libvirt &&
	mount --bind $DST/run /run/libvirt &&
	mount --bind $DST/lib /var/lib/libvirt &&
	mount --bind $DST/cache /var/cache/libvirt &&
	mount --bind $DST/log /var/log/libvirt &&
	exec libvirtd --pid-file $DST/libvirtd.pid" >$DST/libvirtd.out 2>&1 &
pids+=($!)
dst_pid=$!
for side in src dst; do
	if [ $side = src ]; then uri=$SRC_URI pid=$src_pid log=$D; else uri=$DST_URI pid=$dst_pid log=$DST; fi
	if ! check "the $side libvirtd answers ($uri)" lv_wait_up "$uri" $pid $log/version.out; then
		sed 's/^/# /' $log/version.out $log/libvirtd.out $log/libvirtd.log 2>/dev/null | tail -n 30
		exit 1
	fi
done
src_host=$(virsh -c $SRC_URI hostname 2>&1)
dst_host=$(virsh -c "$DST_URI" hostname 2>&1)
check "the two libvirtds are two hosts to libvirt ($src_host, $dst_host)" \
	test "$src_host" != "$dst_host" -a "$dst_host" = vb-dst

# ---- the domain: 43-libvirt's XML plus a mailbox disk ---------------------
printf '#!/bin/sh\nexec bash %s/migrate-guest.sh "1 2"\n' "$E2E" >$D/guest.sh
cmdline=$(vmrun --make-initrd $D/initrd.img --kernel /l3/vmlinuz --initrd /l3/initrd.img \
	--dir $D/l3 --timeout 1500 $D/guest.sh) || { nok "L3 initramfs for the domain"; exit 1; }
# domain_xml BRIDGE SIDE: the domain on BRIDGE's socket; its serial ports
# write to files of SIDE (appended: the guest comes back to the source).
# No SVM in the guest's CPU: an L3 guest with nested state does not resume
# after a migration in this L2 (see 46-migrate).
domain_xml() {
	cat <<-EOF
	<domain type='kvm'>
	  <name>$DOM</name>
	  <uuid>3d8e5f1a-92c4-4b7e-a0d6-7c1b2e9f4a58</uuid>
	  <memory unit='MiB'>512</memory>
	  <vcpu>2</vcpu>
	  <cpu mode='host-passthrough'>
	    <feature policy='disable' name='svm'/>
	  </cpu>
	  <memoryBacking>
	    <source type='memfd'/>
	    <access mode='shared'/>
	  </memoryBacking>
	  <os>
	    <type arch='x86_64' machine='q35'>hvm</type>
	    <kernel>/l3/vmlinuz</kernel>
	    <initrd>$D/initrd.img</initrd>
	    <cmdline>$cmdline</cmdline>
	  </os>
	  <on_poweroff>destroy</on_poweroff>
	  <on_reboot>destroy</on_reboot>
	  <on_crash>destroy</on_crash>
	  <devices>
	    <emulator>/usr/bin/qemu-system-x86_64</emulator>
	    <disk type='vhostuser' device='disk'>
	      <driver name='qemu' type='raw' queues='2'/>
	      <source type='unix' path='$D/$1.sock'>
	        <reconnect enabled='yes' timeout='10'/>
	      </source>
	      <target dev='vdb' bus='virtio'/>
	    </disk>
	    <disk type='file' device='disk'>
	      <driver name='qemu' type='raw'/>
	      <source file='$D/mbox.img'/>
	      <target dev='vdc' bus='virtio'/>
	      <serial>mig-mbox</serial>
	    </disk>
	    <serial type='file'>
	      <source path='$D/console-$2.log' append='on'/>
	      <target port='0'/>
	    </serial>
	    <serial type='file'>
	      <source path='$D/output-$2.log' append='on'/>
	      <target port='1'/>
	    </serial>
	    <memballoon model='none'/>
	  </devices>
	</domain>
	EOF
}
domain_xml a src >$D/src.xml
domain_xml b dst >$D/dst.xml
: >$D/output-src.log
: >$D/output-dst.log

# wait_word SIDE WORD: the guest, running on SIDE's libvirtd, prints WORD
# (600 s at most; not if the domain is gone from SIDE).
wait_word() {
	local uri=$SRC_URI end=$(($(date +%s) + 600))
	[ $1 = dst ] && uri=$DST_URI
	while [ "$(date +%s)" -le $end ]; do
		tr -d '\r' <$D/output-$1.log | grep -q "^$2" && return 0
		[ "$(virsh -c "$uri" domstate $DOM 2>/dev/null)" = running ] || return 1
		sleep 2
	done
	return 1
}

if ! check "virsh create $DOM on the source" virsh -c $SRC_URI create $D/src.xml; then
	sed 's/^/# /' /var/log/libvirt/qemu/$DOM.log 2>/dev/null | tail -n 20
	exit 1
fi
echo "=== L3 (libvirt domain $DOM)" >/dev/ttyS2 2>/dev/null

errs=0 steps=0
# phase:from:to:port (the migration stream's TCP port on 127.0.0.1)
for step in 1:src:dst:49152 2:dst:src:49153; do
	IFS=: read -r phase from to port <<<"$step"
	if [ $from = src ]; then furi=$SRC_URI turi=$DST_URI txml=$D/dst.xml
	else furi=$DST_URI turi=$SRC_URI txml=$D/src.xml; fi
	if ! wait_word $from "MIGRATE $phase"; then
		nok "the guest reaches phase $phase (on the $from libvirtd)"
		break
	fi
	note "phase $phase: the guest asks to migrate ($from -> $to)"
	# Downtime: the guest pauses for the last pass; under TCG that takes
	# longer than QEMU's 300 ms default.
	virsh -c "$furi" migrate-setmaxdowntime $DOM 5000 >/dev/null 2>&1
	t0=$(date +%s)
	# --unsafe: the mailbox is a file disk with the host's page cache;
	# L2 writes it itself. --xml: the destination's own bridge and
	# serial files.
	virsh -c "$furi" migrate --live --unsafe --xml $txml \
		--migrateuri tcp://127.0.0.1:$port --listen-address 127.0.0.1 \
		$DOM "$turi" >$D/migrate-$phase.out 2>&1
	rc=$?
	t1=$(date +%s)
	tst=$(virsh -c "$turi" domstate $DOM 2>&1 | head -n 1)
	note "phase $phase: virsh migrate: status $rc after $((t1 - t0)) s; $to: $tst"
	check "phase $phase: virsh migrate --live from the $from to the $to libvirtd (status $rc, $((t1 - t0)) s): the domain runs there ($tst) and is gone here" \
		eval 'test $rc = 0 -a "$tst" = running && ! virsh -c "$furi" domstate $DOM >/dev/null 2>&1'
	if [ $rc != 0 ] || [ "$tst" != running ]; then
		sed 's/^/# /' $D/migrate-$phase.out
		break
	fi
	e=$(ioerrs)
	[ "$e" -gt $errs ] && errs=$e
	mailbox MIGRATED-$phase
	steps=$((steps + 1))
done

# The guest ends on its own (on_poweroff: destroy) on the side it is on.
side=src; [ $steps = 1 ] && side=dst
uri=$SRC_URI; [ $side = dst ] && uri=$DST_URI
if [ $steps = 2 ]; then
	for _ in $(seq 300); do
		virsh -c "$uri" domstate $DOM >/dev/null 2>&1 || break
		sleep 2
	done
fi
virsh -c "$uri" destroy $DOM >/dev/null 2>&1
cat $D/output-src.log $D/output-dst.log | tr -d '\r' >$D/guest.out
grep -E '^(not )?ok - ' $D/guest.out | sed 's/^\(not \)\{0,1\}ok - /&L3: /'
grep -q '^not ok - ' $D/guest.out && fail=1
vm_exit=$(sed -n 's/.*@@VM-EXIT \([0-9]*\)@@.*/\1/p' $D/guest.out | tail -n 1)
check "the guest finished both phases and exited with status 0 (got ${vm_exit:-none})" \
	eval 'grep -q MIGRATE-DONE $D/guest.out && test "$vm_exit" = 0'
for b in a b; do
	check "bridge $b took the dirty log of a migration (SET_LOG_BASE, VHOST_F_LOG_ALL)" \
		grep -q "dirty log:" $D/$b.log
done
e=$(ioerrs)
[ "$e" -gt $errs ] && errs=$e
check "vhost_blk failed no request ($errs I/O errors)" test "$errs" = 0
cat $D/console-src.log $D/console-dst.log 2>/dev/null | tr -d '\r' >$D/console.log
tr -d '\r' <$D/console.log >/dev/ttyS2 2>/dev/null
if grep -Eq "$BAD_RE" $D/console.log; then
	nok "L3 kernel log clean"
	grep -E -m 5 "$BAD_RE" $D/console.log | sed 's/^/# L3 kernel: /'
else
	ok "L3 kernel log clean"
fi

if [ $fail != 0 ]; then
	tail -n 30 $D/guest.out | sed 's/^/# L3: /'
	for b in a b; do grep -v ' <- ' $D/$b.log | tail -n 15 | sed "s/^/# bridge $b: /"; done
	for l in /var/log/libvirt/qemu/$DOM.log $DST/log/qemu/$DOM.log; do
		[ -s $l ] && tail -n 8 $l | sed "s|^|# $l: |"
	done
	tail -n 15 $D/libvirtd.log $DST/libvirtd.log 2>/dev/null | sed 's/^/# /'
fi
exit $fail
