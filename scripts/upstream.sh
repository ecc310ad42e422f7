#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# upstream.sh [-o DIR] [--check] [--no-build] (make upstream O=DIR)
#
# Writes vhost_blk as a git format-patch series against the Linux 7.3 source
# of the unpacked 7.3 test kernel (Debian's linux-source-7.3, make deps
# KERNELS="6.1 6.12 7.3"), generated from the code the out-of-tree module
# builds from: one source, no fork. The tarball is committed once into a
# scratch repository (build/upstream/linux, reused while the tarball is the
# same); the series is built there on a branch and written to DIR (default
# build/upstream/series) with its cover letter.
#
# From vhost_blk/ to drivers/vhost/blk/, mechanically: unifdef (the
# kernel's own, scripts/unifdef.c) drops the fault injection
# (-UVHOST_BLK_FAULT_INJECTION) and resolves the two feature tests no shim
# can carry as 7.3 has them (VHOST_NEW_WORKER, _LINUX_RW_HINT_H); the lines
# that pull in include/kcompat.h, MODULE_VERSION and the placeholder
# MODULE_AUTHOR go; "vhost.h" becomes "../vhost.h". The Makefile takes its
# object list from vhost_blk/Kbuild. The uapi header is copied as it is.
# Commit messages, the Kconfig entry, the MAINTAINERS entry, the
# documentation page and the cover letter are in scripts/upstream/.
# The author and Signed-off-by are git's user.name and user.email here
# (the submitter's); dates are those of the project's HEAD commit, so the
# same source gives the same series.
#
# --check then, printing TAP lines (ok - upstream: ...): the series applies
# with git am to a fresh checkout of the base, each patch in turn builds
# drivers/vhost against the 7.3 headers (make M=drivers/vhost W=1, C=1
# when sparse is in the Debian 13 rootfs, in the rootfs with the kernel's
# gcc-14 when this machine lacks it) with no compiler or sparse warning,
# and checkpatch --strict (from the base) finds no error or warning in any
# patch (CHECKs are counted, not failed). When all of that passed, the
# modules of the whole series (vhost_iotlb, vhost, vhost_blk, with a
# test-only module exporting bio_iov_iter_get_pages()) are left in
# build/upstream/modules/REL for a 7.3 L2 (selftests/l2/21-upstream-series.sh).
# --no-build leaves the builds out. Exit status: 0 all passed, 1 something
# failed, 2 the 7.3 test kernel or its source is not unpacked (the message
# says so), 3 usage.
set -euo pipefail
. "$(dirname "$0")/lib.sh"

SERIES=7.3
out= check=0 build=1
while [ $# -gt 0 ]; do
	case $1 in
	-o) out=$2; shift 2 ;;
	-o*) out=${1#-o}; shift ;;
	--check) check=1; shift ;;
	--no-build) build=0; shift ;;
	*) echo "usage: upstream.sh [-o DIR] [--check] [--no-build]" >&2; exit 3 ;;
	esac
done
out=${out:-$BUILD/upstream/series}
# The scratch repository and the check's checkout live under UPSTREAM_WORK.
work=${UPSTREAM_WORK:-$BUILD/upstream}
up=$TOP/scripts/upstream

die() { echo "upstream: $*" >&2; exit 1; }
say() { echo "upstream: $*" >&2; }

rel=$(kernel_rel "$SERIES" 2>/dev/null) || {
	echo "upstream: no $SERIES test kernel in $KERNELS_DIR (make deps KERNELS=\"6.1 6.12 $SERIES\")" >&2
	exit 2
}
tarball=$(realpath -m "$(kernel_srctar "$rel")")
[ -f "$tarball" ] || {
	echo "upstream: $tarball is missing (the $SERIES test kernel's linux-source-$SERIES: make deps KERNELS=\"6.1 6.12 $SERIES\")" >&2
	exit 2
}
kdir=$(realpath "$(kernel_kdir "$rel")")

# git, quietly, without the user's hooks or configuration getting in.
g() { git -C "$1" -c core.hooksPath=/dev/null -c commit.gpgsign=false "${@:2}"; }

