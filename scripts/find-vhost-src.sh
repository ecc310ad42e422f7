#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Print a directory D such that D/drivers/vhost/vhost.h belongs to the kernel in KDIR.
# Order: the source tree behind KDIR, KSRC, then the Debian linux-source-X.Y tarball
# of the same series, extracted (drivers/vhost only) into CACHE. The tarball is
# looked for next to the headers KDIR resolves to (/usr/src on an installed system,
# build/kernels/REL/root/usr/src for an unpacked test kernel), then in /usr/src.
#
# Exact versions: vhost.h's structures are not covered by MODVERSIONS, so a vhost.h
# of another release than the kernel's is silent memory corruption. The kernel's
# Debian version comes from its headers (include/generated/package.h, or the
# "Debian X" of UTS_VERSION); the tarball's from dpkg (the package owning it) or
# the package's changelog.Debian.gz next to it (DIR/../share/doc/linux-source-X.Y).
# Debian's linux-source-X.Y has the image's version: anything else is refused,
# naming the version to install. A KSRC is checked too: against the version an
# extraction of ours recorded (.debian-version), a Debian source tree's
# debian/changelog, else its Makefile's upstream version.
# usage: find-vhost-src.sh KDIR [KSRC] [CACHE]
set -eu
kdir=$1 ksrc=${2:-} cache=${3:-$(dirname "$0")/../build/cache}

die() { echo "error: $*" >&2; exit 1; }

for d in "$kdir" "$kdir/source"; do
	[ -f "$d/drivers/vhost/vhost.h" ] && { cd "$d" && pwd -P; exit 0; }
done

rel=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"/\1/p' "$kdir/include/generated/utsrelease.h" 2>/dev/null ||
      true)
[ -n "$rel" ] || rel=$(cat "$kdir/include/config/kernel.release" 2>/dev/null ||
		       make -s -C "$kdir" kernelrelease 2>/dev/null || true)
series=$(echo "$rel" | sed -n 's/^\([0-9]*\.[0-9]*\).*/\1/p')

# The kernel's Debian version (6.12.95-1~bpo12+1), empty when it is not Debian's.
kver=$(sed -n 's/^#define LINUX_PACKAGE_ID " *Debian \([^ "]*\).*/\1/p' \
	"$kdir/include/generated/package.h" 2>/dev/null || true)
[ -n "$kver" ] || kver=$(cat "$kdir/include/generated/utsversion.h" \
	"$kdir/include/generated/compile.h" 2>/dev/null |
	sed -n 's/^#define UTS_VERSION ".* Debian \([0-9][^ "]*\).*/\1/p' | head -n 1)
# Its upstream version: the Debian version's, else the release's leading X.Y[.Z].
if [ -n "$kver" ]; then
	kup=${kver%%-*}
else
	kup=$(echo "$rel" | sed -n 's/^\([0-9]*\.[0-9]*\(\.[0-9]*\)\{0,1\}\).*/\1/p')
fi
upstream_eq() { # A B: same upstream version (6.1 = 6.1.0)
	local a=$1 b=$2
	case $a in *.*.*) ;; *) a=$a.0 ;; esac
	case $b in *.*.*) ;; *) b=$b.0 ;; esac
	[ "$a" = "$b" ]
}
install_hint() {
	if [ -n "$kver" ]; then
		echo "install linux-source-$series=$kver (apt-get install linux-source-$series=$kver; make deps for a test kernel) or set KSRC=<the kernel's own source tree>"
	else
		echo "set KSRC=<the kernel's own source tree>"
	fi
}

