#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# deps.sh build [KDIR] | test: install dependencies from Debian's archive, by purpose.
# Root, Debian 12 (bookworm), idempotent.
#
#   build  (make deps-build) what building and installing the modules and the
#          bridge on this machine needs: the toolchain, dkms, rst2man, and for the
#          running kernel (or KDIR) its headers and the linux-source package of the
#          same version, which holds drivers/vhost/vhost.h.
#   test   (make deps; the README's "make deps && make check|demo") the test kit:
#          the toolchain, QEMU 10.0, libvirt, fio, busybox, ..., and the test
#          kernels (Debian's 6.1 cloud kernel, 6.12 from bookworm-backports and
#          7.3 from trixie-backports, or KERNELS="...":
#          image, headers, kbuild, linux-source), downloaded and UNPACKED into
#          TEST_KERNELS_DIR (default build/kernels), never installed: no package
#          of a kernel, nothing in /boot or /lib/modules, no boot entry. The .deb
#          files stay in TEST_KERNELS_DEBS (default TEST_KERNELS_DIR/debs).
# NO_APT_UPDATE=1 skips apt-get update (selftests/repo/testkit-test.sh).
#
# QEMU 10.0 and the 6.12 kernel come from bookworm-backports, which is added by
# reusing the URI of the bookworm suite already in this machine's apt sources (no
# mirror host is written here).
set -euo pipefail
. "$(dirname "$0")/lib.sh"

what=${1:-}
case $what in build|test|kernel) ;; *) echo "usage: deps.sh build [KDIR] | test | kernel SERIES..." >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "deps: must run as root" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive

bpo_list=/etc/apt/sources.list.d/vhost-blk-backports.sources

have_bpo() {
	grep -rqsE '(^|[[:space:]])bookworm-backports([[:space:]]|$)' \
		/etc/apt/sources.list /etc/apt/sources.list.d/
}

add_bpo() {
	have_bpo && return 0
	local uri
	uri=$(debian_uri | head -n1)
	[ -n "$uri" ] || { echo "deps: no bookworm suite in the apt sources to derive backports from" >&2; exit 1; }
	cat >"$bpo_list" <<SRC
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	echo "deps: added bookworm-backports from the configured bookworm URI"
}

apt_update() {
	local stamp=/var/lib/apt/periodic/vhost-blk-deps-update
	[ "${NO_APT_UPDATE:-0}" = 1 ] && return 0
	if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +360 2>/dev/null)" ] ||
	   { have_bpo && ! apt-cache policy 2>/dev/null | grep -q bookworm-backports; }; then
		apt-get update -q
		mkdir -p "$(dirname "$stamp")"; touch "$stamp"
	fi
}

apt_install() { apt-get install -y -q --no-install-recommends "$@"; }

# The toolchain every build here uses (modules, bridge, man page, DKMS).
toolchain() {
	apt_install build-essential bc kmod xz-utils rsync dkms python3-docutils libseccomp-dev
}

# ---- build: this machine's own kernel -------------------------------------------