name=$(git -C "$TOP" config user.name) || die "git config user.name is not set (the series' author)"
email=$(git -C "$TOP" config user.email) || die "git config user.email is not set (the series' author)"
date=$(git -C "$TOP" log -1 --format=%cI)
export GIT_AUTHOR_NAME=$name GIT_AUTHOR_EMAIL=$email GIT_COMMITTER_NAME=$name \
	GIT_COMMITTER_EMAIL=$email GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date

# ---- the base: the tarball, committed once ----
repo=$work/linux
from="$tarball $(stat -c '%s %Y' "$tarball")"
if [ "$(cat "$repo/.git/vhost-blk-base" 2>/dev/null)" != "$from" ]; then
	t0=$(date +%s)
	say "committing $tarball as the base in $repo (once)"
	rm -rf "$repo"
	mkdir -p "$repo"
	# (Debian's top-level .gitignore ignores everything: add with -f, here
	# and below; nothing is ever built in this tree.)
	tar -C "$repo" --strip-components=1 -xf "$tarball"
	g "$repo" init -q
	g "$repo" add -A -f
	g "$repo" commit -q -m "Linux $SERIES ($(basename "$tarball") of the $rel test kernel)"
	g "$repo" tag -f base >/dev/null
	echo "$from" >"$repo/.git/vhost-blk-base"
	say "base committed in $(($(date +%s) - t0)) s"
fi
g "$repo" checkout -q -f -B series base
g "$repo" clean -q -fdx

# ---- the kernel's unifdef ----
unifdef=$work/unifdef
if [ ! -x "$unifdef" ] || [ "$repo/scripts/unifdef.c" -nt "$unifdef" ]; then
	${HOSTCC:-cc} -O2 -o "$unifdef" "$repo/scripts/unifdef.c" || die "cannot build scripts/unifdef.c"
fi

# tmpl FILE: a file of scripts/upstream/ without its first line, the SPDX
# line every file of the repository has (vhost-blk.rst keeps its own)
tmpl() { sed -E '1{\%^(#|//) SPDX-License-Identifier: %d}' "$1"; }

commit() { # MSG-FILE: commit everything, signed off
	g "$repo" add -A -f
	tmpl "$1" | g "$repo" commit -q -s -F -
}

# from_source SRC DST: one vhost_blk file as drivers/vhost/blk has it
from_source() {
	local rc=0
	"$unifdef" -UVHOST_BLK_FAULT_INJECTION -DVHOST_NEW_WORKER -D_LINUX_RW_HINT_H \
		-o "$2.tmp" "$1" || rc=$?
	[ $rc -le 1 ] || die "unifdef failed on $1"
	sed -e '/^#define KCOMPAT_VHOST_BLK$/d' \
	    -e '/^#include "kcompat.h"$/d' \
	    -e '/^MODULE_VERSION(/d' \
	    -e '/^MODULE_AUTHOR("The vhost-blk developers");$/d' \
	    -e 's|^#include "vhost.h"$|#include "../vhost.h"|' \
		"$2.tmp" | cat -s >"$2"
	rm -f "$2.tmp"
	! grep -n 'kcompat\|KCOMPAT\|VHOST_BLK_FAULT\|VHOST_SRC' "$2" ||
		die "$1: out-of-tree scaffolding left in $2 (above)"
}

# ---- 1: export what the block layer keeps to itself ----
if ! grep -q '^EXPORT_SYMBOL.*(bio_iov_iter_get_pages)' "$repo/block/bio.c"; then
	sed -i '/^int bio_iov_iter_get_pages(/,/^}/{/^}/a\
EXPORT_SYMBOL_GPL(bio_iov_iter_get_pages);
}' "$repo/block/bio.c"
	grep -q '^EXPORT_SYMBOL_GPL(bio_iov_iter_get_pages);' "$repo/block/bio.c" ||
		die "block/bio.c: bio_iov_iter_get_pages() not found to export"
	commit "$up/01-block-export.msg"
fi

