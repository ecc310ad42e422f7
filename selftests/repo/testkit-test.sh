#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# testkit-test.sh: the test kit (scripts/deps.sh test, what make deps runs) into a
# fresh TEST_KERNELS_DIR installs no kernel package and changes nothing in /boot,
# /lib/modules or the boot loader's configuration; the unpacked kernels are
# self-contained (every link resolves inside the tree) and the modules build and
# a VM image is assembled from them with /boot, /lib/modules, /usr/src and the
# machine's kbuild hidden. Host only (root, no VM); reuses the .deb files make
# deps fetched (TEST_KERNELS_DEBS) and runs without apt-get update.
# Prints TAP-style lines for scripts/check.sh.
set -u
. "$(dirname "$0")/../../scripts/lib.sh"
ok() { echo "ok - test kit: $*"; }
nok() { echo "not ok - test kit: $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; return 1; fi; }

[ "$(id -u)" = 0 ] || { echo "ok - test kit # SKIP needs root (apt, mount namespace)"; exit 0; }
work=$(mktemp -d "${TMPDIR:-/tmp}/testkit.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The machine's kernel and boot state.
snapshot() {
	dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\n' \
		'linux-image-*' 'linux-headers-*' 'linux-kbuild-*' 'linux-source-*' \
		'linux-modules-*' 2>/dev/null | grep -v '^un' | sort
	find /boot /lib/modules -maxdepth 2 -printf '%p %y %s %T@\n' 2>/dev/null | sort
	for f in /boot/grub/grub.cfg /etc/default/grub /boot/efi/loader/entries/* \
		 /boot/loader/entries/* /etc/kernel/cmdline; do
		[ -f "$f" ] && md5sum "$f"
	done
	command -v efibootmgr >/dev/null && efibootmgr 2>/dev/null
	true
}

# Shims in front of the package and boot tools: log every call, pass package
# tools through, refuse boot tools (a call is a failure in itself).
mkdir -p "$work/shims"
for t in apt-get apt dpkg; do
	real=$(command -v "$t")
	printf '#!/bin/sh\necho "%s $*" >>"%s"\nexec %s "$@"\n' "$t" "$work/calls" "$real" >"$work/shims/$t"
done
for t in update-grub grub-mkconfig grub-install kernel-install update-initramfs efibootmgr bootctl; do
	printf '#!/bin/sh\necho "%s $*" >>"%s"\nexit 1\n' "$t" "$work/calls" >"$work/shims/$t"
done
chmod +x "$work/shims"/*
: >"$work/calls"

snapshot >"$work/before"
kdir=$work/kernels
# The 6.x layout (the 7.3 kernel's, pinned from another suite, is checked by
# make check's own unpacking of it: deps.sh's default list has it too).
PATH=$work/shims:$PATH NO_APT_UPDATE=1 TEST_KERNELS_DIR=$kdir KERNELS="6.1 6.12" \
	TEST_KERNELS_DEBS=${TEST_KERNELS_DEBS:-$KERNELS_DIR/debs} \
	"$TOP/scripts/deps.sh" test >"$work/deps.log" 2>&1
rc=$?
snapshot >"$work/after"
check "scripts/deps.sh test into a fresh TEST_KERNELS_DIR (status $rc)" test $rc = 0 ||
	tail -n 20 "$work/deps.log" | sed 's/^/#   /'
kpkg='linux-(image|headers|kbuild|source|modules)-'
installs=$(grep -E '^(apt-get|apt) .*install' "$work/calls" | tr ' ' '\n' | grep -E "^$kpkg" | tr '\n' ' ' || true)
check "no kernel package installed by apt${installs:+ ($installs)}" test -z "$installs"
check "dpkg installs nothing itself (only dpkg-deb -x)" sh -c "! grep -Eq '^dpkg .*(-i|--install|--unpack)' '$work/calls'"
boot=$(grep -Ev '^(apt-get|apt|dpkg) ' "$work/calls" | tr '\n' ' ' || true)
check "no boot tool run${boot:+ ($boot)}" test -z "$boot"
check "kernel packages, /boot, /lib/modules and boot entries unchanged" \
	cmp -s "$work/before" "$work/after" || diff "$work/before" "$work/after" | head -n 10 | sed 's/^/#   /'

# The unpacked kernels: complete and closed.
TEST_KERNELS_DIR=$kdir
KERNELS_DIR=$kdir
for k in 6.1 6.12; do
	if ! rel=$(kernel_rel "$k" 2>/dev/null); then
		nok "[$k] a test kernel unpacked"
		continue
	fi
	root=$(kernel_root "$rel")
	check "[$k] $rel: image, modules with modules.dep, headers, kbuild, linux-source in the tree" \
		test -f "$(kernel_image "$rel")" -a -f "$root/lib/modules/$rel/modules.dep" \
		-a -f "$(kernel_kdir "$rel")/Makefile" -a -f "$(kernel_srctar "$rel")"
	out=$(find "$kdir/$rel" -type l | while read -r l; do
		t=$(realpath -m "$l"); case $t in "$kdir/$rel"/*) ;; *) echo "$l -> $t" ;; esac
	done)
	check "[$k] every link in the tree resolves inside it${out:+ ($(head -n 3 <<<"$out" | tr '\n' ' '))}" test -z "$out"
done

# Modules and a VM image from the new tree alone: the machine's kernels hidden.
cat >"$work/hidden.sh" <<EOF
set -e
for d in /boot /lib/modules /usr/src /usr/lib/linux-kbuild-*; do
	[ -d "\$d" ] && mount -t tmpfs none "\$d"
done
. "$TOP/scripts/lib.sh"
KERNELS_DIR=$kdir BUILD=$work/build
for k in 6.1 6.12; do
	rel=\$(kernel_rel "\$k")
	tree=\$(build_modules "\$rel")
	"$TOP/scripts/vm/mkinitramfs" --kernel "\$rel" --root "\$(kernel_root "\$rel")" \
		--out "$work/l3-\$k.img" --modules "virtio_pci virtio_blk null_blk" \
		--ko "\$tree/vhost_blk/vhost_blk.ko" --ko "\$tree/virtio_blk_bio/virtio_blk_bio.ko"
	echo "built \$k"
done
EOF
unshare -m bash "$work/hidden.sh" >"$work/hidden.log" 2>&1
rc=$?
check "modules built and VM images assembled with /boot, /lib/modules, /usr/src and the installed kbuild hidden (status $rc)" \
	test $rc = 0 -a -s "$work/l3-6.1.img" -a -s "$work/l3-6.12.img" ||
	tail -n 20 "$work/hidden.log" | sed 's/^/#   /'
