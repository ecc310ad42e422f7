#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rootfs.sh [path] | run [--bind DIR]... -- COMMAND...
#
# A Debian 13 (trixie) rootfs with the compiler of kernels this machine cannot
# build for (7.x: gcc-14; bookworm's gcc-12 does not know its flags), made once
# with mmdebstrap into ROOTFS_DIR (default build/rootfs/trixie) from the
# archive URI of this machine's own apt sources (no mirror host is written
# here; the machine's sources and packages stay as they are).
#
#   path   make it if needed, print its directory
#   run    run COMMAND in it, as root, in a private mount namespace with each
#          DIR bind-mounted at its own path (and /dev, /proc): the Makefile
#          builds a kernel's modules this way when its compiler is missing
#          here (the compiler the kernel's headers name, compile.h).
# Root. Installs mmdebstrap with apt-get if it is absent.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

ROOTFS_SUITE=trixie
ROOTFS_PKGS=gcc-14,make,libelf-dev,bc,bison,flex,libssl-dev,kmod,xz-utils,dwarves
ROOTFS_DIR=${ROOTFS_DIR:-$BUILD/rootfs/$ROOTFS_SUITE}

die() { echo "rootfs: $*" >&2; exit 1; }

make_rootfs() {
	local stamp=$ROOTFS_DIR/.vhost-blk-rootfs want uri tmp t0
	want="$ROOTFS_SUITE $ROOTFS_PKGS"
	[ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
	[ "$(id -u)" = 0 ] || die "making the $ROOTFS_SUITE rootfs needs root"
	if ! command -v mmdebstrap >/dev/null; then
		echo "rootfs: installing mmdebstrap" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends mmdebstrap >&2
	fi
	uri=$(debian_uri | head -n1)
	[ -n "$uri" ] || die "no Debian suite in the apt sources to take the archive URI from"
	tmp=$ROOTFS_DIR.tmp
	rm -rf "$tmp"
	mkdir -p "$(dirname "$ROOTFS_DIR")"
	t0=$(date +%s)
	echo "rootfs: making a $ROOTFS_SUITE rootfs in $ROOTFS_DIR ($ROOTFS_PKGS)" >&2
	mmdebstrap --quiet --variant=apt --include="$ROOTFS_PKGS" "$ROOTFS_SUITE" "$tmp" \
		"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri $ROOTFS_SUITE main" >&2 ||
		{ rm -rf "$tmp"; die "mmdebstrap failed"; }
	echo "$want" >"$tmp/.vhost-blk-rootfs"
	rm -rf "$ROOTFS_DIR"
	mv "$tmp" "$ROOTFS_DIR"
	echo "rootfs: made in $(($(date +%s) - t0)) s, $(du -sh "$ROOTFS_DIR" | cut -f1)" >&2
}

# In a private mount namespace: the binds, /dev and /proc, then chroot.
run_in() {
	local binds=() d
	while [ $# -gt 0 ]; do
		case $1 in
		--bind) [ -n "${2:-}" ] && binds+=("$(realpath -m "$2")"); shift 2 ;;
		--) shift; break ;;
		*) break ;;
		esac
	done
	[ $# -gt 0 ] || die "run: no command"
	[ "$(id -u)" = 0 ] || die "building in the $ROOTFS_SUITE rootfs needs root"
	make_rootfs
	for d in "${binds[@]}"; do
		[ -d "$d" ] || die "run: $d is not a directory"
	done
	# shellcheck disable=SC2016
	exec unshare --mount --propagation private -- bash -euc '
		root=$1; shift
		while [ "$1" != -- ]; do
			mkdir -p "$root$1"; mount --bind "$1" "$root$1"; shift
		done
		shift
		mount --rbind /dev "$root/dev"
		mount -t proc proc "$root/proc"
		exec chroot "$root" /bin/sh -c "cd \"\$0\" 2>/dev/null || cd /; exec \"\$@\"" "$PWD" "$@"
	' rootfs "$ROOTFS_DIR" "${binds[@]}" -- "$@"
}

case ${1:-path} in
path) make_rootfs; echo "$ROOTFS_DIR" ;;
run) shift; run_in "$@" ;;
*) echo "usage: rootfs.sh [path] | run [--bind DIR]... -- COMMAND..." >&2; exit 2 ;;
esac