if [ -n "$ksrc" ]; then
	[ -f "$ksrc/drivers/vhost/vhost.h" ] || die "KSRC=$ksrc has no drivers/vhost/vhost.h"
	if [ -f "$ksrc/.debian-version" ]; then
		sver=$(cat "$ksrc/.debian-version")
		[ -n "$kver" ] && [ "$sver" = "$kver" ] && ok=1 || ok=0
		[ "$ok" = 1 ] || die "KSRC=$ksrc is Debian's linux-source-$series $sver, kernel '$rel' is ${kver:-not a Debian build}: $(install_hint)"
	elif [ -f "$ksrc/debian/changelog" ]; then
		sver=$(sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p' "$ksrc/debian/changelog")
		[ -n "$kver" ] && [ "$sver" = "$kver" ] && ok=1 || ok=0
		[ "$ok" = 1 ] || die "KSRC=$ksrc is Debian's linux $sver, kernel '$rel' is ${kver:-not a Debian build}: use the source of $rel"
	else
		sup=$(sed -n 's/^VERSION = //p; s/^PATCHLEVEL = //p; s/^SUBLEVEL = //p' "$ksrc/Makefile" 2>/dev/null |
		      head -n 3 | paste -sd.)
		[ -n "$sup" ] && [ -n "$kup" ] && upstream_eq "$sup" "$kup" && ok=1 || ok=0
		[ "$ok" = 1 ] || die "KSRC=$ksrc is Linux ${sup:-of unknown version}, kernel '$rel' is ${kup:-of unknown version}: use the source of $rel"
	fi
	cd "$ksrc" && pwd -P
	exit 0
fi

tarball=
if [ -n "$series" ]; then
	for t in "$(dirname "$(readlink -f "$kdir")")/linux-source-$series.tar.xz" \
		 "/usr/src/linux-source-$series.tar.xz"; do
		[ -f "$t" ] && { tarball=$t; break; }
	done
fi
if [ -z "$tarball" ]; then
	die "drivers/vhost/vhost.h not found for kernel '${rel:-$kdir}': install linux-source-${series:-X.Y}${kver:+=$kver} (make deps-build, or apt-get install linux-source-${series:-X.Y}${kver:+=$kver}) or set KSRC=<kernel source tree>; a guest needs none of this: make guest"
fi
[ -n "$kver" ] ||
	die "kernel '${rel:-$kdir}' carries no Debian version (include/generated/package.h, UTS_VERSION): cannot tell whether $tarball is its source; $(install_hint)"

# The tarball's version: dpkg's record of the package that owns it, else the
# package's changelog next to it (an unpacked test kernel keeps the package tree).
sver=
if pkg=$(dpkg-query -S "$tarball" 2>/dev/null | sed -n '1s/:.*//p') && [ -n "$pkg" ]; then
	sver=$(dpkg-query -W -f '${Version}' "$pkg" 2>/dev/null || true)
fi
if [ -z "$sver" ]; then
	cl=$(dirname "$tarball")/../share/doc/linux-source-$series/changelog.Debian.gz
	[ -f "$cl" ] && sver=$(gzip -dc "$cl" | sed -n '1s/^[^ ]* (\([^)]*\)).*/\1/p')
fi
[ -n "$sver" ] ||
	die "cannot tell which version $tarball is (no dpkg record, no changelog.Debian.gz of linux-source-$series): $(install_hint)"
[ "$sver" = "$kver" ] ||
	die "$tarball is linux-source-$series $sver, kernel '$rel' is Debian $kver; vhost.h must come from the kernel's own version: $(install_hint)"

dest=$cache/linux-source-$series-$kver
if [ ! -f "$dest/drivers/vhost/vhost.h" ] || [ "$tarball" -nt "$dest/.stamp" ] ||
   [ "$(cat "$dest/.from" 2>/dev/null)" != "$tarball" ]; then
	mkdir -p "$cache"
	tmp=$(mktemp -d "$cache/.x.XXXXXX")
	tar -C "$tmp" -xf "$tarball" --wildcards "linux-source-$series/drivers/vhost/*" >&2
	echo "$sver" >"$tmp/linux-source-$series/.debian-version"
	echo "$tarball" >"$tmp/linux-source-$series/.from"
	touch "$tmp/linux-source-$series/.stamp"
	rm -rf "$dest"
	mv "$tmp/linux-source-$series" "$dest" && rmdir "$tmp"
fi
cd "$dest" && pwd -P
