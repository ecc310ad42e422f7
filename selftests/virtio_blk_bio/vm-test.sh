#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# vm-test.sh --kernel 6.1|6.12|REL [--paths "0 1"] [--only main|pm]: virtio_blk_bio, both
# submission paths, run from L1 in one test VM booted on that kernel, on
# virtio-blk devices of the VM's own QEMU: no nested guest, so none of the
# nested-SVM flake (Documentation/testing.rst). Data integrity (fio
# verify=crc32c, ext4), plug batching, discard and write zeroes, read-only,
# I/O errors, a 16-entry ring without indirect descriptors, capacity change
# over QMP, suspend to RAM under I/O, poll queues, config limits checked at
# probe (4K blocks with topology, discard and write-zeroes limits below one
# block), queue_depth capped at the ring; and, device-side, the order of
# writes and flushes for O_SYNC and fsync'ed writes (QEMU's blklogwrites log,
# parsed here). The in-VM part is guest-tests.sh. Then two more VMs:
# hibernation, resumed with the disks' queue counts changed (the restore
# fails; hibernate-guest.sh). Last, one more VM: a kernel thread reads a
# disk given up, then polls a disk on the request path, while the system
# hibernates (no swap: it thaws after the snapshot; hibernate-guest.sh
# PHASE=pmio); --only pm runs that VM alone, --only main the first VM alone
# (make check on a kernel that gets the core tests). Prints TAP-style lines prefixed
# with the kernel ("[6.12] virtio-blk-bio: ...").
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/lib.sh"
kernel=6.1 paths="0 1" only=
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=$2; shift 2 ;;
	--paths) paths=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	*) echo "vm-test.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
rel=$(kernel_rel "$kernel") || exit 2
series=$(echo "$rel" | sed 's/^\([0-9]*\.[0-9]*\).*/\1/')
pfx="[$series] virtio-blk-bio"
T=$BUILD/vbb-test-$rel
rm -rf "$T"
mkdir -p "$T"
fails=0
ok() { echo "ok - $pfx: $*"; }
nok() { echo "not ok - $pfx: $*"; fails=$((fails + 1)); }

tap() { # FILE: the guest's result lines as ours, the rest as comments
	local line
	while IFS= read -r line; do
		case $line in
		"ok - "*) echo "ok - $pfx: ${line#ok - }" ;;
		"not ok - "*) echo "not ok - $pfx: ${line#not ok - }"; fails=$((fails + 1)) ;;
		*) echo "#   $line" ;;
		esac
	done <"$1"
}

if [ "$only" != pm ]; then
truncate -s 256M "$T/data.img"
truncate -s 32M "$T/log-data.img"
: >"$T/log.img"
dd if=/dev/urandom of="$T/ro.img" bs=1M count=1 2>/dev/null
truncate -s 8M "$T/ro.img"
ro_md5=$(head -c 1048576 "$T/ro.img" | md5sum | cut -d' ' -f1)
truncate -s 64M "$T/resize.img"
truncate -s 64M "$T/err.img"
truncate -s 64M "$T/small.img"
truncate -s 64M "$T/topo.img"
cat >"$T/blkdebug.conf" <<'X'
[inject-error]
event = "read_aio"
errno = "5"
sector = "8192"
X
# S3 needs KVM: a TCG VM does not come back from it here (CPU 0 halted with
# A20 masked, CPU 1 in real mode after the wakeup); 32-virtio-blk-bio-suspend
# tests it in a nested KVM guest instead.
suspend=1 why=
if [ "$("$top/scripts/vm.sh" --kernel "$rel" --print-accel 2>/dev/null)" != kvm ]; then
	suspend=0 why="the VM runs under TCG, which does not resume from S3 here; selftests/l2/32-virtio-blk-bio-suspend.sh tests it under KVM"
fi
cat >"$T/guest.sh" <<X
export RO_MD5=$ro_md5 PATHS="$paths" SUSPEND=$suspend SUSPEND_WHY="$why"
exec bash /src/selftests/virtio_blk_bio/guest-tests.sh
X

