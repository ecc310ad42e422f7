#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# repo-test.sh: the repository's basics and the bridge's build, no VM: an SPDX
# line in every file, COPYING is the GPL-2.0 text, the CHANGELOG has the current
# version, Documentation/index.rst lists every document, the userspace binaries
# carry the hardening flags, vhost-blk-bridge(8) builds and documents every option
# --help prints, and Documentation/vhost-blk-bridge.rst quotes --help as it is.
# Prints TAP-style lines for scripts/check.sh.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top" || exit 1
ok() { echo "ok - repo: $*"; }
nok() { echo "not ok - repo: $*"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; return 1; fi; }

files=$(git ls-files -co --exclude-standard | grep -vx COPYING)
missing=$(for f in $files; do
	[ -f "$f" ] || continue
	head -n 3 "$f" | grep -q 'SPDX-License-Identifier: ' || echo "$f"
done)
check "an SPDX-License-Identifier line in the first lines of every file${missing:+ (missing: $(echo $missing))}" \
	test -z "$missing"
# run-tests.sh runs (or reports as skipped) only the executable ones: a test
# committed without its x bit would silently never run.
noexec=$(git ls-files -s selftests/l2 | awk '$4 ~ /\.sh$/ && $1 != "100755" { print $4 }')
check "every selftests/l2 test is executable in git${noexec:+ (not: $(echo $noexec))}" \
	test -z "$noexec"
if [ -f /usr/share/common-licenses/GPL-2 ]; then
	check "COPYING is the GPL-2.0 text" cmp -s COPYING /usr/share/common-licenses/GPL-2
else
	check "COPYING is the GPL-2.0 text" grep -q 'GNU GENERAL PUBLIC LICENSE' COPYING
fi
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms.conf)
check "CHANGELOG has a section for version $ver (dkms.conf)" grep -q "^## \[\?$ver\]\? " CHANGELOG.md
gver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' dkms-guest.conf)
check "dkms.conf and dkms-guest.conf carry the same version ($ver, $gver)" test "$ver" = "$gver"
unlisted=$(for d in Documentation/*.rst; do
	n=$(basename "$d" .rst)
	[ "$n" = index ] && continue
	grep -Eq "^   $n\$" Documentation/index.rst || echo "$n"
done)
check "Documentation/index.rst's toctree lists every document${unlisted:+ (not: $(echo $unlisted))}" \
	test -z "$unlisted"
absent=$(sed -n 's/^   \([a-z][a-z0-9.-]*\)$/\1/p' Documentation/index.rst | while read -r n; do
	[ -f "Documentation/$n.rst" ] || echo "$n"
done)
check "every document in the toctree exists${absent:+ (not: $(echo $absent))}" test -z "$absent"

make -s tools >/dev/null 2>&1
for b in tools/vhost-blk-bridge/vhost-blk-bridge selftests/vhost_blk/vhost_blk_test; do
	h=$(readelf -h "$b" 2>/dev/null) d=$(readelf -d "$b" 2>/dev/null) l=$(readelf -lW "$b" 2>/dev/null)
	s=$(nm -D "$b" 2>/dev/null)
	why=
	grep -q 'Type:.*DYN' <<<"$h" || why+=" not-PIE"
	grep -q 'BIND_NOW' <<<"$d" || why+=" no-BIND_NOW"
	grep -q 'GNU_RELRO' <<<"$l" || why+=" no-RELRO"
	grep -E 'GNU_STACK' <<<"$l" | grep -q 'RWE' && why+=" exec-stack"
	grep -q '__stack_chk_fail' <<<"$s" || why+=" no-stack-protector"
	grep -Eq '__[a-z]+_chk@' <<<"$s" || why+=" no-fortify"
	check "$(basename "$b"): PIE, full RELRO, BIND_NOW, stack protector, fortify, no executable stack${why:+ (missing:$why)}" \
		test -z "$why"
done

bridge=tools/vhost-blk-bridge/vhost-blk-bridge
if command -v rst2man >/dev/null; then
	check "vhost-blk-bridge(8) builds with rst2man without a warning" \
		sh -c 'rm -f build/man/vhost-blk-bridge.8 && make -s man 2>&1 | grep -q . && exit 1; man -l build/man/vhost-blk-bridge.8 >/dev/null 2>&1'
else
	echo "ok - repo: vhost-blk-bridge(8) builds # SKIP no rst2man (python3-docutils; make deps)"
fi
opts=$("$bridge" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u)
nodoc=$(for o in $opts; do
	grep -q -- "\*\*$o\*\*\|\*\*-[a-zA-Z], $o\*\*" Documentation/vhost-blk-bridge.8.rst || echo "$o"
done)
check "every option of --help is in vhost-blk-bridge(8)${nodoc:+ (not: $(echo $nodoc))}" test -z "$nodoc"
# The reference quotes --help between "``vhost-blk-bridge --help`` prints::" and
# the next paragraph, indented by four spaces.
quoted=$(awk '/^``vhost-blk-bridge --help`` prints::/ { on = 1; next }
	      on && /^[^ ]/ { exit } on { sub(/^    /, ""); print }' Documentation/vhost-blk-bridge.rst |
	sed -e '/./,$!d' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}')
check "Documentation/vhost-blk-bridge.rst quotes --help as the bridge prints it" \
	test "$quoted" = "$("$bridge" --help)" ||
	diff <(echo "$quoted") <("$bridge" --help) | head -n 10 | sed 's/^/#   /'

# An L3 guest that stops running (the nested flake, testing.rst) is told from
# a failure by vmrun's report at the guest's own limit (l3run -t), which the
# test prints when l3run returns; a limit that does not end well before the
# runner kills the test (TEST_TIMEOUT) turns the flake into "killed after
# 900s" with nothing to read. Tests of make check (not "check: slow") keep
# every l3run limit at least 200 s under it.
tt=$(sed -n 's/^TEST_TIMEOUT=\${TEST_TIMEOUT:-\([0-9]*\)}$/\1/p' selftests/lib/run-tests.sh)
long=$(for t in selftests/l2/*.sh; do
	grep -q '^# check: slow -- ' "$t" && continue
	grep -oE '(^|[^#]*[ 	])l3run -t [0-9]+' "$t" | grep -oE '[0-9]+$' | while read -r s; do
		[ "$s" -le $((${tt:-0} - 200)) ] || echo "$(basename "$t" .sh):$s"
	done
done)
check "every l3run limit of make check's L2 tests ends 200 s before the runner's ${tt:-?} s${long:+ (not: $(echo $long))}" \
	test -n "$tt" -a -z "$long"
