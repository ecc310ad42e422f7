#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# libvirt, in L2: the domain XML of Documentation/vhost-blk-bridge.rst
# ("libvirt") -- <disk type='vhostuser'> on vhost-blk-bridge, guest RAM from
# <memoryBacking> memfd + shared -- started by libvirtd (run as root, no
# systemd, no dbus) with the L3 kernel booted directly (guest half:
# selftests/e2e/libvirt-guest.sh, via vmrun --make-initrd).
#  - libvirtd answers and drives /usr/bin/qemu-system-x86_64;
#  - without <reconnect>, the domain does not start while the bridge is not
#    running; with it, virsh start waits for the bridge;
#  - with the bridge on a brd disk: QEMU gets vhost-user-blk-pci (2 queues)
#    and a shared memfd, the bridge a session; in L3 both virtio_blk_bio
#    paths see the disk (serial, size) and pass fio verify=crc32c; a pattern
#    the guest wrote is on the brd disk after virsh destroy;
#  - virsh destroy ends the bridge's session, the bridge lives on, vhost_blk
#    unloads once the bridge is gone.
# Skips when libvirt is not in the L2 image (it is added when installed on
# the host: make deps).
set -u
E2E=${E2E_DIR:-/src/selftests/e2e}
D=/tmp/lvirt
SOCK=$D/vb0.sock
BLOG=$D/bridge.log
DISK=/dev/ram0
SERIAL=lv-disk
SECTORS=$((256 << 11))
PSECT=$((200 << 11))
DOM=vb-guest
BAD_RE='Oops|BUG:|WARNING:|KASAN|UBSAN|lockdep|possible (recursive|circular) locking|blocked for more than|Kernel panic|general protection fault|soft lockup|hard LOCKUP|rcu.*detected stalls?'
export LIBVIRT_DEFAULT_URI=qemu:///system
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; return 1; fi; }

. /src/selftests/lib/libvirt.sh
if ! lv_have; then
	echo "libvirt is not in the L2 image (install it on the host: make deps)"
	exit 77
fi

rm -rf $D
mkdir -p $D
lv_prepare
lv_config /etc/libvirt $D/libvirtd.log

bridge_pid= lvd_pid=
cleanup() {
	virsh destroy $DOM >/dev/null 2>&1
	[ -n "$lvd_pid" ] && kill $lvd_pid 2>/dev/null
	[ -n "$bridge_pid" ] && kill $bridge_pid 2>/dev/null
}
trap cleanup EXIT

[ -e /dev/kvm ] || modprobe kvm_amd 2>/dev/null || modprobe kvm_intel 2>/dev/null
modprobe vhost_blk || { nok "modprobe vhost_blk"; exit 1; }
rmmod brd 2>/dev/null	# our own size, whatever ran before
modprobe brd rd_nr=1 rd_size=$((256 * 1024)) || { nok "modprobe brd"; exit 1; }

libvirtd >$D/libvirtd.out 2>&1 &
lvd_pid=$!
if ! check "libvirtd starts and answers on qemu:///system" \
	lv_wait_up qemu:///system $lvd_pid $D/version.out; then
	sed 's/^/# /' $D/version.out $D/libvirtd.out $D/libvirtd.log 2>/dev/null | tail -n 30
	exit 1
fi
grep -v '^$' $D/version.out | sed 's/^/# /'
emu=$(virsh domcapabilities --virttype kvm 2>&1 | sed -n 's:.*<path>\(.*\)</path>.*:\1:p')
check "libvirt's KVM domains run /usr/bin/qemu-system-x86_64 ($emu)" \
	test "$emu" = /usr/bin/qemu-system-x86_64

# ---- the domain: the documented XML, booting the L3 kernel directly -------
# The L3 script and the kernel command line come from vmrun, as for l3run:
# ttyS0 is the console, ttyS1 the script's output.
cmdline=$(vmrun --make-initrd $D/initrd.img --kernel /l3/vmlinuz --initrd /l3/initrd.img \
	--dir $D/l3 --timeout 900 $E2E/libvirt-guest.sh $SERIAL $SECTORS $PSECT) ||
	{ nok "L3 initramfs for the domain"; exit 1; }
cat >$D/$DOM.xml <<EOF
<domain type='kvm'>
  <name>$DOM</name>
  <memory unit='GiB'>1</memory>
  <vcpu>2</vcpu>
  <cpu mode='host-passthrough'/>
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
      <source type='unix' path='$SOCK'>
        <reconnect enabled='yes' timeout='10'/>
      </source>
      <target dev='vdb' bus='virtio'/>
    </disk>
    <serial type='file'>
      <source path='$D/console.log'/>
      <target port='0'/>
    </serial>
    <serial type='file'>
      <source path='$D/output.log'/>
      <target port='1'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
if ! virsh define $D/$DOM.xml >$D/define.out 2>&1; then
	nok "virsh define (the documented XML + direct kernel boot)"
	sed 's/^/# /' $D/define.out
	exit 1
fi
ok "virsh define (the documented XML + direct kernel boot)"

# Without <reconnect>, QEMU cannot start before the bridge: virsh start fails.
sed -e "s:<name>$DOM</name>:<name>$DOM-norec</name>:" -e '/<reconnect /d' \
	-e "s:$D/console.log:$D/norec-console.log:" -e "s:$D/output.log:$D/norec-output.log:" \
	$D/$DOM.xml >$D/$DOM-norec.xml
virsh define $D/$DOM-norec.xml >/dev/null 2>&1
if timeout 60 virsh start $DOM-norec >$D/start0.out 2>&1; then
	nok "without <reconnect>: virsh start fails while the bridge is not running"
	virsh destroy $DOM-norec >/dev/null 2>&1