qemu_args=(
	-qmp "unix:$T/qmp.sock,server=on,wait=off"
	-drive "file=$T/data.img,if=none,id=ddata,format=raw,discard=unmap"
	-device virtio-blk-pci,drive=ddata,serial=vbb-data,num-queues=2
	-blockdev "driver=file,filename=$T/log-data.img,node-name=lgd"
	-blockdev "driver=file,filename=$T/log.img,node-name=lgl"
	-blockdev "driver=blklogwrites,node-name=lgw,file=lgd,log=lgl"
	-device virtio-blk-pci,drive=lgw,serial=vbb-log,write-cache=on,num-queues=1
	-drive "file=$T/ro.img,if=none,id=dro,format=raw,readonly=on"
	-device virtio-blk-pci,drive=dro,serial=vbb-ro
	-drive "file=$T/resize.img,if=none,id=dres,format=raw"
	-device virtio-blk-pci,drive=dres,serial=vbb-resize
	-drive "file=blkdebug:$T/blkdebug.conf:$T/err.img,if=none,id=derr,format=raw"
	-device virtio-blk-pci,drive=derr,serial=vbb-err
	-drive "file=$T/small.img,if=none,id=dsmall,format=raw"
	-device virtio-blk-pci,drive=dsmall,serial=vbb-small,queue-size=16,num-queues=1,write-cache=on,indirect_desc=off
	-drive "file=$T/topo.img,if=none,id=dtopo,format=raw,discard=unmap"
	-device virtio-blk-pci,drive=dtopo,serial=vbb-topo,logical_block_size=4096,physical_block_size=16384,min_io_size=16384,opt_io_size=1048576,max-discard-sectors=1,max-write-zeroes-sectors=1
	-blockdev "driver=null-co,node-name=fld,size=67108864,latency-ns=20000000,read-zeroes=on"
	-device virtio-blk-pci,drive=fld,serial=vbb-flush,write-cache=on,num-queues=2
)
qargs=()
for a in "${qemu_args[@]}"; do qargs+=(--qemu-arg "$a"); done

qmp() { # command-json...: send after the handshake, print the replies
	{ printf '{"execute":"qmp_capabilities"}\n'; printf '%s\n' "$@"; sleep 1; } |
		socat -t 2 - "UNIX-CONNECT:$T/qmp.sock" 2>&1
}

start=$SECONDS
"$top/scripts/vm.sh" --kernel "$rel" --name "vbb-$rel" --timeout 900 --mem 2G \
	"${qargs[@]}" "$T/guest.sh" >"$T/vm.out" 2>&1 &
vmpid=$!

# The guest writes a marker into the resize disk's first sector: grow the
# disk by 32M for each new VBB-RESIZE marker; for a VBB-SUSPEND marker, wait
# until the VM is suspended, then wake it.
seen=""
size=$((64 << 20))
while kill -0 "$vmpid" 2>/dev/null; do
	m=$(head -c 16 "$T/resize.img" | tr -dc 'A-Z0-9-')
	if [ "$m" != "$seen" ]; then
		case $m in
		VBB-RESIZE-*)
			size=$((size + (32 << 20)))
			reply=$(qmp "{\"execute\":\"block_resize\",\"arguments\":{\"device\":\"dres\",\"size\":$size}}")
			echo "# $m: block_resize to $size: $(echo "$reply" | tail -n 1)"
			seen=$m ;;
		VBB-SUSPEND-*)
			seen=$m st=
			for _ in $(seq 1 120); do
				st=$(qmp '{"execute":"query-status"}' | grep -o '"status": "[a-z-]*"' | tail -n 1)
				[ "$st" = '"status": "suspended"' ] && break
				sleep 0.5
			done
			reply=$(qmp '{"execute":"system_wakeup"}')
			echo "# $m: VM $st; system_wakeup: $(echo "$reply" | tail -n 1)" ;;
		esac
	fi
	sleep 0.5
done
wait "$vmpid"
vmrc=$?
tap "$T/vm.out"
[ "$vmrc" = 0 ] && ok "VM run ($((SECONDS - start)) s), exit 0, kernel log clean" ||
	nok "VM run, exit 0, kernel log clean (status $vmrc; console: $BUILD/vm/vbb-$rel/console.log)"

