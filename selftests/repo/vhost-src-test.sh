#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# vhost-src-test.sh: scripts/find-vhost-src.sh takes drivers/vhost/vhost.h only
# from the kernel's own version. On fixtures (fake headers, small linux-source
# tarballs with their changelog.Debian.gz, KSRC trees), no VM: the matching
# version is taken; another Debian revision, another stable release (the
# 6.12.118 source for a 6.12.95 kernel), a tarball or a kernel whose version
# cannot be told, and a KSRC of another version are refused, the message naming
# the package version to install. Then the unpacked test kernels (make deps),
# each with its own tarball. Prints TAP-style lines for scripts/check.sh.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/lib.sh"
find=$top/scripts/find-vhost-src.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/vhost-src-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
ok() { echo "ok - vhost source: $*"; }
nok() { echo "not ok - vhost source: $*"; }

# kernel NAME REL DEBVER: fake headers of a Debian kernel (DEBVER empty: not
# Debian's) at $work/NAME/usr/src/linux-headers-REL
kernel() {
	local k=$work/$1/usr/src/linux-headers-$2
	mkdir -p "$k/include/generated" "$k/include/config"
	echo "$2" >"$k/include/config/kernel.release"
	echo "#define UTS_RELEASE \"$2\"" >"$k/include/generated/utsrelease.h"
	if [ -n "$3" ]; then
		echo "#define LINUX_PACKAGE_ID \" Debian $3\"" >"$k/include/generated/package.h"
		echo "#define UTS_VERSION \"#1 SMP PREEMPT_DYNAMIC Debian $3 (2026-07-05)\"" \
			>"$k/include/generated/utsversion.h"
	else
		echo '#define UTS_VERSION "#1 SMP PREEMPT_DYNAMIC Mon Jul  6 10:00:00 UTC 2026"' \
			>"$k/include/generated/utsversion.h"
	fi
	echo "$k"
}
# source NAME SERIES DEBVER: linux-source-SERIES.tar.xz next to NAME's headers,
# with the package's changelog (DEBVER empty: none)
source_pkg() {
	local r=$work/$1/usr t=$work/tar.$$
	mkdir -p "$t/linux-source-$2/drivers/vhost" "$r/src"
	echo "/* vhost.h of $3 */" >"$t/linux-source-$2/drivers/vhost/vhost.h"
	tar -C "$t" -cJf "$r/src/linux-source-$2.tar.xz" "linux-source-$2"
	rm -rf "$t"
	if [ -n "$3" ]; then
		mkdir -p "$r/share/doc/linux-source-$2"
		printf 'linux (%s) bookworm-backports; urgency=medium\n\n  * Stable update.\n' "$3" |
			gzip -9n >"$r/share/doc/linux-source-$2/changelog.Debian.gz"
	fi
}
# expect DESC ok|refused KDIR [KSRC] [MESSAGE-PART]
expect() {
	local desc=$1 want=$2 kd=$3 ksrc=${4:-} part=${5:-} got out rc
	out=$("$find" "$kd" "$ksrc" "$work/cache" 2>"$work/err")
	rc=$?
	got=ok; [ $rc = 0 ] || got=refused
	if [ "$got" = ok ] && { [ ! -f "$out/drivers/vhost/vhost.h" ]; }; then
		got="ok but no vhost.h in '$out'"
	fi
	if [ "$got" = "$want" ] && { [ -z "$part" ] || grep -qF -- "$part" "$work/err"; }; then
		ok "$desc: $want"
	else
		nok "$desc: $got, want $want${part:+ with \"$part\" in the message}"
		sed 's/^/#   /' "$work/err"
	fi
}

k=$(kernel same 6.12.95+deb12-cloud-amd64 6.12.95-1~bpo12+1)
source_pkg same 6.12 6.12.95-1~bpo12+1
expect "linux-source-6.12 6.12.95-1~bpo12+1 for kernel 6.12.95-1~bpo12+1" ok "$k"
got=$(cat "$work/cache/linux-source-6.12-6.12.95-1~bpo12+1/.debian-version" 2>/dev/null)
if [ "$got" = 6.12.95-1~bpo12+1 ]; then
	ok "the extraction records its version"
