# shellcheck shell=bash
# SPDX-License-Identifier: GPL-2.0
# Shared helpers of the host-side scripts.
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}

# The Debian 13 rootfs of scripts/rootfs.sh (builds for a kernel whose compiler
# this machine lacks), exported: the private trees builds run in
# (build/k/REL/tree) would otherwise make one of their own.
export ROOTFS_DIR=${ROOTFS_DIR:-$BUILD/rootfs/trixie}

# The test kernels, unpacked by make deps (scripts/deps.sh test), never installed.
KERNELS_DIR=${TEST_KERNELS_DIR:-$BUILD/kernels}

# Test kernels taken at an exact Debian version from a suite this machine does
# not use, through a scratch apt configuration (its sources stay as they are):
# "SERIES SUITE VERSION", the one place such a kernel is pinned. make deps
# unpacks them when asked for (KERNELS="6.1 6.12 7.3"); 6.1 and 6.12, the
# default, follow the cloud meta-packages of bookworm and bookworm-backports.
# The archive keeps only a suite's newest build: when it moves on, deps says
# which version it has and this line changes with it.
PINNED_KERNELS=(
	"7.3 trixie-backports 7.3.4-1~bpo13+1"
)
pinned_kernel() { # SERIES: "SUITE VERSION" of a pinned series, or fail
	local p
	for p in "${PINNED_KERNELS[@]}"; do
		[ "${p%% *}" = "$1" ] && { echo "${p#* }"; return 0; }
	done
	return 1
}

# debian_uri [SUITE]: the URI that serves the plain SUITE (default bookworm, this
# machine's) in the apt sources, deb822 or one-line: the Debian archive, whose
# other suites (bookworm-backports, trixie, trixie-backports) the kit takes from
# the same URI. No mirror host is written in the repository.
debian_uri() {
	local f suite=${1:-bookworm}
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v s="$suite" 'BEGIN{RS=""; IGNORECASE=1}
		     $0 ~ ("(^|\n)Suites:[^\n]*(^| )" s "( |\n|$)") && /(^|\n)Types:[^\n]*deb( |\n|$)/ {
			n = split($0, l, "\n")
			for (i = 1; i <= n; i++) if (l[i] ~ /^URIs:/) {
				sub(/^URIs:[ \t]*/, "", l[i]); split(l[i], u, " "); print u[1]; exit
			}
		     }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk -v s="$suite" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) {
			if ($(i+1) == s) print $i; break } }' "$f"
	done
}

# kernel_rel 6.1|6.12|<release>: the release of the unpacked test kernel of that
# series (or that release).
kernel_rel() {
	local k=$1 r
	if [ -f "$KERNELS_DIR/$k/.complete" ]; then echo "$k"; return 0; fi
	for r in $(ls "$KERNELS_DIR" 2>/dev/null | sort -V -r); do
		case $r in
		"$k".*-cloud-amd64|"$k".*+*-cloud-amd64)
			if [ -f "$KERNELS_DIR/$r/.complete" ]; then
				echo "$r"; return 0
			fi ;;
		esac
	done
	echo "no $k test kernel in $KERNELS_DIR (run: make deps)" >&2
	return 1
}

# Where an unpacked test kernel REL keeps its parts.
kernel_root() { echo "$KERNELS_DIR/$1/root"; }			# lib/modules/REL, boot, usr/src
kernel_kdir() { echo "$KERNELS_DIR/$1/root/usr/src/linux-headers-$1"; }	# KDIR
kernel_image() { # 6.x: boot/vmlinuz-REL; Debian's 7.x packaging: lib/modules/REL/vmlinuz
	local r=$KERNELS_DIR/$1/root
	if [ -f "$r/boot/vmlinuz-$1" ]; then echo "$r/boot/vmlinuz-$1"; else echo "$r/lib/modules/$1/vmlinuz"; fi
}
kernel_srctar() { # REL: its linux-source-X.Y tarball
	local series
	series=$(echo "$1" | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p')
	echo "$KERNELS_DIR/$1/root/usr/src/linux-source-$series.tar.xz"
}

# build_modules REL: both modules (and the harness self-test module) for REL in a
# private copy of the tree under build/k/REL, incrementally. Prints the tree path.
# These are test modules: built with the fault injection the tests use
# (VHOST_BLK_FAULT_INJECTION=y: vhost_blk's debugfs fault_drop_flush).
build_modules() {
	local rel=$1 tree=$BUILD/k/$1/tree kdir
	kdir=$(realpath "$(kernel_kdir "$rel")")	# a rootfs build sees real paths only
	mkdir -p "$tree"
	rsync -a --delete --exclude '*.o' --exclude '*.ko' --exclude '.*.cmd' \
		--exclude '*.mod*' --exclude modules.order --exclude Module.symvers \
		"$TOP/Kbuild" "$TOP/Makefile" "$TOP/include" "$TOP/vhost_blk" \
		"$TOP/virtio_blk_bio" "$TOP/scripts" "$tree/" >/dev/null
	make -s -C "$tree" KDIR="$kdir" CACHE="$BUILD/cache" \
		VHOST_BLK_FAULT_INJECTION=y modules >&2 || return 1
	rsync -a "$TOP/selftests/harness/warn_on/" "$BUILD/k/$rel/warn_on/" &&
		kernel_make "$kdir" -s -C "$kdir" M="$BUILD/k/$rel/warn_on" modules >&2 || return 1
	echo "$tree"
}

# kernel_make KDIR MAKE-ARGS...: make for kernel KDIR, in the Debian 13 rootfs
# (scripts/rootfs.sh) when the compiler its headers name is not on this machine,
# as the top-level Makefile does for the modules.
kernel_make() {
	local kdir=$1 kcc a binds=(); shift
	kcc=$(sed -n 's/^#define LINUX_COMPILER[[:space:]]*"\([^ ]*\).*/\1/p' \
		"$kdir/include/generated/compile.h" 2>/dev/null)
	if [ -z "$kcc" ] || command -v "$kcc" >/dev/null; then
		make "$@"
		return
	fi
	for a in "$@"; do
		case $a in M=*) binds+=(--bind "${a#M=}") ;; esac
	done
	"$TOP/scripts/rootfs.sh" run "${binds[@]}" --bind "$(dirname "$(realpath "$kdir")")" \
		--bind "$(dirname "$(realpath "$kdir/scripts")")" -- make "$@"
}

