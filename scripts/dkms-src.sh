#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# dkms-src.sh host|guest [SRCTREE]: copy what DKMS needs to build the package into
# SRCTREE/NAME-VERSION (SRCTREE: /usr/src) and print that directory.
#   host:  vhost-blk (dkms.conf): both modules; needs the kernel's vhost source
#   guest: virtio-blk-bio (dkms-guest.conf): the guest driver alone, from the
#          kernel headers; the copy holds no vhost_blk/ and no vhost lookup
# Both carry scripts/rootfs.sh: a kernel whose compiler the machine lacks (7.3:
# gcc-14) is built in the Debian 13 rootfs, kept where dkms.conf says.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-} srctree=${2:-/usr/src}
case $kind in
host) conf=dkms.conf files=(Makefile Kbuild include vhost_blk virtio_blk_bio scripts/find-vhost-src.sh
		scripts/rootfs.sh scripts/lib.sh) ;;
guest) conf=dkms-guest.conf files=(Makefile Kbuild include/kcompat.h virtio_blk_bio scripts/rootfs.sh
		scripts/lib.sh) ;;
*) echo "usage: dkms-src.sh host|guest [SRCTREE]" >&2; exit 2 ;;
esac
name=$(sed -n 's/^PACKAGE_NAME="\(.*\)"/\1/p' "$top/$conf")
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$top/$conf")
dest=$srctree/$name-$ver
rm -rf "$dest"
mkdir -p "$dest"
(cd "$top" && git ls-files -co --exclude-standard -- "${files[@]}" 2>/dev/null ||
	find "${files[@]}" -type f ! -name '*.o' ! -name '*.ko' ! -name '.*') |
	(cd "$top" && rsync -a --files-from=- . "$dest/")
cp "$top/$conf" "$dest/dkms.conf"
echo "$dest"