else
	nok "the extraction records its version (got '$got')"
fi
extracted=$work/cache/linux-source-6.12-6.12.95-1~bpo12+1

k=$(kernel rev 6.12.95+deb12-cloud-amd64 6.12.95-1~bpo12+1)
source_pkg rev 6.12 6.12.95-2~bpo12+1
expect "another Debian revision (6.12.95-2~bpo12+1)" refused "$k" "" \
	"install linux-source-6.12=6.12.95-1~bpo12+1"

k=$(kernel stable 6.12.95+deb12-cloud-amd64 6.12.95-1~bpo12+1)
source_pkg stable 6.12 6.12.118-1~bpo12+1
expect "another stable release (6.12.118-1~bpo12+1 for 6.12.95)" refused "$k" "" \
	"install linux-source-6.12=6.12.95-1~bpo12+1"

k=$(kernel deb61 6.1.0-57-cloud-amd64 6.1.192-3)
source_pkg deb61 6.1 6.1.190-1
expect "6.1 ABI name 6.1.0-57, source 6.1.190-1 for 6.1.192-3" refused "$k" "" \
	"install linux-source-6.1=6.1.192-3"
source_pkg deb61 6.1 6.1.192-3
expect "6.1 ABI name 6.1.0-57, source 6.1.192-3 for 6.1.192-3" ok "$k"

k=$(kernel nover 6.12.95+deb12-cloud-amd64 6.12.95-1~bpo12+1)
source_pkg nover 6.12 ""
expect "a tarball whose version cannot be told (no dpkg record, no changelog)" refused "$k" "" \
	"install linux-source-6.12=6.12.95-1~bpo12+1"

k=$(kernel notdeb 6.12.95 "")
source_pkg notdeb 6.12 6.12.95-1~bpo12+1
expect "a kernel that carries no Debian version, with a Debian tarball" refused "$k" "" "KSRC="

k=$(kernel ksrc 7.3.4+deb13-cloud-amd64 7.3.4-1~bpo13+1)
expect "KSRC: an extraction of another version (6.12.95-1~bpo12+1)" refused "$k" "$extracted" \
	"install linux-source-7.3=7.3.4-1~bpo13+1"
k=$(kernel ksrc2 6.12.95+deb12-cloud-amd64 6.12.95-1~bpo12+1)
expect "KSRC: an extraction of the kernel's version" ok "$k" "$extracted"
t=$work/tree
mkdir -p "$t/drivers/vhost"
echo '/* vhost.h */' >"$t/drivers/vhost/vhost.h"
printf 'VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 118\nEXTRAVERSION =\n' >"$t/Makefile"
expect "KSRC: a Linux 6.12.118 tree for 6.12.95" refused "$k" "$t" "6.12.118"
printf 'VERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 95\nEXTRAVERSION =\n' >"$t/Makefile"
expect "KSRC: a Linux 6.12.95 tree for 6.12.95" ok "$k" "$t"
mkdir -p "$t/debian"
printf 'linux (6.12.95-2) unstable; urgency=medium\n' >"$t/debian/changelog"
expect "KSRC: a Debian source tree of 6.12.95-2 for 6.12.95-1~bpo12+1" refused "$k" "$t" "6.12.95-2"

# The unpacked test kernels: each takes its own linux-source (the shared cache).
for d in "$KERNELS_DIR"/*/; do
	rel=$(basename "$d")
	[ -f "$KERNELS_DIR/$rel/.complete" ] || continue
	if out=$("$find" "$(kernel_kdir "$rel")" "" "$BUILD/cache" 2>"$work/err") &&
	   [ -f "$out/drivers/vhost/vhost.h" ]; then
		ok "test kernel $rel: its own linux-source ($(cat "$out/.debian-version"))"
	else
		nok "test kernel $rel: its own linux-source"
		sed 's/^/#   /' "$work/err"
	fi
done