# A hash of files and directories, to know when a cached image is stale.
inputs_hash() {
	local p
	for p in "$@"; do
		if [ -d "$p" ]; then
			(cd "$p" && find . -type f ! -name '*.o' ! -name '.*' -print0 | LC_ALL=C sort -z |
				xargs -0 -r md5sum)
		elif [ -e "$p" ]; then
			md5sum "$p"
		else
			echo "missing $p"
		fi
	done | md5sum | cut -d' ' -f1
}

# kill_vm NAME [SIGNAL]: kill -9 (or send SIGNAL to) the QEMU of the VM
# scripts/vm.sh runs as --name NAME (matched by its initrd path, as a fixed
# string: kernel releases hold '+').
kill_vm() {
	ps -eo pid=,args= | awk -v s="$BUILD/vm/$1/initrd.img" \
		'$2 ~ /qemu-system/ && index($0, s) { print $1 }' | xargs -r kill -"${2:-9}"
}

# The task names of an L3 guest's QEMU in L2's kernel log: the process, or a
# vCPU thread as libvirt has QEMU name them (-name ...,debug-threads=on).
L3_QEMU_COMM='qemu-system-x86|CPU [0-9]+/KVM'

# nested_kvm_panic CONSOLE: the L2 kernel panicked in the L3 guest's QEMU.
nested_kvm_panic() {
	grep -q 'Kernel panic - not syncing' "$1" 2>/dev/null &&
		grep -Eq "Comm: ($L3_QEMU_COMM)" "$1"
}

# l2_cpu_lost_in_l3 CONSOLE: the quiet form of the nested-KVM wedge. One L2
# vCPU entered an L3 guest and never came back while the other goes on, so
# RCU sees nothing (a CPU in guest mode is quiescent to it) and the heartbeat
# keeps coming. What shows, while l3run's last guest still runs: khugepaged
# (its LRU drain waits on a work item of every CPU) reported blocked, or a
# soft lockup of a task spinning in smp_call_function_many_cond (waiting for
# the lost CPU to answer).
l2_cpu_lost_in_l3() {
	awk '
	/l3run: L3 guest #[0-9]+ starting/ { l3 = 1; sl = 0; next }
	/l3run: L3 guest #[0-9]+ ended/ { l3 = 0; sl = 0; next }
	!l3 { next }
	/INFO: task khugepaged:[0-9]+ blocked for more than/ { lost = 1; exit }
	/soft lockup - CPU#[0-9]+ stuck for/ { sl = NR; next }
	sl && NR - sl <= 8 && /RIP: [0-9a-f]+:smp_call_function_many_cond/ { lost = 1; exit }
	END { exit !lost }' "$1" 2>/dev/null
}

# The binaries and modules of a guest (L3) image, and the image itself:
# make_l3_image REL ROOT OUT KO... [-- MKINITRAMFS_ARGS...]: virtio_blk_bio and
# the other given modules, fio and the filesystem tools, /src/selftests,
# /src/bench and vbmark, from kernel REL's modules under ROOT (an unpacked
# test kernel, or / for the running kernel on a host: make bench there).
VM_COMMON_BINS=(bash fio mke2fs mkfs.ext4 e2fsck fsck.ext4 blkdiscard fstrim fallocate blockdev)
VM_L3_MODS="virtio_pci virtio_blk null_blk ext4 loop"
make_l3_image() {
	local rel=$1 root=$2 out=$3 b args=(); shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do args+=(--ko "$1"); shift; done
	[ "${1:-}" = -- ] && shift
	for b in "${VM_COMMON_BINS[@]}"; do args+=(--bin "$b"); done
	"$TOP/scripts/vm/mkinitramfs" --kernel "$rel" --root "$root" --out "$out" \
		--modules "$VM_L3_MODS" "${args[@]}" \
		--file "$TOP/selftests:/src/selftests" --file "$TOP/bench:/src/bench" \
		--file "$TOP/tools/cost-plugin/vbmark:/usr/bin/vbmark" "$@"
}
