#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# unit-test.sh: the shipped systemd units parse, and the bridge's service
# keeps its sandbox: systemd-analyze security --offline rates its exposure
# at 2.0 or below, and the directives that get it there are in place.
# Host only, no VM. Prints TAP-style lines for scripts/check.sh.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
ok() { echo "ok - units: $*"; }
nok() { echo "not ok - units: $*"; }

if ! command -v systemd-analyze >/dev/null ||
   ! systemd-analyze security --help 2>&1 | grep -q -- --offline; then
	echo "ok - units # SKIP no systemd-analyze with security --offline (systemd 252 or later)"
	exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/unit-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
unit=$work/vhost-blk-bridge@disk.service
sed 's|@BINDIR@|/usr/local/bin|' "$TOP/tools/vhost-blk-bridge/dist/vhost-blk-bridge@.service.in" >"$unit"
out=$(systemd-analyze security --offline=true "$unit" 2>&1)
level=$(echo "$out" | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
if [ -n "$level" ] && awk -v l="$level" 'BEGIN { exit !(l <= 2.0) }'; then
	ok "the bridge's service: exposure $level (at most 2.0)"
else
	nok "the bridge's service: exposure ${level:-unknown} (at most 2.0)"
	echo "$out" | grep '✗' | sed 's/^/#   /'
fi
for d in NoNewPrivileges=yes PrivateNetwork=yes DevicePolicy=closed ProtectSystem=full \
	 'SystemCallFilter=~@clock' RestrictAddressFamilies=AF_UNIX; do
	if grep -q "^$d" "$unit"; then ok "  $d"; else nok "  $d"; fi
done
