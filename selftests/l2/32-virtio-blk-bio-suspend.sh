#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# virtio_blk_bio across suspend to RAM, both paths: an L3 guest (nested KVM:
# a TCG VM does not come back from S3 here, so the guest-driver test,
# selftests/virtio_blk_bio/vm-test.sh, cannot do this one) suspends while fio
# writes with verify=crc32c; L2 wakes it over QMP once it reads the guest's
# marker on the resize disk and sees the VM suspended. ->freeze must drain
# and remove the rings, ->restore build them again: every disk logs both,
# the data verifies, I/O after resume verifies. One vCPU, two disks: the
# shortest L3 run that does it.
set -u
T=/tmp/vbb-suspend
rm -rf "$T"
mkdir -p "$T"
truncate -s 256M "$T/data.img"
truncate -s 64M "$T/resize.img"
cat >"$T/l3.sh" <<'X'
export ONLY=suspend PATHS="0 1"
exec bash /src/selftests/virtio_blk_bio/guest-tests.sh
X
qmp() { # command-json...: send after the handshake, print the replies
	{ printf '{"execute":"qmp_capabilities"}\n'; printf '%s\n' "$@"; sleep 1; } |
		socat -t 2 - "UNIX-CONNECT:$T/qmp.sock" 2>&1
}
l3run -t 300 -m 512M -c 1 "$T/l3.sh" \
	-qmp "unix:$T/qmp.sock,server=on,wait=off" \
	-drive "file=$T/data.img,if=none,id=ddata,format=raw" \
	-device virtio-blk-pci,drive=ddata,serial=vbb-data \
	-drive "file=$T/resize.img,if=none,id=dres,format=raw" \
	-device virtio-blk-pci,drive=dres,serial=vbb-resize >"$T/l3.out" 2>&1 &
l3pid=$!
seen=""
while kill -0 "$l3pid" 2>/dev/null; do
	m=$(head -c 16 "$T/resize.img" | tr -dc 'A-Z0-9-')
	case $m in
	VBB-SUSPEND-*)
		if [ "$m" != "$seen" ]; then
			seen=$m st=
			for _ in $(seq 1 120); do
				st=$(qmp '{"execute":"query-status"}' | grep -o '"status": "[a-z-]*"' | tail -n 1)
				[ "$st" = '"status": "suspended"' ] && break
				sleep 0.5
			done
			echo "# $m: guest $st; system_wakeup: $(qmp '{"execute":"system_wakeup"}' | tail -n 1)"
		fi ;;
	esac
	sleep 0.5
done
wait "$l3pid"
rc=$?
cat "$T/l3.out"
[ "$rc" = 0 ] && echo "ok - L3 guest run (exit 0)" || echo "not ok - L3 guest run (exit $rc)"
rm -rf "$T"
