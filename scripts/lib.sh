# shellcheck shell=bash
# Shared helpers of the host-side scripts.
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-$TOP/build}

# kernel_rel 6.1|6.12|<release>: the installed cloud kernel release of that series.
kernel_rel() {
	local k=$1 r
	if [ -d "/lib/modules/$k/build" ]; then echo "$k"; return 0; fi
	for r in $(ls /lib/modules 2>/dev/null | sort -V -r); do
		case $r in
		"$k".*-cloud-amd64|"$k".*+*-cloud-amd64)
			if [ -d "/lib/modules/$r/build" ] && [ -f "/boot/vmlinuz-$r" ]; then
				echo "$r"; return 0
			fi ;;
		esac
	done
	echo "no installed $k cloud kernel with headers (run: make deps)" >&2
	return 1
}

# build_modules REL: both modules (and the harness self-test module) for REL in a
# private copy of the tree under build/k/REL, incrementally. Prints the tree path.
# These are test modules: built with the fault injection the tests use
# (VHOST_BLK_FAULT_INJECTION=y: vhost_blk's debugfs fault_drop_flush).
build_modules() {
	local rel=$1 tree=$BUILD/k/$1/tree
	mkdir -p "$tree"
	rsync -a --delete --exclude '*.o' --exclude '*.ko' --exclude '.*.cmd' \
		--exclude '*.mod*' --exclude modules.order --exclude Module.symvers \
		"$TOP/Kbuild" "$TOP/Makefile" "$TOP/include" "$TOP/vhost_blk" \
		"$TOP/virtio_blk_bio" "$TOP/scripts" "$tree/" >/dev/null
	make -s -C "$tree" KDIR="/lib/modules/$rel/build" CACHE="$BUILD/cache" \
		VHOST_BLK_FAULT_INJECTION=y modules >&2 || return 1
	rsync -a "$TOP/selftests/harness/warn_on/" "$BUILD/k/$rel/warn_on/" &&
		make -s -C "/lib/modules/$rel/build" M="$BUILD/k/$rel/warn_on" modules >&2 || return 1
	echo "$tree"
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

# nested_kvm_panic CONSOLE: the L2 kernel panicked in the L3 guest's QEMU.
nested_kvm_panic() {
	grep -q 'Kernel panic - not syncing' "$1" 2>/dev/null &&
		grep -q 'Comm: qemu-system-x86' "$1"
}
