#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# vm.sh: run a script as root in a test VM (L2) booted on a test kernel (one
# unpacked by make deps in build/kernels, see scripts/deps.sh).
#
# usage: scripts/vm.sh [--kernel 6.1|6.12|7.3|REL] [--timeout SEC] [--stall SEC] [--mem 4G] [--smp 2]
#                      [--name NAME] [--file SRC[:DST]]... [--bin NAME|PATH]...
#                      [--qemu-arg ARG]... [--accel kvm|tcg] [--plugin SO[,ARGS]]
#                      [--cpu MODEL] [--tcg-thread multi|single] [--qemu BIN] [--print-accel]
#                      SCRIPT [ARGS...]
#
# Builds both modules for the kernel and the userspace tools, assembles the L2 image
# (cached under build/img/REL) and boots it: KVM when a short canary boot proves KVM
# works on this machine, TCG (-cpu max, which gives L2 nested SVM) otherwise. Prints
# the script's output and exits with its status; a VM that hangs is killed at the
# timeout (exit 124); Oops/BUG/WARNING/KASAN/lockdep/hung-task lines in the kernel log
# fail the run (exit 126). Logs: build/vm/NAME/{console.log,output.log,l3-console.log}.
# --plugin loads a TCG plugin into the L2 QEMU when it runs on TCG (make bench's
# cost counts, tools/cost-plugin); --stall SEC kills a VM whose heartbeat has
# stopped for SEC seconds (scripts/vm/vmrun); --cpu and --tcg-thread replace
# the L2 QEMU's CPU model and TCG threading, --qemu BIN the L2 QEMU itself
# (make flake-rate); --print-accel builds the images, prints the
# accelerator a VM would get (kvm or tcg) and exits.
#
# Inside L2: the project's modules in /lib/modules/REL/extra (modprobe vhost_blk,
# modprobe virtio_blk_bio), /src/selftests, the tools in /usr/bin, and
#   l3run [-t SEC] [-s SEC] [-m MEM] [-c CPUS] [-d] SCRIPT [QEMU_ARGS...]
# which boots an L3 guest (nested KVM, same kernel) running SCRIPT (-d: with
# QEMU's default devices).
#
# A kernel whose compiler this machine lacks (7.3: gcc-14) has its modules built
# in the Debian 13 rootfs (scripts/rootfs.sh); Debian's 7.x layout (the image at
# lib/modules/REL/vmlinuz, .ko.xz, depmod run by deps) is taken as it is.
#
# It builds from the checkout it lives in, into that checkout's build/. Several
# people editing one checkout: run it from a private copy (rsync -a --exclude build).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

kernel=6.1 timeout=600 stall=0 mem=4G smp=2 name= accel= plugin= print_accel=0
files=() bins=() qargs=() cpuargs=()
while [ $# -gt 0 ]; do
	case $1 in
	--kernel) kernel=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--stall) stall=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--name) name=$2; shift 2 ;;
	--file) files+=(--file "$2"); shift 2 ;;
	--bin) bins+=(--bin "$2"); shift 2 ;;
	--qemu-arg) qargs+=("$2"); shift 2 ;;
	--accel) accel=$2; shift 2 ;;
	--plugin) plugin=$2; shift 2 ;;
	--print-accel) print_accel=1; shift ;;
	--cpu) cpuargs+=(--cpu "$2"); shift 2 ;;
	--tcg-thread) cpuargs+=(--tcg-thread "$2"); shift 2 ;;
	--qemu) cpuargs+=(--qemu "$2"); shift 2 ;;
	-h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "vm.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
