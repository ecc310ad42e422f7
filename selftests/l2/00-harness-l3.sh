#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The nested level of the harness: l3run boots an L3 guest with KVM inside L2,
# propagates its script's output and exit status, gives it a heartbeat, and
# reports a kernel WARN in L3 as a failure even when the script exits 0. The
# passing run also shows the nested path carries I/O: a short fio
# verify=crc32c job on a stock virtio-blk disk (QEMU's virtio-blk-pci, the
# stock virtio_blk driver in L3).
truncate -s 256M /tmp/nested-disk.img
cat >/tmp/l3-pass.sh <<'X'
echo "l3-marker $(uname -r)"
modprobe virtio_pci 2>/dev/null
modprobe virtio_blk || exit 1
for i in 1 2 3 4 5 6 7 8 9 10; do [ -b /dev/vda ] && break; sleep 0.5; done
[ -b /dev/vda ] || { echo "no /dev/vda"; exit 1; }
fio --name=nested --filename=/dev/vda --ioengine=libaio --direct=1 --rw=randwrite \
	--bs=4k --iodepth=16 --size=8M --verify=crc32c --verify_fatal=1 \
	--do_verify=1 --output-format=terse --terse-version=3 >/tmp/fio.out 2>&1
rc=$?
cut -d';' -f3-8 /tmp/fio.out | head -n 2
grep -i -E 'verify|error|bad' /tmp/fio.out | head -n 5
exit $rc
X
cat >/tmp/l3-fail.sh <<'X'
exit 7
X
cat >/tmp/l3-warn.sh <<'X'
insmod /root/harness_warn.ko
exit 0
X
out=$(l3run -t 240 /tmp/l3-pass.sh \
	-drive file=/tmp/nested-disk.img,if=none,id=d0,format=raw \
	-device virtio-blk-pci,drive=d0 2>&1); rc=$?
if echo "$out" | grep -q "l3-marker $(uname -r)"; then
	echo "ok - l3run boots an L3 guest with nested KVM and returns its output"
else
	echo "not ok - l3run boots an L3 guest with nested KVM and returns its output (rc=$rc)"
fi
# Its heartbeat (l3run -s, on by default) reached L2. (A guest killed when
# its beat stops: make check's harness tests, with an L2 guest.)
dir=$(ls -d /tmp/l3run.* 2>/dev/null | sort -t. -k2 -n | tail -n 1)
beats=$(grep -c '^@@ALIVE ' "$dir/alive.log" 2>/dev/null)
[ "${beats:-0}" -ge 1 ] && echo "ok - the L3 guest beats on its own port ($beats in $dir/alive.log)" ||
	echo "not ok - the L3 guest beats on its own port (${beats:-no} beats in $dir/alive.log)"
# (On a failure the output is shown: run-tests.sh looks in it for an L3
# guest that reset itself.)
[ "$rc" = 0 ] && echo "ok - L3 fio randwrite verify=crc32c on stock virtio-blk (nested KVM)" || {
	echo "not ok - L3 fio randwrite verify=crc32c on stock virtio-blk (nested KVM) (rc=$rc)"
	echo "$out"
}
rm -f /tmp/nested-disk.img
# The status and WARN runs need no more than one vCPU and a little memory.
out=$(l3run -t 120 -c 1 -m 512M /tmp/l3-fail.sh 2>&1); rc=$?
[ "$rc" = 7 ] && echo "ok - l3run propagates a failing script's status" || {
	echo "not ok - l3run propagates a failing script's status (got $rc, want 7)"
	echo "$out"
}
out=$(l3run -t 120 -c 1 -m 512M /tmp/l3-warn.sh 2>&1); rc=$?
[ "$rc" = 126 ] && echo "ok - l3run reports a WARN in the L3 kernel log" || {
	echo "not ok - l3run reports a WARN in the L3 kernel log (got $rc, want 126)"
	echo "$out"
}
