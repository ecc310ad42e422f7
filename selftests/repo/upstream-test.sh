#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# upstream-test.sh: make upstream's series (scripts/upstream.sh --check):
# generated from this tree against the 7.3 test kernel's source, it applies
# with git am, each patch builds drivers/vhost against the 7.3 headers
# without a warning, checkpatch --strict finds no error or warning; the
# modules of the whole series are left in build/upstream/modules/REL, for
# make check to pass to the 7.3 L2 (selftests/l2/21-upstream-series.sh). Then
# the check must fail: a copy of this tree with a checkpatch error put into
# vhost_blk/ gives a series the check refuses. Host only, no VM; about
# 70 s here (the first run commits the 7.3 source once: 90 s more).
# SKIPs when the 7.3 test kernel is not unpacked (make deps KERNELS="6.1
# 6.12 7.3"; CI's default make deps has 6.1 and 6.12 only). Prints
# TAP-style lines for scripts/check.sh.
set -u
TOP=$(cd "$(dirname "$0")/../.." && pwd)
. "$TOP/scripts/lib.sh"
ok() { echo "ok - upstream: $*"; }
nok() { echo "not ok - upstream: $*"; }

if ! rel=$(kernel_rel 7.3 2>/dev/null) || [ ! -f "$(kernel_srctar "$rel")" ]; then
	echo "ok - upstream series # SKIP no 7.3 test kernel with its linux-source-7.3 in $KERNELS_DIR (make deps KERNELS=\"6.1 6.12 7.3\")"
	exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/upstream-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)

# The series of this tree, checked (its TAP lines are the results).
"$TOP/scripts/upstream.sh" -o "$work/series" --check 2>"$work/gen.log"
rc=$?
if [ $rc = 2 ]; then
	echo "ok - upstream series # SKIP $(tail -n 1 "$work/gen.log")"
	exit 0
fi
[ $rc = 0 ] || { nok "the series check passes (exit status $rc)"; sed 's/^/#   /' "$work/gen.log" | tail -n 20; }
echo "# upstream: the series and its check took $(($(date +%s) - t0)) s"

# A copy of the tree, committed (upstream.sh takes its author and date from
# git), with trailing whitespace on a line of vhost_blk/stats.c: the check
# must fail, and say it was checkpatch on the driver's patch.
t1=$(date +%s)
src=$work/src
mkdir -p "$src"
rsync -a --exclude /build --exclude /.git "$TOP/" "$src/"
ln -s "$TOP/build" "$src/build"
sed -i '0,/^static struct dentry \*vhost_blk_debugfs_root;$/s//& /' "$src/vhost_blk/stats.c"
grep -q 'vhost_blk_debugfs_root; $' "$src/vhost_blk/stats.c" || nok "the fixture has its checkpatch error"
(
	cd "$src" && git init -q && git add -A &&
	GIT_AUTHOR_NAME=fixture GIT_AUTHOR_EMAIL=fixture@invalid GIT_COMMITTER_NAME=fixture \
	GIT_COMMITTER_EMAIL=fixture@invalid git -c core.hooksPath=/dev/null commit -q -m fixture &&
	git config user.name "$(git -C "$TOP" config user.name)" &&
	git config user.email "$(git -C "$TOP" config user.email)"
) || nok "the fixture is committed"
"$src/scripts/upstream.sh" -o "$work/bad" --check --no-build >"$work/bad.tap" 2>"$work/bad.log"
rc=$?
if [ $rc = 1 ] && grep -q '^not ok - upstream: .*-vhost-add-vhost-blk-.*checkpatch' "$work/bad.tap" &&
   grep -q 'trailing whitespace' "$work/bad.tap"; then
	ok "a checkpatch error in vhost_blk/ fails the series check ($(grep -c '^not ok' "$work/bad.tap") not ok, $(($(date +%s) - t1)) s)"
else
	nok "a checkpatch error in vhost_blk/ fails the series check (exit status $rc, want 1)"
	sed 's/^/#   /' "$work/bad.tap" "$work/bad.log" | tail -n 20
fi