if [ $print_accel = 0 ]; then
	[ $# -gt 0 ] || { echo "vm.sh: no script given (see --help)" >&2; exit 2; }
	script=$1; shift
	[ -f "$script" ] || { echo "vm.sh: script $script not found" >&2; exit 2; }
else
	script=accel
fi

rel=$(kernel_rel "$kernel")
kimage=$(kernel_image "$rel")
kroot=$(kernel_root "$rel")
name=${name:-$(basename "$script" .sh)-$rel}
vmdir=$BUILD/vm/$name
mkdir -p "$vmdir" "$BUILD/k"

# One build of a kernel's modules and images at a time (parallel runs share build/).
exec 9>"$BUILD/k/.lock-$rel"
flock 9
tree=$(build_modules "$rel")
make -s -C "$TOP" tools >&2
kos=("$tree/vhost_blk/vhost_blk.ko" "$tree/virtio_blk_bio/virtio_blk_bio.ko")

imgdir=$BUILD/img/$rel
mkdir -p "$imgdir"
vmtools=$TOP/scripts/vm
common_bins=("${VM_COMMON_BINS[@]}")
l2_mods="virtio_pci virtio_blk vhost vhost_iotlb null_blk brd loop kvm_amd ext4 tun dm_delay"
# network storage (selftests/l2/48-netstore.sh, the bench's nbd backend)
l2_mods+=" veth nbd iscsi_tcp sd_mod target_core_mod target_core_file iscsi_target_mod"
tool_bins=()
vbmark=$TOP/tools/cost-plugin/vbmark
for t in "$TOP/tools/vhost-blk-bridge/vhost-blk-bridge" "$TOP/selftests/vhost_blk/vhost_blk_test" "$vbmark"; do
	[ -x "$t" ] && tool_bins+=(--file "$t:/usr/bin/$(basename "$t")")
done

# L3 image: the guest side (virtio_blk_bio + tests).
warnko=$BUILD/k/$rel/warn_on/harness_warn.ko
l3key=$(inputs_hash "${kos[@]}" "$TOP/selftests" "$TOP/bench" "$vmtools" "$warnko" \
	"$KERNELS_DIR/$rel/.complete" "$vbmark")
if [ "$(cat "$imgdir/l3.key" 2>/dev/null)" != "$l3key" ]; then
	echo "vm.sh: building L3 image for $rel" >&2
	make_l3_image "$rel" "$kroot" "$imgdir/l3.img" "${kos[@]}" -- --file "$warnko:/root/harness_warn.ko"
	echo "$l3key" >"$imgdir/l3.key"
fi

# L2 image: the host side, carrying QEMU, the tools and the L3 kernel + image.
# (l3run -d, QEMU's default devices: the VGA card's BIOS and the default NIC's ROM.)
fw=()
for f in /usr/share/seabios/bios-256k.bin /usr/share/qemu/linuxboot_dma.bin \
	 /usr/share/qemu/kvmvapic.bin /usr/share/qemu/pvh.bin /usr/share/qemu/multiboot_dma.bin \
	 /usr/share/seabios/vgabios-stdvga.bin /usr/lib/ipxe/qemu/efi-e1000.rom; do
	[ -f "$f" ] && fw+=(--file "$f:$f")
done
# libvirt for selftests/l2/43-libvirt.sh, when installed here (make deps): the
# monolithic daemon, virsh and the QEMU driver only (about 5.4 MB more in the
# gzipped image); the test writes its config. Without it the test skips.
lvdrv=/usr/lib/x86_64-linux-gnu/libvirt/connection-driver/libvirt_driver_qemu.so
lvirt=()
if [ -x /usr/sbin/libvirtd ] && [ -x /usr/bin/virsh ] && [ -f "$lvdrv" ]; then
	lvirt=(--bin /usr/sbin/libvirtd --bin /usr/bin/virsh --bin "$lvdrv"
	       --file /usr/share/libvirt/cpu_map:/usr/share/libvirt/cpu_map)
fi
# What a real host has and selftests/l2/44-real-host.sh uses: udevd, systemd's
# socket activator and sysusers, setpriv, and kmod (at /usr/bin/kmod only: the
# test links modprobe & co. to it; the other tests keep busybox's).
hostkit=()
hk_bins=(/lib/systemd/systemd-udevd /usr/bin/udevadm /usr/bin/systemd-socket-activate
	 /usr/bin/systemd-sysusers /usr/bin/setpriv /usr/bin/kmod)
if ls "${hk_bins[@]}" >/dev/null 2>&1; then
	for b in "${hk_bins[@]}"; do hostkit+=(--bin "$b"); done
fi
# Network storage for selftests/l2/48-netstore.sh (make deps): iproute2's ip
# (busybox's has no veth), util-linux's unshare and nsenter, the NBD client
# and server, open-iscsi's initiator. Without them the test skips.
netkit=()
nk_bins=()
for b in ip unshare nsenter qemu-nbd nbd-client iscsid iscsiadm; do
	b=$(PATH=/usr/sbin:/usr/bin:/sbin:/bin command -v $b) && nk_bins+=("$b") && netkit+=(--bin "$b")
done
l2key=$(inputs_hash "$l2_mods" "$imgdir/l3.img" "${kos[@]}" "$TOP/selftests" "$TOP/bench" "$vmtools" \
	"$TOP/tools/vhost-blk-bridge/vhost-blk-bridge" "$TOP/selftests/vhost_blk/vhost_blk_test" \
	"$warnko" /usr/sbin/libvirtd "$lvdrv" "${hk_bins[@]}" "${nk_bins[@]}" "$KERNELS_DIR/$rel/.complete" \
	"$TOP/scripts/install-post.sh" "$vbmark")
if [ "$(cat "$imgdir/l2.key" 2>/dev/null)" != "$l2key" ]; then
	echo "vm.sh: building L2 image for $rel" >&2
	bargs=(); for b in "${common_bins[@]}" qemu-system-x86_64 qemu-img qemu-storage-daemon \
		losetup socat tail dmsetup; do bargs+=(--bin "$b"); done
	xtra=(--file "$warnko:/root/harness_warn.ko")
	"$vmtools/mkinitramfs" --kernel "$rel" --root "$kroot" --out "$imgdir/l2.img" --modules "$l2_mods" \
		--ko "${kos[0]}" --ko "${kos[1]}" "${bargs[@]}" "${tool_bins[@]}" "${fw[@]}" "${xtra[@]}" \
		"${lvirt[@]}" "${hostkit[@]}" "${netkit[@]}" --file "$TOP/selftests:/src/selftests" --file "$TOP/bench:/src/bench" \
		--file "$vmtools/vmrun:/usr/bin/vmrun" --file "$vmtools/l3run:/usr/bin/l3run" \
		--file "$TOP/scripts/install-post.sh:/src/scripts/install-post.sh" \
		--file "$kimage:/l3/vmlinuz" --file "$imgdir/l3.img:/l3/initrd.img"
	echo "$l2key" >"$imgdir/l2.key"
fi

img=$vmdir/base.img
if [ ${#files[@]} -gt 0 ] || [ ${#bins[@]} -gt 0 ]; then
	"$vmtools/mkinitramfs" --extras-only --kernel "$rel" --out "$vmdir/extra.img" \
		"${files[@]}" "${bins[@]}"
	cat "$imgdir/l2.img" "$vmdir/extra.img" >"$img"
else
	cp "$imgdir/l2.img" "$img"
fi
flock -u 9

# KVM only when a canary boot proves it works here (cached per host boot).
if [ -z "$accel" ]; then
	probe=$BUILD/kvm-probe.$(cat /proc/sys/kernel/random/boot_id 2>/dev/null || echo x)
	if [ ! -f "$probe" ]; then
		accel=tcg
		if [ -w /dev/kvm ]; then
			echo 'echo canary-ok' >"$BUILD/canary.sh"
			if "$vmtools/vmrun" --quiet --accel kvm --timeout 30 --mem 512M --smp 1 \
				--kernel "$kimage" --initrd "$imgdir/l3.img" \
				--dir "$BUILD/vm/kvm-canary" "$BUILD/canary.sh" 2>/dev/null &&
			   grep -q canary-ok "$BUILD/vm/kvm-canary/output.log"; then
				accel=kvm
			fi
		fi
		echo "$accel" >"$probe"
		echo "vm.sh: using $accel (KVM canary boot $([ "$accel" = kvm ] && echo passed || echo failed or no /dev/kvm))" >&2
	fi
	accel=$(cat "$probe")
fi
if [ $print_accel = 1 ]; then
	echo "$accel"
	exit 0
fi
if [ -n "$plugin" ] && [ "$accel" = tcg ]; then
	qargs+=(-plugin "$plugin")
fi

: >"$vmdir/l3-console.log"
exec "$vmtools/vmrun" --accel "$accel" --timeout "$timeout" --stall "$stall" --mem "$mem" --smp "$smp" \
	${cpuargs[@]+"${cpuargs[@]}"} \
	--kernel "$kimage" --initrd "$img" --dir "$vmdir" \
	"$script" "$@" -- -serial "file:$vmdir/l3-console.log" "${qargs[@]}"
