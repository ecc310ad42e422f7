#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# qemu-plugin-api.sh [CACHE]: print the directory holding qemu-plugin.h, the TCG
# plugin API header of the QEMU installed here (qemu-system-x86), fetching it
# first if the cache (default build/cache) does not have it yet.
#
# Debian ships no such header, but the orig tarball of its QEMU source package
# has it. The tarball is fetched for the exact installed version, from the
# archive and suite that the installed package came from (read off
# `apt-cache policy`, so no host name is written here), with a private apt
# state: the machine's own apt sources and lists are not changed. Only the one
# header is kept; nothing of QEMU is part of this project.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
cache=${1:-$TOP/build/cache}

die() { echo "qemu-plugin-api: $*" >&2; exit 1; }

ver=$(dpkg-query -W -f '${Version}' qemu-system-x86 2>/dev/null) ||
	die "qemu-system-x86 is not installed (make deps)"
up=${ver#*:}; up=${up%%-*}; up=${up%%+*}
dir=$cache/qemu-plugin-api/$up
if [ -f "$dir/qemu-plugin.h" ]; then
	echo "$dir"
	exit 0
fi

# "*** VERSION PRIO" then "PRIO URI SUITE/COMPONENT ARCH Packages" lines.
read -r uri suite comp < <(apt-cache policy qemu-system-x86 | awk -v v="$ver" '
	$1 == "***" && $2 == v { f = 1; next }
	f && $2 ~ /^[a-z]+:\/\// { split($3, s, "/"); print $2, s[1], s[2]; exit }
	f && $1 ~ /^[0-9]+$/ && $2 !~ /^\// { f = 0 }') ||
	die "cannot tell which archive QEMU $ver came from (apt-cache policy qemu-system-x86)"
[ -n "${uri:-}" ] || die "no archive URI for the installed QEMU $ver in apt-cache policy"

work=$(mktemp -d "${TMPDIR:-/tmp}/qemu-plugin-api.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/sources.list.d"
printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: %s\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
	"$uri" "$suite" "${comp:-main}" >"$work/sources.list.d/qemu-src.sources"
: >"$work/sources.list"
apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=$work/sources.list.d"
     -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache="
     -o "Debug::NoLocking=1")
apt-get "${apt[@]}" -q update >"$work/update.log" 2>&1 ||
	die "apt-get update of the $suite source index failed: $(tail -n 2 "$work/update.log" | tr '\n' ' ')"
line=$(apt-get "${apt[@]}" source --print-uris "qemu=$ver" 2>/dev/null | grep "\.orig\.tar\." | head -n 1)
[ -n "$line" ] || die "the $suite source index has no orig tarball of qemu $ver"
read -r url file _size hash <<<"$line"
url=${url//\'/}
(cd "$work" && /usr/lib/apt/apt-helper download-file "$url" "$file" "$hash" >"$work/dl.log" 2>&1) ||
	die "downloading $file failed: $(tail -n 2 "$work/dl.log" | tr '\n' ' ')"
tar -C "$work" -xf "$work/$file" --wildcards --no-anchored 'include/qemu/qemu-plugin.h' ||
	die "$file has no include/qemu/qemu-plugin.h"
mkdir -p "$dir"
h=$(find "$work" -path '*/include/qemu/qemu-plugin.h' | head -n 1)
cp "$h" "$dir/qemu-plugin.h.tmp" && mv "$dir/qemu-plugin.h.tmp" "$dir/qemu-plugin.h"
echo "qemu-plugin-api: qemu-plugin.h of QEMU $ver (from $file) in $dir" >&2
echo "$dir"