else
	check "without <reconnect>: virsh start fails while the bridge is not running" \
		grep -q "Failed to connect to '$SOCK'" $D/start0.out
fi
grep -m 1 'Failed to connect' $D/start0.out | sed 's/^/# /'
virsh undefine $DOM-norec >/dev/null 2>&1

# With <reconnect>, QEMU retries the socket (every timeout='10' seconds)
# before it finishes starting: virsh start returns once the bridge listens.
: >$D/output.log
: >$D/console.log
virsh start $DOM >$D/start.out 2>&1 &
vstart_pid=$!
sleep 15
check "with <reconnect>: virsh start waits while the bridge is not running" \
	kill -0 $vstart_pid

vhost-blk-bridge --socket $SOCK --backend $DISK --queues 2 --serial $SERIAL -v \
	>$BLOG 2>&1 &
bridge_pid=$!
for _ in $(seq 50); do [ -S $SOCK ] && break; sleep 0.1; done
check "bridge starts on $DISK" test -S $SOCK || { cat $BLOG; exit 1; }

vstart_wait() {
	local end=$(($(date +%s) + 120))
	while [ "$(date +%s)" -le $end ]; do
		kill -0 $vstart_pid 2>/dev/null || { wait $vstart_pid; return; }
		sleep 1
	done
	kill $vstart_pid
	return 1
}
if ! check "virsh start $DOM completes once the bridge is up" vstart_wait; then
	sed 's/^/# /' $D/start.out /var/log/libvirt/qemu/$DOM.log | grep -v '^# -' | tail -n 20
	exit 1
fi
echo "=== L3 (libvirt domain $DOM)" >/dev/ttyS2 2>/dev/null

qlog=/var/log/libvirt/qemu/$DOM.log
check "QEMU has vhost-user-blk-pci with 2 queues on the socket" \
	grep -Eq "vhost-user-blk-pci.*num-queues.?.?2" $qlog
check "QEMU's guest RAM is a shared memfd" \
	grep -Eq 'memory-backend-memfd.*share.?.?(true|on)' $qlog

# Wait for the L3 checks (under a minute on an idle host); the domain is
# destroyed on a guest poweroff, reset or crash (on_poweroff/on_reboot/
# on_crash), which ends the wait too. The waits of this test add up to less
# than run-tests.sh's 900 s.
l3_done() {
	local end=$(($(date +%s) + 480))
	while [ "$(date +%s)" -le $end ]; do
		grep -q '^L3-CHECKS-DONE' $D/output.log && return 0
		[ "$(virsh domstate $DOM 2>/dev/null)" = running ] || return 1
		sleep 2
	done
	return 1
}
if l3_done; then
	ok "L3 guest ran its checks"
else
	nok "L3 guest ran its checks (domain state: $(virsh domstate $DOM 2>&1))"
	# Same words as vmrun for a guest that ended with no status, so that
	# run-tests.sh retries a silent L3 reset once (see testing.rst).
	[ "$(virsh domstate $DOM 2>/dev/null)" != running ] &&
		! grep -Eq "$BAD_RE" $D/console.log &&
		echo "vmrun: VM ended without reporting an exit status (qemu rc=0)"
	tail -n 20 $D/console.log | sed 's/^/# L3 console: /'
fi
tr -d '\r' <$D/output.log | grep -E '^(not )?ok - ' | sed 's/^\(not \)\{0,1\}ok - /&L3: /'
tr -d '\r' <$D/output.log | grep -q '^not ok - ' && fail=1
tr -d '\r' <$D/output.log | grep -E '^#' | head -n 20
check "rings started in the bridge" grep -q 'rings started' $BLOG

check "virsh destroy $DOM" virsh -q destroy $DOM
check "domain is shut off" test "$(virsh domstate $DOM 2>&1)" = "shut off"
sessions_ended() { grep -c "session ended" $BLOG; }
wait_sessions() {
	local end=$(($(date +%s) + 20))
	while [ "$(date +%s)" -le $end ]; do
		[ "$(sessions_ended)" -ge 1 ] && return 0
		sleep 0.2
	done
	return 1
}
check "bridge ends the session when the domain is destroyed" wait_sessions
check "bridge survives virsh destroy" kill -0 $bridge_pid

pattern() {
	yes "vhost-blk libvirt e2e: written by the L3 guest of the domain" | head -c 1048576
}
check "the guest's pattern is on $DISK" \
	test "$(dd if=$DISK bs=1M skip=$((PSECT / 2048)) count=1 iflag=direct 2>/dev/null |
		md5sum)" = "$(pattern | md5sum)"

tr -d '\r' <$D/console.log >/dev/ttyS2 2>/dev/null
if grep -Eq "$BAD_RE" $D/console.log; then
	nok "L3 kernel log clean"
	grep -E -m 5 "$BAD_RE" $D/console.log | sed 's/^/# L3 kernel: /'
else
	ok "L3 kernel log clean"
fi

check "virsh undefine $DOM" virsh -q undefine $DOM
kill $lvd_pid; wait $lvd_pid 2>/dev/null; lvd_pid=
kill $bridge_pid; wait $bridge_pid 2>/dev/null; bridge_pid=
check "vhost_blk unloads after the bridge exits" rmmod vhost_blk
rmmod brd

if [ $fail != 0 ]; then
	echo "# ---- bridge log ----"
	grep -v 'region [0-9]' $BLOG | sed 's/^/# /'
	echo "# ---- libvirtd log ----"
	sed 's/^/# /' $D/libvirtd.out $D/libvirtd.log 2>/dev/null | tail -n 30
	echo "# ---- QEMU log ----"
	sed 's/^/# /' $qlog | tail -n 20
fi
exit $fail
