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
# unpacks them with the others (KERNELS="6.1 6.12 7.3", the default); 6.1 and
# 6.12 follow the cloud meta-packages of bookworm and bookworm-backports.
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
# string: kernel releases hold '+'). A QEMU of another Debian release runs
# under that release's dynamic loader (make flake-rate --l1-qemu).
kill_vm() {
	ps -eo pid=,args= | awk -v s="$BUILD/vm/$1/initrd.img" \
		'($2 ~ /qemu-system/ || ($2 ~ /\/ld-linux[^ ]*$/ && $0 ~ /qemu-system/)) &&
		 index($0, s) { print $1 }' | xargs -r kill -"${2:-9}"
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

# l2_watch NAME VPID WEDGED: watch the L2 VM NAME (scripts/vm.sh --name NAME,
# running in the background as VPID) until it ends. An L2 wedged in nested KVM
# is stopped at once and the file WEDGED says why: its console shows a soft
# lockup in an L3 guest's QEMU (a CPU stuck in L3, the other waiting on it), or
# a vCPU lost in L3 (l2_cpu_lost_in_l3, or run-tests.sh's "@@CPULOST N SECS@@"
# on ttyS2: a CPU ran no task), or its heartbeat (run-tests.sh, every 30 s on
# ttyS2 = l3-console.log) stopped for 300 s with not one new kernel line
# either (L1's QEMU livelocked). Used by make check and make flake-rate.
l2_watch() {
	local con=$BUILD/vm/$1/console.log hb=$BUILD/vm/$1/l3-console.log now lost
	rm -f "$3"
	while kill -0 "$2" 2>/dev/null; do
		if grep -Eq "soft lockup - CPU#[0-9]+ stuck for [0-9]+s! \\[($L3_QEMU_COMM)" "$con" 2>/dev/null; then
			echo "L2 wedged in nested KVM (soft lockup in qemu-system-x86) and was stopped" >"$3"
			kill_vm "$1"
			break
		fi
		if l2_cpu_lost_in_l3 "$con"; then
			echo "L2 wedged in nested KVM (a vCPU never came back from the L3 guest: khugepaged blocked, or a cross-CPU call spinning) and was stopped" >"$3"
			kill_vm "$1"
			break
		fi
		lost=$(sed -n 's/^@@CPULOST \([0-9]*\) \([0-9]*\)@@.*/CPU \1 ran no task for \2 s/p' "$hb" 2>/dev/null | head -n 1)
		if [ -n "$lost" ]; then
			echo "L2 wedged in nested KVM (its $lost while an L3 guest's QEMU ran) and was stopped" >"$3"
			kill_vm "$1"
			break
		fi
		now=$(date +%s)
		if grep -q '^@@ALIVE ' "$hb" 2>/dev/null &&
		   [ $((now - $(stat -c %Y "$hb"))) -ge 300 ] && [ $((now - $(stat -c %Y "$con"))) -ge 300 ]; then
			echo "L2 froze in nested KVM (no heartbeat, no kernel line for 300 s) and was stopped" >"$3"
			kill_vm "$1"
			break
		fi
		sleep 5
	done
}

# silent_l2_reset NAME RC LOG: the L2 run NAME ended with no status (vmrun's
# 125), vmrun found no bad line in its kernel log (LOG: vm.sh's output), and
# an L3 guest was running (l3run's last marker in that log is a start): L2
# itself reset in nested KVM.
silent_l2_reset() {
	[ "$2" = 125 ] || return 1
	grep -q '^vmrun: kernel log reports a problem' "$3" && return 1
	grep -o 'l3run: L3 guest #[0-9]* [a-z]*' "$BUILD/vm/$1/console.log" |
		tail -n 1 | grep -q 'starting$'
}

# l2_death NAME RC LOG WEDGED: why the L2 run NAME (vm.sh status RC, output
# LOG, l2_watch's file WEDGED) ended in nested KVM, if it did; fails if not.
l2_death() {
	if nested_kvm_panic "$BUILD/vm/$1/console.log"; then
		echo "the L2 kernel panicked inside nested KVM (qemu-system-x86)"
	elif [ -e "$4" ]; then
		cat "$4"
	elif silent_l2_reset "$1" "$2" "$3"; then
		echo "L2 reset itself with no kernel message while an L3 guest ran"
	else
		return 1
	fi
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