# ---- 2: the notify decision, from the vhost core ----
if ! grep -q '^EXPORT_SYMBOL_GPL(vhost_vq_wants_signal);' "$repo/drivers/vhost/vhost.c"; then
	tmpl "$up/vhost-wants-signal.c" >"$work/wants-signal.c"
	awk -v f="$work/wants-signal.c" '{ print }
		/^EXPORT_SYMBOL_GPL\(vhost_signal\);$/ && !done {
			while ((getline line < f) > 0) print line
			done = 1
		}' "$repo/drivers/vhost/vhost.c" >"$work/vhost.c.new"
	mv "$work/vhost.c.new" "$repo/drivers/vhost/vhost.c"
	sed -i '/^void vhost_signal(struct vhost_dev \*, struct vhost_virtqueue \*);$/a\
bool vhost_vq_wants_signal(struct vhost_virtqueue *vq);' "$repo/drivers/vhost/vhost.h"
	grep -q '^EXPORT_SYMBOL_GPL(vhost_vq_wants_signal);' "$repo/drivers/vhost/vhost.c" &&
		grep -q '^bool vhost_vq_wants_signal(' "$repo/drivers/vhost/vhost.h" ||
		die "drivers/vhost/vhost.[ch]: no place for vhost_vq_wants_signal()"
	commit "$up/02-vhost-wants-signal.msg"
fi

