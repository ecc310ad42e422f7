#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The README's real-host quick start, with L2 as the host.
#
# make install ran on L1 into a staging root (scripts/install-test.sh; L2 has
# no compiler) that make check hands over as /root/hostinstall. Here, as on a
# host with udevd and kmod, no systemd:
#  - make install's files are copied in and what it runs on the machine runs:
#    depmod, scripts/install-post.sh (systemd-sysusers makes the user vhost-blk
#    in group kvm, udev reloads);
#  - modprobe vhost_blk loads the installed module; the udev rule makes
#    /dev/vhost-blk root:kvm 0660;
#  - /etc/vhost-blk-bridge/vb0.conf as the README writes it; the socket unit
#    without systemd: its ListenStream, SocketMode, SocketGroup and
#    DirectoryMode by hand, systemd-socket-activate holding the socket and
#    starting the service's ExecStart on the first connection, given the socket
#    with --fd 3;
#  - QEMU as an unprivileged user in group kvm (as libvirt's) boots an L3 guest
#    on the vhost-user disk: virtio_blk_bio finds it by serial, fio verifies, a
#    pattern it writes is on the backend afterwards; the bridge ran as
#    vhost-blk and logged the QEMU user's uid; a user outside kvm cannot
#    connect; SIGTERM ends the bridge with status 0;
#  - the same unit's ExecStart unchanged under socket activation (LISTEN_FDS),
#    and the README's systemd-less command line (--socket, --socket-group,
#    --user), each answering QEMU's user.
set -u
E2E=${E2E_DIR:-/src/selftests/e2e}
H=/root/hostinstall
D=/tmp/rh
REL=$(uname -r)
DISK=/dev/ram0
SERIAL=rh-disk
SECTORS=$((256 << 11))
PSECT=$((200 << 11))
UNITS=/usr/local/lib/systemd/system
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; return 1; fi; }

[ -d $H ] || { echo "no $H: the staged make install is provided by make check (scripts/install-test.sh)"; exit 77; }
for b in /lib/systemd/systemd-udevd udevadm systemd-socket-activate systemd-sysusers setpriv kmod; do
	command -v $b >/dev/null || { echo "$b is not in the L2 image (make deps installs systemd, udev, kmod)"; exit 77; }
done
rm -rf $D; mkdir -p $D/kmod
# The host's kmod in front of busybox's module tools, for this test only.
for t in modprobe depmod modinfo rmmod insmod lsmod; do ln -s "$(command -v kmod)" $D/kmod/$t; done
export PATH=$D/kmod:$PATH

pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	[ -n "${udevd:-}" ] && kill "$udevd" 2>/dev/null
	chmod 600 /dev/ttyS2 2>/dev/null; chmod 644 /dev/kmsg 2>/dev/null
	# The tests after this one find L2's modules where they were.
	rmmod vhost_blk 2>/dev/null
	rm -rf /lib/modules/$REL/updates/vhost_blk /lib/modules/$REL/updates/virtio_blk_bio
	mv $D/extra/*.ko /lib/modules/$REL/extra/ 2>/dev/null
	depmod -a "$REL" 2>/dev/null
}
trap cleanup EXIT

# The host's udevd runs before anything is installed.
mkdir -p /run/udev
/lib/systemd/systemd-udevd --daemon --resolve-names=late >$D/udevd.log 2>&1
udevd=$(pidof systemd-udevd)
check "udevd runs" test -n "$udevd" || exit 1

# A host has no copy of the modules but the ones make install puts there.
# (Moved aside, and back when the test ends.)
mkdir -p $D/extra
mv /lib/modules/$REL/extra/vhost_blk.ko /lib/modules/$REL/extra/virtio_blk_bio.ko $D/extra/

# ---- make install: its files, then what it does on the machine itself --------
# (Entry by entry: copying "$H/." would give / the staging directory's mode.)
(cd $H && for e in *; do cp -a "$e" / || exit 1; done) &&
	ok "make install: the staged files in place ($(cd $H && find . -type f ! -name 'modules.*' | wc -l) files)" ||
	nok "make install: the staged files in place"
check "  / is still 0755 ($(stat -c %a /))" test "$(stat -c %a /)" = 755
check "make install: depmod -a" depmod -a "$REL"
check "make install: scripts/install-post.sh (user, udev)" \
	sh /src/scripts/install-post.sh /usr/local/lib/sysusers.d/vhost-blk-bridge.conf
check "the user vhost-blk exists and is in group kvm ($(id vhost-blk 2>&1))" \
	sh -c 'id -nG vhost-blk | grep -qw kvm'

# ---- modprobe vhost_blk; the udev rule ----------------------------------------------
path=$(modinfo -n vhost_blk 2>&1)
check "modprobe finds the installed vhost_blk ($path)" \
	sh -c "case '$path' in /lib/modules/$REL/updates/vhost_blk/vhost_blk.ko*) true ;; *) false ;; esac"
check "modprobe vhost_blk" modprobe vhost_blk
udevadm settle -t 10
check "the udev rule: /dev/vhost-blk is root:kvm 0660 ($(stat -c '%U:%G %a' /dev/vhost-blk))" \
	test "$(stat -c '%U:%G %a' /dev/vhost-blk)" = "root:kvm 660"

# ---- the disk's config and the socket unit, without systemd --------------------------
modprobe brd rd_nr=1 rd_size=$((SECTORS / 2)) || { nok "modprobe brd"; exit 1; }
mkdir -p /etc/vhost-blk-bridge
printf 'BACKEND=%s\nBRIDGE_OPTIONS=--queues 2 --serial %s\n' $DISK $SERIAL >/etc/vhost-blk-bridge/vb0.conf
unit() { sed -n "s/^$2=//p" "$UNITS/vhost-blk-bridge@.$1" | sed 's/%i/vb0/g'; }
sock=$(unit socket ListenStream) smode=$(unit socket SocketMode) sgroup=$(unit socket SocketGroup)
dmode=$(unit socket DirectoryMode)
# The service's ExecStart with its EnvironmentFile, expanded as systemd does:
# ${BACKEND} one word, $BRIDGE_OPTIONS split at white space.
envf=$(unit service EnvironmentFile)
exec_line=$(unit service ExecStart)
BACKEND=$(sed -n 's/^BACKEND=//p' "$envf") BRIDGE_OPTIONS=$(sed -n 's/^BRIDGE_OPTIONS=//p' "$envf")
exec_line=${exec_line//'${BACKEND}'/$BACKEND}
exec_line=${exec_line//'$BRIDGE_OPTIONS'/$BRIDGE_OPTIONS}
read -r -a argv <<<"$exec_line"
check "the units: socket $sock ($smode, group $sgroup), ExecStart ${argv[*]}" \
	test -n "$sock" -a -n "$smode" -a -n "$sgroup" -a -x "${argv[0]}"
mkdir -p -m "$dmode" "$(dirname "$sock")"

# listen PATH LOG CMD...: systemd-socket-activate holds PATH with the unit's mode
# and group, and starts CMD (with LISTEN_FDS, the socket as fd 3) on the first
# connection. Its pid, the bridge's once started, is in $lpid.
lpid=
listen() {
	local path=$1 log=$2; shift 2
	# a socket left at PATH (a run before this one) would end the wait below
	# before systemd-socket-activate has replaced it with its own
	rm -f "$path"
	systemd-socket-activate -l "$path" "$@" >"$log" 2>&1 &
	lpid=$!
	pids+=("$lpid")
	for _ in $(seq 100); do [ -S "$path" ] && break; sleep 0.1; done
	chgrp "$sgroup" "$path" && chmod "$smode" "$path"
}

# Users: QEMU's (in kvm, like libvirt-qemu on Debian) and one outside kvm.
grep -q '^vbqemu:' /etc/passwd || echo 'vbqemu:x:64055:64055::/nonexistent:/bin/sh' >>/etc/passwd
grep -q '^vbqemu:' /etc/group || echo 'vbqemu:x:64055:' >>/etc/group
sed -i '/^kvm:/{/[:,]vbqemu\(,\|$\)/!s/$/,vbqemu/;s/:,/:/}' /etc/group
grep -q '^outsider:' /etc/passwd || echo 'outsider:x:64056:64056::/nonexistent:/bin/sh' >>/etc/passwd
as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --init-groups "$@"; }
# connect_as USER PATH: GET_FEATURES over the socket as USER; its reply header.
connect_as() {
	printf '\001\000\000\000\001\000\000\000\000\000\000\000' |
		as "$1" socat -t 3 - "UNIX-CONNECT:$2" 2>/dev/null | od -An -tx1 | tr -s ' \n' ' ' | cut -c1-36
}
reply_hdr=" 01 00 00 00 05 00 00 00 08 00 00 00"
uid_of() { id -u "$1"; }

# ---- 1: the guest, on the socket unit's equivalent with --fd 3 -----------------------
log1=$D/bridge-fd.log
listen "$sock" "$log1" env -u LISTEN_FDS -u LISTEN_PID -u LISTEN_FDNAMES "${argv[@]}" --fd 3 -v
pid1=$lpid
check "the socket is root:$sgroup $smode ($(stat -c '%U:%G %a' "$sock"))" \
	test "$(stat -c '%U:%G %a' "$sock")" = "root:$sgroup ${smode#0}"
check "a user outside kvm cannot connect" sh -c "! as outsider socat -t 1 - UNIX-CONNECT:$sock </dev/null 2>/dev/null"

# QEMU unprivileged, as on a host with libvirt: /dev/kvm is group kvm's (udev's
# default rules); L2's consoles are opened up for l3run's markers.
modprobe kvm_amd 2>/dev/null || modprobe kvm_intel 2>/dev/null
chgrp kvm /dev/kvm && chmod 660 /dev/kvm
chmod 666 /dev/ttyS2 /dev/kmsg 2>/dev/null
printf '#!/bin/sh\nexec bash %s/real-host-guest.sh %s %s %s\n' "$E2E" $SERIAL $SECTORS $PSECT >$D/guest.sh
chmod 755 $D/guest.sh
QARGS=(-object memory-backend-memfd,id=mem,size=1G,share=on -numa node,memdev=mem
       -chardev socket,id=c0,path=$sock
       -device vhost-user-blk-pci,chardev=c0,num-queues=2)
as vbqemu l3run -t 400 -m 1G $D/guest.sh "${QARGS[@]}" >$D/l3.out 2>&1
rc=$?
grep -E '^(ok|not ok) - ' $D/l3.out
grep -E '^not ok - |vmrun: ' $D/l3.out >/dev/null && grep -E 'vmrun: ' $D/l3.out | head -n 20 | sed 's/^/# /'
check "the L3 guest of QEMU as user vbqemu ran to its end (status $rc)" test $rc = 0 ||
	tail -n 20 $D/l3.out | sed 's/^/# /'
check "the bridge was started on the first connection, on the socket passed in" \
	grep -q "listening on the socket passed in, backend $DISK" $log1
check "  it runs as vhost-blk ($(awk '/^Uid:/ { print $2 }' /proc/$pid1/status 2>/dev/null))" \
	test "$(awk '/^Uid:/ { print $2 }' /proc/$pid1/status 2>/dev/null)" = "$(uid_of vhost-blk)"
check "  it logged the session of QEMU's user (uid $(uid_of vbqemu))" \
	grep -q "session start (peer pid [0-9]* uid $(uid_of vbqemu) " $log1
check "the guest's pattern is on $DISK" sh -c "[ \"\$(dd if=$DISK bs=1M skip=$((PSECT / 2048)) count=1 2>/dev/null | md5sum)\" = \
	\"\$(yes 'vhost-blk real-host quick start: written by the L3 guest' | head -c 1048576 | md5sum)\" ]"
kill -TERM "$pid1"
wait "$pid1"; rc=$?
check "SIGTERM: the bridge exits with status 0 ($rc)" test $rc = 0 || tail -n 20 $log1 | sed 's/^/# /'
rm -f "$sock"

# ---- 2: the unit's ExecStart as is, under socket activation ------------------------
log2=$D/bridge-activation.log
listen "$sock" "$log2" "${argv[@]}"
pid2=$lpid
check "socket activation: QEMU's user gets GET_FEATURES answered" \
	test "$(connect_as vbqemu "$sock")" = "$reply_hdr"
check "  the bridge took the socket by LISTEN_FDS and runs as vhost-blk" \
	grep -q "listening on socket activation (fd 3), backend $DISK.*as user vhost-blk" $log2
kill -TERM "$pid2"; wait "$pid2"; rc=$?
check "  SIGTERM: exit status 0 ($rc)" test $rc = 0
rm -f "$sock"

# ---- 3: the README's command line without systemd ---------------------------------
log3=$D/bridge-socket.log
rm -f "$sock"
vhost-blk-bridge --socket "$sock" --socket-group kvm --user vhost-blk \
	--backend $DISK --queues 2 --serial $SERIAL >$log3 2>&1 &
pid3=$!
pids+=("$pid3")
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
check "--socket --socket-group kvm: root:kvm 660 ($(stat -c '%U:%G %a' "$sock" 2>&1))" \
	test "$(stat -c '%U:%G %a' "$sock" 2>/dev/null)" = "root:kvm 660"
check "  QEMU's user gets GET_FEATURES answered" test "$(connect_as vbqemu "$sock")" = "$reply_hdr"
check "  a user outside kvm cannot connect" sh -c "! as outsider socat -t 1 - UNIX-CONNECT:$sock </dev/null 2>/dev/null"
kill -TERM "$pid3"; wait "$pid3"; rc=$?
check "  SIGTERM: exit status 0 ($rc)" test $rc = 0 || tail -n 10 $log3 | sed 's/^/# /'

check "vhost_blk unloads once the bridges are gone" rmmod vhost_blk
rmmod brd 2>/dev/null
exit $fail
