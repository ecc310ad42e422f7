#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Print a directory D such that D/drivers/vhost/vhost.h belongs to the kernel in KDIR.
# Order: the source tree behind KDIR, KSRC, then the Debian linux-source-X.Y tarball
# of the same series, extracted (drivers/vhost only) into CACHE. The tarball is
# looked for next to the headers KDIR resolves to (/usr/src on an installed system,
# build/kernels/REL/root/usr/src for an unpacked test kernel), then in /usr/src.
# usage: find-vhost-src.sh KDIR [KSRC] [CACHE]
set -eu
kdir=$1 ksrc=${2:-} cache=${3:-$(dirname "$0")/../build/cache}

for d in "$kdir" "$kdir/source" "$ksrc"; do
	[ -n "$d" ] && [ -f "$d/drivers/vhost/vhost.h" ] && { cd "$d" && pwd; exit 0; }
done

rel=$(cat "$kdir/include/config/kernel.release" 2>/dev/null ||
      make -s -C "$kdir" kernelrelease 2>/dev/null || true)
series=$(echo "$rel" | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p')
tarball=
if [ -n "$series" ]; then
	for t in "$(dirname "$(readlink -f "$kdir")")/linux-source-$series.tar.xz" \
		 "/usr/src/linux-source-$series.tar.xz"; do
		[ -f "$t" ] && { tarball=$t; break; }
	done
fi
if [ -z "$tarball" ]; then
	echo "error: drivers/vhost/vhost.h not found for kernel '${rel:-$kdir}': install linux-source-${series:-X.Y} (make deps-build, or apt-get install linux-source-${series:-X.Y}) or set KSRC=<kernel source tree>; a guest needs none of this: make guest" >&2
	exit 1
fi
dest=$cache/linux-source-$series
if [ ! -f "$dest/drivers/vhost/vhost.h" ] || [ "$tarball" -nt "$dest/.stamp" ] ||
   [ "$(cat "$dest/.from" 2>/dev/null)" != "$tarball" ]; then
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.x.XXXXXX")
	tar -C "$tmp" -xf "$tarball" --wildcards "linux-source-$series/drivers/vhost/*" >&2
	rm -rf "$dest"
	mv "$tmp/linux-source-$series" "$dest" && rmdir "$tmp"
	echo "$tarball" >"$dest/.from"
	touch "$dest/.stamp"
fi
cd "$dest" && pwd