deps_build() {
	local kdir=${1:-} rel ver series src
	apt_update
	toolchain
	if [ -n "$kdir" ]; then
		[ -d "$kdir" ] || { echo "deps: KDIR $kdir does not exist" >&2; exit 1; }
		if "$TOP/scripts/find-vhost-src.sh" "$kdir" "" "$BUILD/cache" >/dev/null 2>&1; then
			echo "deps: ok (KDIR $kdir, vhost source found)"
		else
			echo "deps: KDIR $kdir: no vhost source found; the host module needs the kernel's" \
				"source tree (KSRC=) or its linux-source-X.Y package; the guest driver (make guest) does not" >&2
		fi
		return 0
	fi
	rel=$(uname -r)
	if ! apt-cache show "linux-headers-$rel" >/dev/null 2>&1; then
		echo "deps: no linux-headers-$rel in the apt sources: boot a kernel the archive still" \
			"carries (apt-get install linux-image-amd64, reboot), or give KDIR=<build dir>" >&2
		exit 1
	fi
	apt_install "linux-headers-$rel"
	# linux-source of exactly the running kernel's version: vhost.h must match it.
	ver=$(dpkg-query -W -f '${Version}' "linux-image-$rel" 2>/dev/null ||
	      dpkg-query -W -f '${Version}' "linux-headers-$rel")
	series=${rel%%-*}; series=$(echo "$series" | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p')
	src="linux-source-$series=$ver"
	if apt-cache show "$src" >/dev/null 2>&1; then
		apt_install "$src"
	else
		echo "deps: $src is not in the apt sources: build vhost_blk with KSRC=<source tree of" \
			"$rel>; the guest driver alone (make guest) needs no source" >&2
		exit 1
	fi
	echo "deps: ok (kernel $rel: headers, linux-source-$series $ver)"
}

# ---- test: the test kit -----------------------------------------------------------

# apt-get and apt-cache options of the package queries below: none (the
# machine's sources), or a scratch configuration (scratch_apt).
APT_OPTS=()

# scratch_apt SUITE: APT_OPTS query SUITE of the Debian archive (its URI from
# the machine's sources) with sources, lists and caches of their own under
# build/apt/SUITE; the machine's apt configuration and state are not touched.
scratch_apt() {
	local suite=$1 dir=$BUILD/apt/$1 uri
	uri=$(debian_uri | head -n1)
	[ -n "$uri" ] || { echo "deps: no Debian suite in the apt sources to take the archive URI from" >&2; exit 1; }
	mkdir -p "$dir/parts" "$dir/lists/partial"
	echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $suite main" >"$dir/sources.list"
	APT_OPTS=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o "Dir::Etc::sourceparts=$dir/parts"
		  -o "Dir::State::Lists=$dir/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
	if [ "${NO_APT_UPDATE:-0}" != 1 ] || ! ls "$dir/lists/"*Packages >/dev/null 2>&1; then
		apt-get "${APT_OPTS[@]}" update -q >&2
	fi
}

# unpack_pinned SERIES: the cloud kernel of a series pinned in lib.sh
# (PINNED_KERNELS), at that version, unpacked into TEST_KERNELS_DIR/REL/root as
# unpack_kernel does, in Debian's 7.x packaging: linux-image-REL is empty and
# depends on linux-binary-REL (the kernel, lib/modules/REL/vmlinuz) and
# linux-modules-REL; linux-base-REL has the config and System.map; files are
# under usr/lib, no modules.dep is shipped (the postinst runs depmod). Its
# headers name gcc-14: the modules build in the rootfs of scripts/rootfs.sh.
unpack_pinned() {
	local series=$1 suite ver img rel hdr common kbuild base debs root tmp p f l t pkgs
	read -r suite ver < <(pinned_kernel "$series") ||
		{ echo "deps: no pinned $series kernel (PINNED_KERNELS in scripts/lib.sh)" >&2; exit 1; }
	scratch_apt "$suite"
	img=$(show_field "linux-image-cloud-amd64=$ver" '/^Depends:/s/.*\(linux-image-[0-9][^ ,]*\).*/\1/p')
	if [ -z "$img" ]; then
		echo "deps: $series is pinned to $ver (scripts/lib.sh), which $suite no longer has; it has" \
			"$(show_field linux-image-cloud-amd64 's/^Version: //p'): change the pin" >&2
		exit 1
	fi
	rel=${img#linux-image-}
	hdr=linux-headers-$rel
	common=$(show_field "$hdr=$ver" '/^Depends:/s/.*\(linux-headers-[^ ,]*-common\).*/\1/p')
	kbuild=$(show_field "$hdr=$ver" '/^Depends:/s/.*\(linux-kbuild-[^ ,]*\).*/\1/p')
	base=$(show_field "$img=$ver" '/^Depends:/s/.*\(linux-base-[^ ,]*\).*/\1/p')
	[ -n "$common" ] && [ -n "$kbuild" ] && [ -n "$base" ] ||
		{ echo "deps: cannot resolve the packages of $rel $ver in $suite" >&2; exit 1; }
	pkgs=("$img=$ver" "linux-binary-$rel=$ver" "linux-modules-$rel=$ver" "$base=$ver"
	      "$hdr=$ver" "$common=$ver" "$kbuild=$ver" "linux-source-$series=$ver")
	if [ "$(cat "$KERNELS_DIR/$rel/.complete" 2>/dev/null)" = "${pkgs[*]}" ]; then
		echo "deps: test kernel $rel already unpacked in $KERNELS_DIR/$rel"
		APT_OPTS=()
		return 0
	fi
	debs=${TEST_KERNELS_DEBS:-$KERNELS_DIR/debs}
	mkdir -p "$debs"
	tmp=$KERNELS_DIR/.unpack-$rel
	rm -rf "$tmp"; mkdir -p "$tmp"
	for p in "${pkgs[@]}"; do
		f=$(fetch "$p" "$debs")
		echo "deps: unpacking $(basename "$f")"
		dpkg-deb -x "$f" "$tmp"
	done
	APT_OPTS=()
	# Merged /usr: lib/modules/REL is where the harness and depmod look.
	[ -e "$tmp/lib" ] || ln -s usr/lib "$tmp/lib"
	while IFS= read -r l; do
		t=$(readlink "$l")
		case $t in /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$tmp$t")" "$l" ;; esac
	done < <(find "$tmp" -type l)
	# The arch headers' Makefile names its output directory and the common
	# Makefile by absolute path: both become where the Makefile is.
	sed -i -e 's|^KBUILD_OUTPUT *= */usr/src/.*|KBUILD_OUTPUT := $(patsubst %/,%,$(dir $(realpath $(lastword $(MAKEFILE_LIST)))))|' \
		-e "s|^include /usr/src/\(linux-headers-[^/]*\)/Makefile|include \$(dir \$(realpath \$(lastword \$(MAKEFILE_LIST))))../\1/Makefile|" \
		"$tmp/usr/src/linux-headers-$rel/Makefile"
	chmod a+r "$tmp/lib/modules/$rel/vmlinuz"
	depmod -b "$tmp" "$rel"
	rm -rf "$KERNELS_DIR/$rel"
	mkdir -p "$KERNELS_DIR/$rel"
	mv "$tmp" "$KERNELS_DIR/$rel/root"
	echo "${pkgs[*]}" >"$KERNELS_DIR/$rel/.complete"
	echo "deps: test kernel $rel ($ver, $suite) unpacked in $KERNELS_DIR/$rel"
}

# Depends of PKG=VER that are not kernel packages, one name per line (the first of
# each set of alternatives): what the unpacked headers and kbuild need to run.
runtime_deps() {
	local info
	info=$(apt-cache "${APT_OPTS[@]}" show "$1" 2>/dev/null) || true
	sed -n '/^Depends: /{s/^Depends: //p;q}' <<<"$info" |
		tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/:any//; s/[[:space:]]//g' |
		grep -Ev '^$|^linux-(image|headers|kbuild|source|modules|base)' || true
}

# The first line of apt-cache show PKG that sed script S prints (no early exit
# of a pipe under pipefail).
show_field() { # pkg sed-script
	local info
	info=$(apt-cache "${APT_OPTS[@]}" show "$1" 2>/dev/null) || true
	sed -n "$2" <<<"$info" | sed -n 1p
}

# The versioned kernel package a meta-package points at, per series: the bookworm
# suite has 6.1, bookworm-backports 6.12.
versioned() { # meta series
	local info
	info=$(apt-cache "${APT_OPTS[@]}" show "$1" 2>/dev/null) || true
	awk -v s="$2" '
		/^Depends:/ && !found { n = split($0, d, /[ ,]+/)
			for (i = 1; i <= n; i++) if (d[i] ~ "^linux-(image|headers)-" s "[.]") { print d[i]; found = 1; break } }' <<<"$info"
}

# fetch PKG=VER DIR: the .deb into DIR (kept there; taken from apt's own cache when
# it is there), its SHA256 checked against the archive's, printing its path.
fetch() {
	local name=${1%%=*} ver=${1#*=} arch sum file
	arch=$(show_field "$1" 's/^Architecture: //p')
	sum=$(show_field "$1" 's/^SHA256: //p')
	[ -n "$arch" ] && [ -n "$sum" ] || { echo "deps: cannot resolve $1" >&2; return 1; }
	file=$2/${name}_${ver//:/%3a}_$arch.deb
	if [ ! -f "$file" ] || [ "$(sha256sum <"$file" | cut -d' ' -f1)" != "$sum" ]; then
		rm -f "$file"
		if [ -f "/var/cache/apt/archives/${file##*/}" ]; then
			cp "/var/cache/apt/archives/${file##*/}" "$file"
		fi
		if [ ! -f "$file" ] || [ "$(sha256sum <"$file" | cut -d' ' -f1)" != "$sum" ]; then
			rm -f "$file"
			(cd "$2" && apt-get "${APT_OPTS[@]}" download -q "$1" >&2) || return 1
		fi
	fi
	[ "$(sha256sum <"$file" | cut -d' ' -f1)" = "$sum" ] ||
		{ echo "deps: $file does not match the archive's checksum" >&2; return 1; }
	echo "$file"
}

# unpack_kernel SERIES: image, headers, kbuild and linux-source of the series' cloud
# kernel, unpacked into TEST_KERNELS_DIR/REL/root, made usable in place.
unpack_kernel() {
	local series=$1 img hdr rel ver common kbuild debs root tmp p f l t
	img=$(versioned linux-image-cloud-amd64 "$series")
	hdr=$(versioned linux-headers-cloud-amd64 "$series")
	[ -n "$img" ] && [ -n "$hdr" ] || { echo "deps: cannot resolve the $series cloud kernel in the apt sources" >&2; exit 1; }
	rel=${img#linux-image-}
	ver=$(show_field "$img" 's/^Version: //p')
	common=$(show_field "$hdr=$ver" '/^Depends:/s/.*\(linux-headers-[^ ,]*-common\).*/\1/p')
	kbuild=$(show_field "$hdr=$ver" '/^Depends:/s/.*\(linux-kbuild-[^ ,]*\).*/\1/p')
	[ -n "$common" ] && [ -n "$kbuild" ] || { echo "deps: cannot resolve the headers of $rel" >&2; exit 1; }
	root=$KERNELS_DIR/$rel/root
	local pkgs=("$img=$ver" "$hdr=$ver" "$common=$ver" "$kbuild=$ver" "linux-source-$series=$ver")
	# What the headers and kbuild run with (gcc-12, libelf, ...): tools, not kernels.
	# shellcheck disable=SC2046
	apt_install $(for p in "$hdr=$ver" "$kbuild=$ver"; do runtime_deps "$p"; done | sort -u)
	if [ "$(cat "$KERNELS_DIR/$rel/.complete" 2>/dev/null)" = "${pkgs[*]}" ]; then
		echo "deps: test kernel $rel already unpacked in $KERNELS_DIR/$rel"
		return 0
	fi
	debs=${TEST_KERNELS_DEBS:-$KERNELS_DIR/debs}
	mkdir -p "$debs"
	tmp=$KERNELS_DIR/.unpack-$rel
	rm -rf "$tmp"; mkdir -p "$tmp"
	for p in "${pkgs[@]}"; do
		f=$(fetch "$p" "$debs")
		echo "deps: unpacking $(basename "$f")"
		dpkg-deb -x "$f" "$tmp"
	done
	# Absolute links of the packages (lib/modules/REL/build and source) point into
	# this tree instead, relative to where they are.
	while IFS= read -r l; do
		t=$(readlink "$l")
		case $t in /*) ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$tmp$t")" "$l" ;; esac
	done < <(find "$tmp" -type l)
	# The arch headers' Makefile includes the common one by absolute path.
	sed -i "s|^include /usr/src/\(linux-headers-[^/]*\)/Makefile|include \$(dir \$(realpath \$(lastword \$(MAKEFILE_LIST))))../\1/Makefile|" \
		"$tmp/usr/src/linux-headers-$rel/Makefile"
	chmod a+r "$tmp/boot/vmlinuz-$rel"
	depmod -b "$tmp" "$rel"
	rm -rf "$KERNELS_DIR/$rel"
	mkdir -p "$KERNELS_DIR/$rel"
	mv "$tmp" "$root"
	echo "${pkgs[*]}" >"$KERNELS_DIR/$rel/.complete"
	echo "deps: test kernel $rel unpacked in $KERNELS_DIR/$rel"
}

deps_test() {
	add_bpo
	apt_update
	toolchain
	# Tools for the VM harness and the tests (systemd's socket activator and
	# udevd go into the L2 image for 44-real-host).
	apt_install bc cpio zstd gzip busybox-static fio sparse gnuplot-nox e2fsprogs \
		util-linux perl python3 python3-ply python3-git socat jq strace procps file git systemd udev dmsetup
	# Network storage for selftests/l2/48-netstore.sh (vm.sh carries them into
	# the L2 image): iproute2's ip (veth, namespaces), the NBD client and
	# open-iscsi's initiator; the servers are qemu-nbd and the kernel's LIO.
	apt_install iproute2 nbd-client open-iscsi
	# QEMU 10.0 (bookworm's 7.2 TCG crashes the 6.12 kernel about one boot in four).
	apt_install -t bookworm-backports qemu-system-x86 qemu-utils qemu-block-extra ipxe-qemu seabios
	# qemu-storage-daemon lives in qemu-system-common on bookworm-backports.
	apt_install -t bookworm-backports qemu-system-common
	# libvirt for selftests/l2/43-libvirt.sh (carried into the L2 image by vm.sh):
	# the monolithic libvirtd, the QEMU driver and virsh, from bookworm-backports
	# (11.3, of the same suite as QEMU 10.0; bookworm's 9.0 predates that QEMU).
	# Each package is named with its suite rather than "-t bookworm-backports",
	# which would also take systemd from backports (libvirt-daemon-driver-qemu
	# wants systemd-container, of which bookworm's matches the installed systemd).
	# The tests run libvirtd in the L2 VM only, never on this machine (where, with
	# systemd, Debian's packages enable the libvirtd and virtlogd sockets).
	local lv=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-common libvirt0
		  libvirt-daemon-common libvirt-daemon-log)
	apt_install "${lv[@]/%//bookworm-backports}"
	# make bench counts instructions and VM exits with a TCG plugin built
	# against the plugin API header of this QEMU (from its source package;
	# glib's headers for its types): the header goes into build/cache.
	apt_install libglib2.0-dev pkg-config
	"$TOP/scripts/qemu-plugin-api.sh" "$BUILD/cache" >/dev/null

	# The test kernels, unpacked into the build tree.
	mkdir -p "$KERNELS_DIR"
	local series
	for series in ${KERNELS:-6.1 6.12 7.3}; do
		if pinned_kernel "$series" >/dev/null; then
			unpack_pinned "$series"
		else
			unpack_kernel "$series"
		fi
	done
	echo "deps: ok"
}

# kernel SERIES...: only these test kernels (no package installed here).
deps_kernel() {
	local series
	mkdir -p "$KERNELS_DIR"
	for series in "$@"; do
		if pinned_kernel "$series" >/dev/null; then
			unpack_pinned "$series"
		else
			unpack_kernel "$series"
		fi
	done
}

case $what in
build) deps_build "${2:-}" ;;
kernel) shift; deps_kernel "$@" ;;
*) deps_test ;;
esac
