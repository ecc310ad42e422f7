#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# stall-test.sh --kernel 6.1|6.12|REL [--paths "0 1"] [--stall SEC]
#               [--old-ko KO]: a slow
# device never costs the disk. One test VM (no nested guest) with a
# virtio-blk disk whose backend is an NBD export of qemu-nbd on this machine
# (L1): under fio verify=crc32c in the VM, qemu-nbd is stopped with SIGSTOP
# for SEC seconds (default 60, twice the default io_timeout), then continued.
# Expected on each path: no I/O error, the disk alive, verify clean
# (stall-guest.sh); then a device stopped by turning bus mastering off
# must be given up with EIO in bounded time. The guest asks for the stall by writing a marker into a
# second small disk. Prints TAP-style lines prefixed with the kernel.
# --old-ko KO: first run the same on each path with KO, a virtio_blk_bio.ko
# built from an older tree for that kernel (to see the test fail before a
# fix); its lines are printed as comments, prefixed "old module".
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/lib.sh"
kernel=6.1 paths="0 1" stall=60 oldko=
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=$2; shift 2 ;;
	--paths) paths=$2; shift 2 ;;
	--stall) stall=$2; shift 2 ;;
	--old-ko) oldko=$2; shift 2 ;;
	*) echo "stall-test.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
rel=$(kernel_rel "$kernel") || exit 2
series=$(echo "$rel" | sed 's/^\([0-9]*\.[0-9]*\).*/\1/')
pfx="[$series] virtio-blk-bio stall"
T=$BUILD/vbb-stall-$rel
rm -rf "$T"
mkdir -p "$T"
fails=0
ok() { echo "ok - $pfx: $*"; }
nok() { echo "not ok - $pfx: $*"; fails=$((fails + 1)); }

truncate -s 128M "$T/stall.img"
truncate -s 1M "$T/mark.img"
qemu-nbd --persistent --shared=4 --format=raw --socket="$T/nbd.sock" \
	"$T/stall.img" >"$T/nbd.log" 2>&1 &
nbdpid=$!
for _ in $(seq 1 40); do [ -S "$T/nbd.sock" ] && break; sleep 0.25; done
trap 'kill -CONT $nbdpid 2>/dev/null; kill $nbdpid 2>/dev/null' EXIT

cat >"$T/guest.sh" <<X
export PATHS="$paths" STALL=$stall
exec bash /src/selftests/virtio_blk_bio/stall-guest.sh
X
qemu_args=(
	-blockdev "driver=nbd,node-name=dstall,server.type=unix,server.path=$T/nbd.sock"
	-device virtio-blk-pci,drive=dstall,serial=vbb-stall,num-queues=2
	-drive "file=$T/mark.img,if=none,id=dmark,format=raw"
	-device virtio-blk-pci,drive=dmark,serial=vbb-mark
)
qargs=()
[ -n "$oldko" ] && qargs+=(--file "$oldko:/old/virtio_blk_bio.ko")
for a in "${qemu_args[@]}"; do qargs+=(--qemu-arg "$a"); done

start=$SECONDS
"$top/scripts/vm.sh" --kernel "$rel" --name "vbb-stall-$rel" --timeout 900 --mem 2G \
	"${qargs[@]}" "$T/guest.sh" >"$T/vm.out" 2>&1 &
vmpid=$!

# VBB-STALL-N in the marker disk: stop the backend for $stall seconds.
seen=""
while kill -0 "$vmpid" 2>/dev/null; do
	m=$(head -c 16 "$T/mark.img" | tr -dc 'A-Z0-9-')
	if [ "$m" != "$seen" ] && [ "${m#VBB-STALL-}" != "$m" ]; then
		seen=$m
		kill -STOP "$nbdpid"
		echo "# $m: backend stopped for $stall s"
		sleep "$stall"
		kill -CONT "$nbdpid"
		echo "# $m: backend continued"
	fi
	sleep 0.5
done
wait "$vmpid"
vmrc=$?
while IFS= read -r line; do
	case $line in
	*"- old module"*) echo "#   $line" ;;
	"ok - "*) echo "ok - $pfx: ${line#ok - }" ;;
	"not ok - "*) echo "not ok - $pfx: ${line#not ok - }"; fails=$((fails + 1)) ;;
	*) echo "#   $line" ;;
	esac
done <"$T/vm.out"
[ "$vmrc" = 0 ] && ok "VM run ($((SECONDS - start)) s), exit 0, kernel log clean" ||
	nok "VM run, exit 0, kernel log clean (status $vmrc; console: $BUILD/vm/vbb-stall-$rel/console.log)"
[ "$fails" = 0 ]