# --- Hibernation, resumed on a device that changed (hibernate-guest.sh): two
# 2-queue disks, one per path, and swap on an NVMe disk; the first VM
# hibernates and powers off, the second boots with both disks down to one
# queue and resumes. The restore must give both disks up, and their I/O and
# serial must fail at once.
if [ "$only" != main ]; then
truncate -s 64M "$T/hib-bio.img" "$T/hib-mq.img"
truncate -s 1G "$T/swap.img"
hib() { # NAME QUEUES PHASE: one of the two boots
	local a=() q
	a+=(--qemu-arg -drive --qemu-arg "file=$T/swap.img,if=none,id=dswap,format=raw"
	    --qemu-arg -device --qemu-arg nvme,drive=dswap,serial=vbb-swap)
	for q in bio mq; do
		a+=(--qemu-arg -drive --qemu-arg "file=$T/hib-$q.img,if=none,id=dh$q,format=raw"
		    --qemu-arg -device --qemu-arg "virtio-blk-pci,drive=dh$q,serial=vbb-hib-$q,num-queues=$2")
	done
	echo "export PHASE=$3; exec bash /src/selftests/virtio_blk_bio/hibernate-guest.sh" >"$T/$1.sh"
	"$top/scripts/vm.sh" --kernel "$rel" --name "vbb-$1-$rel" --timeout 300 --mem 2G \
		"${a[@]}" "$T/$1.sh" >"$T/$1.out" 2>&1
}
start=$SECONDS
hib hib-sleep 2 sleep
vmrc=$?
tap "$T/hib-sleep.out"
# it powers off while hibernating: no exit status (125)
[ "$vmrc" = 125 ] && grep -q '^# hibernating' "$T/hib-sleep.out" &&
	ok "hibernation: first VM hibernated and powered off ($((SECONDS - start)) s)" ||
	nok "hibernation: first VM hibernated and powered off (status $vmrc; console: $BUILD/vm/vbb-hib-sleep-$rel/console.log)"
start=$SECONDS
hib hib-wake 1 wake
vmrc=$?
tap "$T/hib-wake.out"
[ "$vmrc" = 0 ] && ok "hibernation: second VM resumed the image, exit 0, kernel log clean ($((SECONDS - start)) s)" ||
	nok "hibernation: second VM resumed the image, exit 0, kernel log clean (status $vmrc; console: $BUILD/vm/vbb-hib-wake-$rel/console.log)"
fi # --only main

# --- The blklogwrites log: superblock in sector 0, then per entry a 512-byte header
# {le64 sector, nr_sectors, flags, data_len} followed by the data sectors.
# flags: bit0 flush, bit1 FUA, bit2 discard, bit3 mark.
parse_log() {
	local log=$1 magic ss off size sector nrs flags dlen
	magic=$(od -A n -t u8 -N 8 "$log" | tr -d ' ')
	ss=$(od -A n -t u4 -j 24 -N 4 "$log" | tr -d ' ')
	[ "$magic" = "$((0x6a736677736872))" ] || { echo "bad magic $magic" >&2; return 1; }
	# The entry count in the superblock is only written back now and then: walk
	# the entries up to the first empty header instead.
	size=$(wc -c <"$log")
	off=$ss
	while [ $((off + 32)) -le "$size" ]; do
		read -r sector nrs flags dlen <<<"$(od -A n -t u8 -j "$off" -N 32 "$log" | tr '\n' ' ')"
		[ "$sector$nrs$flags$dlen" = 0000 ] && break
		echo "$sector $nrs $flags"
		if [ "$dlen" -gt 0 ]; then
			off=$((off + ss + (dlen + ss - 1) / ss * ss))
		else
			off=$((off + ss + nrs * ss))
		fi
	done
}

if ! parse_log "$T/log.img" >"$T/log.txt" 2>"$T/log.err"; then
	nok "blklogwrites log parsed ($(cat "$T/log.err"))"