# ---- 3: the uapi, and the MAINTAINERS entry it starts ----
cp "$TOP/include/uapi/linux/vhost_blk.h" "$repo/include/uapi/linux/vhost_blk.h"
# The range, reserved where vhost's numbers are kept (before the final #endif).
awk '{ l[NR] = $0 } END {
	for (i = NR; i > 0 && l[i] !~ /^#endif/; i--) ;
	for (j = 1; j <= NR; j++) {
		if (j == i) {
			print "/* 0x90 to 0x94 are vhost-blk'"'"'s: see <linux/vhost_blk.h>. */"
			print ""
		}
		print l[j]
	}
}' "$repo/include/uapi/linux/vhost.h" >"$work/vhost.h.new"
mv "$work/vhost.h.new" "$repo/include/uapi/linux/vhost.h"
# The entry sorts before VIRTIO HOST (VHOST-SCSI); the driver's F: comes with it.
awk -v f="$up/MAINTAINERS.blk" '
	/^VIRTIO HOST \(VHOST-SCSI\)$/ && !done {
		while ((getline line < f) > 0)
			if (line !~ /^F:\tdrivers\/vhost\/blk\/$/ && line !~ /^# SPDX/) print line
		done = 1
	}
	{ print }' "$repo/MAINTAINERS" >"$work/MAINTAINERS.new"
mv "$work/MAINTAINERS.new" "$repo/MAINTAINERS"
grep -q '^VIRTIO HOST (VHOST-BLK)$' "$repo/MAINTAINERS" || die "MAINTAINERS: no place for the entry"
commit "$up/03-uapi.msg"

# ---- 4: the driver, its Kconfig and Makefile ----
mkdir -p "$repo/drivers/vhost/blk"
objs=$(sed -n 's/^vhost_blk-y[[:space:]]*:=[[:space:]]*//p' "$TOP/vhost_blk/Kbuild")
[ -n "$objs" ] || die "vhost_blk/Kbuild: no vhost_blk-y list"
for f in $objs; do
	from_source "$TOP/vhost_blk/${f%.o}.c" "$repo/drivers/vhost/blk/${f%.o}.c"
done
for f in "$TOP"/vhost_blk/*.h; do
	from_source "$f" "$repo/drivers/vhost/blk/$(basename "$f")"
done
{
	echo "# SPDX-License-Identifier: GPL-2.0"
	echo "obj-\$(CONFIG_VHOST_BLK) += vhost_blk.o"
	echo "vhost_blk-y := $objs"
	echo "# trace.h's TRACE_INCLUDE_PATH is this directory"
	echo "CFLAGS_req.o := -I\$(src)"
} >"$repo/drivers/vhost/blk/Makefile"
awk -v f="$up/Kconfig.blk" '
	/^config VHOST_SCSI$/ && !done {
		while ((getline line < f) > 0) if (line !~ /^# SPDX/) print line
		done = 1
	}
	{ print }' "$repo/drivers/vhost/Kconfig" >"$work/Kconfig.new"
mv "$work/Kconfig.new" "$repo/drivers/vhost/Kconfig"
grep -q '^config VHOST_BLK$' "$repo/drivers/vhost/Kconfig" || die "drivers/vhost/Kconfig: no place for VHOST_BLK"
awk '{ print } /^vhost_scsi-y/ && !done { print ""; print "obj-$(CONFIG_VHOST_BLK) += blk/"; done = 1 }' \
	"$repo/drivers/vhost/Makefile" >"$work/Makefile.new"
mv "$work/Makefile.new" "$repo/drivers/vhost/Makefile"
grep -q '^obj-$(CONFIG_VHOST_BLK) += blk/$' "$repo/drivers/vhost/Makefile" ||
	die "drivers/vhost/Makefile: no place for blk/"
sed -i '/^F:\tinclude\/uapi\/linux\/vhost_blk.h$/i\
F:\tdrivers/vhost/blk/' "$repo/MAINTAINERS"
commit "$up/04-driver.msg"

# ---- 5: the documentation ----
cp "$up/vhost-blk.rst" "$repo/Documentation/virt/vhost-blk.rst"
awk '{ print } /^   guest-halt-polling$/ && !done { print "   vhost-blk"; done = 1 }' \
	"$repo/Documentation/virt/index.rst" >"$work/index.rst.new"
mv "$work/index.rst.new" "$repo/Documentation/virt/index.rst"
grep -q '^   vhost-blk$' "$repo/Documentation/virt/index.rst" || die "Documentation/virt/index.rst: no place for vhost-blk"
sed -i '/^F:\tdrivers\/vhost\/blk\/$/i\
F:\tDocumentation/virt/vhost-blk.rst' "$repo/MAINTAINERS"
commit "$up/05-doc.msg"

# ---- the series ----
# O= may be any directory: only an earlier series in it is removed.
mkdir -p "$out"
rm -f "$out"/[0-9][0-9][0-9][0-9]-*.patch
g "$repo" format-patch -q --cover-letter --no-signature -o "$(realpath "$out")" base..series
cover=$(ls "$out"/0000-cover-letter.patch)
tmpl "$up/cover-letter.txt" >"$work/cover-letter.txt"
subject=$(head -n 1 "$work/cover-letter.txt")
awk -v subj="$subject" -v body="$work/cover-letter.txt" '
	/\*\*\* SUBJECT HERE \*\*\*/ { sub(/\*\*\* SUBJECT HERE \*\*\*/, subj) }
	/^\*\*\* BLURB HERE \*\*\*$/ {
		n = 0
		while ((getline line < body) > 0) if (n++ >= 2) print line
		next
	}
	{ print }' "$cover" >"$cover.new"
mv "$cover.new" "$cover"
say "$(ls "$out" | wc -l) files in $out:"
ls "$out" | sed 's/^/upstream:   /' >&2
[ "$check" = 1 ] || exit 0

# ---- --check ----
fails=0
ok() { echo "ok - upstream: $*"; }
nok() { echo "not ok - upstream: $*"; fails=$((fails + 1)); }
am=$work/am
# The modules of the checked series, for a 7.3 L2 (below); never stale ones.
mods=$work/modules/$rel
[ "$build" = 0 ] || rm -rf "$mods"
# A checkout of the base, reused from run to run (checking 90000 files out
# again costs a minute): back to the base, everything else removed.
if [ "$(realpath -m "$(g "$am" rev-parse --git-common-dir 2>/dev/null)")" = "$(realpath -m "$repo/.git")" ]; then
	g "$am" am --abort >/dev/null 2>&1 || true
	g "$am" checkout -q -f --detach base
	g "$am" clean -q -fdx
else
	rm -rf "$am"
	g "$repo" worktree prune
	g "$repo" worktree add -q --detach "$am" base
fi
# Sparse, where the build runs, if it knows 7.3's C. Debian's headers lack
# the script with which kbuild checks that (scripts/checker-valid.sh), and
# without it C=1 is quietly dropped: the same question is asked here, of
# a __typeof_unqual__, and KBUILD_CHECKSRC=1 keeps C=1 in force. (The
# sparse of Debian 12 and of Debian 13, 0.6.4, cannot parse it.)
printf 'int f(const int *p)\n{\n\t__typeof_unqual__(*p) v = *p;\n\n\treturn v;\n}\n' \
	>"$work/sparse-probe.c"
sparse_ok() { # [COMMAND-PREFIX...]: sparse there knows 7.3's C
	"$@" sparse "$work/sparse-probe.c" >"$work/sparse-probe.log" 2>&1 &&
		! grep -q error "$work/sparse-probe.log"
}
rootfs_sparse=0 host_sparse=0
[ -x "$ROOTFS_DIR/usr/bin/sparse" ] && sparse_ok "$TOP/scripts/rootfs.sh" run --bind "$work" -- &&
	rootfs_sparse=1
command -v sparse >/dev/null && sparse_ok && host_sparse=1
kcc=$(sed -n 's/^#define LINUX_COMPILER[[:space:]]*"\([^ ]*\).*/\1/p' "$kdir/include/generated/compile.h")
# checkpatch's SPDX check runs python3 scripts/spdxcheck.py, which needs
# ply and git: the system's python3 (/usr/bin), which apt's packages serve,
# rather than another one first in PATH.
syspath=/usr/bin:$PATH
PATH=$syspath python3 -c 'import git, ply' 2>/dev/null ||
	echo "# upstream: checkpatch's SPDX check (scripts/spdxcheck.py) needs python3-ply and python3-git (make deps)"
n=0 checks=0
for p in "$out"/0*.patch; do
	case $p in */0000-cover-letter.patch) continue ;; esac
	n=$((n + 1))
	pn=$(basename "$p")
	if ! g "$am" am -q "$p" >"$work/am.log" 2>&1; then
		nok "$pn applies with git am to the base"
		sed 's/^/#   /' "$work/am.log"
		g "$am" am --abort >/dev/null 2>&1 || true
		break
	fi
	ok "$pn applies with git am to the base"
	# checkpatch of the base, in the base tree
	(cd "$am" && PATH=$syspath perl scripts/checkpatch.pl --strict --quiet --showfile "$p") >"$work/cp.log" 2>&1 || true
	if grep -qE '^(ERROR|WARNING):|^[^ ]*: (ERROR|WARNING):' "$work/cp.log"; then
		nok "$pn: checkpatch --strict, no error or warning"
		sed 's/^/#   /' "$work/cp.log" | head -n 40
	else
		c=$(grep -cE '(^|: )CHECK:' "$work/cp.log" || true)
		checks=$((checks + c))
		ok "$pn: checkpatch --strict, no error or warning ($c CHECK)"
		[ "$c" = 0 ] || sed 's/^/#   /' "$work/cp.log" | head -n 20
	fi
	[ "$build" = 1 ] || continue
	# Headers the series adds or changes in include/uapi come first: those
	# of the 7.3 headers package are the base's.
	ovl=$work/uapi-overlay
	rm -rf "$ovl"
	mkdir -p "$ovl"
	g "$am" diff --name-only base HEAD -- include/uapi | while read -r h; do
		mkdir -p "$ovl/$(dirname "${h#include/uapi/}")"
		cp "$am/$h" "$ovl/${h#include/uapi/}"
	done
	# Symbols the series exports from vmlinux, for modpost.
	g "$am" diff base HEAD -- . ':!drivers/vhost' |
		sed -n 's/^+EXPORT_SYMBOL\(_GPL\)\{0,1\}(\([a-z0-9_]*\));$/\2 EXPORT_SYMBOL\1/p' |
		awk '{ printf "0x00000000\t%s\tvmlinux\t%s\t\n", $1, $2 }' >"$work/extra.symvers"
	args=(-C "$kdir" M="$am/drivers/vhost" W=1 CONFIG_VHOST_BLK=m
	      NOSTDINC_FLAGS="-nostdinc -I$ovl" KBUILD_EXTRA_SYMBOLS="$work/extra.symvers" -j2)
	if [ -n "$kcc" ] && ! command -v "$kcc" >/dev/null; then
		[ "$rootfs_sparse" = 0 ] || args+=(C=1 KBUILD_CHECKSRC=1)
		set -- "$TOP/scripts/rootfs.sh" run --bind "$work" --bind "$(dirname "$kdir")" \
			--bind "$(dirname "$(realpath "$kdir/scripts")")" -- make "${args[@]}"
	else
		[ "$host_sparse" = 0 ] || args+=(C=1 KBUILD_CHECKSRC=1)
		set -- make "${args[@]}"
	fi
	t0=$(date +%s)
	: >"$work/warn.log"
	if "$@" >"$work/build.log" 2>&1 && ! grep -E 'warning:|error:|WARNING:' "$work/build.log" >"$work/warn.log" &&
	   { case " ${args[*]} " in *" C=1 "*) grep -q '^ *CHECK ' "$work/build.log" ;; esac; }; then
		ok "$pn builds drivers/vhost against the $rel headers (W=1$(case " ${args[*]} " in *" C=1 "*) echo ", sparse" ;; esac), $(($(date +%s) - t0)) s)"
	else
		nok "$pn builds drivers/vhost against the $rel headers without a warning"
		sed 's/^/#   /' "$work/warn.log" "$work/build.log" | tail -n 30
	fi