else
	ok "blklogwrites log parsed ($(wc -l <"$T/log.txt") entries)"
	# One letter per entry: F flush; p/d/s plain/O_SYNC/fsync writes of use_bio=0,
	# P/D/S the same for use_bio=1 (regions 0/2/4M and 8/10/12M); x anything else.
	seq=$(while read -r sector nrs flags; do
		if [ $((flags & 1)) = 1 ]; then printf F; continue; fi
		if [ $((flags & 4)) = 4 ] || [ "$nrs" = 0 ]; then printf x; continue; fi
		mb=$((sector / 2048)) l=x
		case $mb in
		0) l=p ;; 2) l=d ;; 4) l=s ;; 8) l=P ;; 10) l=D ;; 12) l=S ;;
		esac
		printf %s "$l"
	done <"$T/log.txt")
	echo "# log: $seq"
	span() { # letter: from its first to its last occurrence, plus the flushes after it
		local c=$1 pre rest post
		[[ $seq == *$c* ]] || return 0
		pre=${seq%%$c*}
		rest=${seq:${#pre}}
		post=${rest##*$c}
		echo "${rest:0:$((${#rest} - ${#post}))}${post%%[!F]*}"
	}
	for ub in $paths; do
		if [ "$ub" = 0 ]; then p=p d=d s=s; else p=P d=D s=S; fi
		sp=$(span $p) sd=$(span $d) ss=$(span $s)
		[[ $sp =~ ^$p{10}F*$ ]] &&
			ok "use_bio=$ub: 10 plain writes reach the device with no flush between them" ||
			nok "use_bio=$ub: 10 plain writes reach the device with no flush between them ($sp)"
		[[ $sd =~ ^($d"F"+){10}$ ]] &&
			ok "use_bio=$ub: each of 10 O_SYNC writes is followed by a flush before the next write" ||
			nok "use_bio=$ub: each of 10 O_SYNC writes is followed by a flush before the next write ($sd)"
		[[ $ss =~ ^($s"F"+){10}$ ]] &&
			ok "use_bio=$ub: each of 10 fsync'ed writes is followed by a flush" ||
			nok "use_bio=$ub: each of 10 fsync'ed writes is followed by a flush ($ss)"
	done
fi

fi # --only pm

# --- I/O between ->freeze and ->restore, from a kernel thread the freezer
# leaves running (hibernate-guest.sh PHASE=pmio, helper module pm_io/):
# hibernation with no swap freezes the devices, takes the snapshot, fails
# to write it and thaws them.
if [ "$only" != main ]; then
kdir=$(realpath "$(kernel_kdir "$rel")")
rm -rf "$T/pm_io"
cp -r "$top/selftests/virtio_blk_bio/pm_io" "$T/pm_io"
if ! kernel_make "$kdir" -s -C "$kdir" M="$T/pm_io" modules >"$T/pm_io.log" 2>&1; then
	nok "pm_io helper module built ($T/pm_io.log)"
else
	truncate -s 64M "$T/pm-bio.img" "$T/pm-mq.img"
	a=(--file "$T/pm_io/vbb_pm_io.ko:/root/vbb_pm_io.ko")
	for q in bio mq; do
		a+=(--qemu-arg -drive --qemu-arg "file=$T/pm-$q.img,if=none,id=dh$q,format=raw"
		    --qemu-arg -device
		    --qemu-arg "virtio-blk-pci,drive=dh$q,serial=vbb-hib-$q,num-queues=2")
	done
	echo "export PHASE=pmio; exec bash /src/selftests/virtio_blk_bio/hibernate-guest.sh" \
		>"$T/pmio.sh"
	start=$SECONDS
	# about a minute; a hang takes the whole timeout
	"$top/scripts/vm.sh" --kernel "$rel" --name "vbb-pmio-$rel" --timeout 240 --mem 1G \
		"${a[@]}" "$T/pmio.sh" >"$T/pmio.out" 2>&1
	vmrc=$?
	tap "$T/pmio.out"
	d="I/O across hibernation from a kernel thread: VM exit 0, kernel log clean"
	[ "$vmrc" = 0 ] && ok "$d ($((SECONDS - start)) s)" ||
		nok "$d (status $vmrc; console: $BUILD/vm/vbb-pmio-$rel/console.log)"
fi
fi # --only main

[ "$fails" = 0 ] && rm -rf "$T"
[ "$fails" = 0 ]