done
[ "$n" -gt 0 ] || nok "the series has patches"
case " ${args[*]:-} " in
*" C=1 "*) ;;
*) [ "$build" = 0 ] || echo "ok - upstream: sparse (C=1) # SKIP no sparse where the build runs parses 7.3's C (__typeof_unqual__; Debian's 0.6.4 does not)" ;;
esac
[ -f "$am/drivers/vhost/blk/vhost_blk.ko" ] || [ "$build" = 0 ] || nok "drivers/vhost/blk/vhost_blk.ko was built"
# The modules of the whole series, for selftests/l2/21-upstream-series.sh in
# a 7.3 L2 (make check passes DIR as /root/upstream-modules): vhost_iotlb,
# vhost and vhost_blk as drivers/vhost built them, and a test-only module
# exporting bio_iov_iter_get_pages(), which the stock 7.3 kernel in L2 does
# not (the series' first patch does): selftests/upstream, built with
# include/kcompat.h and the series' vhost.h. Debug info stripped; MANIFEST
# records the release and each module's GNU build ID, by which the L2 test
# knows the loaded module for the series' own. Only from a series whose
# check passed.
if [ "$build" = 1 ] && [ "$fails" = 0 ]; then
	shim=$work/bio-export
	rm -rf "$shim"
	mkdir -p "$shim" "$mods"
	cp "$TOP"/selftests/upstream/* "$TOP/include/kcompat.h" "$am/drivers/vhost/vhost.h" "$shim/"
	t0=$(date +%s)
	if kernel_make "$kdir" -C "$kdir" M="$shim" W=1 modules >"$work/shim.log" 2>&1 &&
	   ! grep -E 'warning:|error:|WARNING:' "$work/shim.log" >"$work/warn.log"; then
		echo "release $rel" >"$mods/MANIFEST"
		for ko in "$am/drivers/vhost/vhost_iotlb.ko" "$am/drivers/vhost/vhost.ko" \
			  "$am/drivers/vhost/blk/vhost_blk.ko" "$shim/upstream_bio_export.ko"; do
			m=$(basename "$ko" .ko)
			strip --strip-debug -o "$mods/$m.ko" "$ko" &&
				id=$(readelf -n "$mods/$m.ko" | sed -n 's/^ *Build ID: *//p') && [ -n "$id" ] &&
				echo "module $m $id" >>"$mods/MANIFEST" || nok "$m.ko copied to $mods with its build ID"
		done
		ok "the series' vhost_iotlb, vhost and vhost_blk modules and the test's bio_iov_iter_get_pages export in $mods ($(($(date +%s) - t0)) s)"
	else
		nok "the test module exporting bio_iov_iter_get_pages (selftests/upstream) builds against the $rel headers without a warning"
		sed 's/^/#   /' "$work/warn.log" "$work/shim.log" | tail -n 30
	fi
	[ "$fails" = 0 ] || rm -rf "$mods"
fi
echo "# upstream: $n patches, $checks checkpatch CHECKs"
[ "$fails" = 0 ]
