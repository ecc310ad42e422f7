#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# docs-test.sh: the reference says what the code has, and the code has what
# the reference says, both ways, no VM:
#  - make targets: every target `make help` lists is a rule of the Makefile,
#    every phony or plain-named rule of the Makefile is in `make help`;
#  - bridge options: the long-options table of tools/vhost-blk-bridge/main.c,
#    its short options, --help and the OPTIONS of vhost-blk-bridge(8) name the
#    same options (and the same short letter for each);
#  - vhost-user: the protocol features the bridge offers and the requests it
#    serves are those vhost-blk-bridge.rst lists, and every request it knows
#    is listed as supported or refused;
#  - module parameters: every module_param* of vhost_blk/*.c and
#    virtio_blk_bio/*.c is described in its module's document, and every
#    parameter the documents name (modinfo lines, /sys/module/.../parameters/,
#    "module.param", "modprobe module param=") exists;
#  - vhost_blk's ioctls and tracepoints are described, and every VHOST_BLK_*
#    name the documents use exists;
#  - sysfs and debugfs: every file vhost_blk creates in debugfs, every line
#    of its stats file and every attribute virtio_blk_bio adds to a disk is
#    described, and every such file the documents name exists.
# DOCS_TOP=DIR checks a copy of the tree (the failure proof uses one).
# Prints TAP-style lines for scripts/check.sh; exits 1 when one failed.
set -u
top=${DOCS_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$top" || exit 1
failed=0
ok() { echo "ok - docs: $*"; }
nok() { echo "not ok - docs: $*"; failed=1; }
check() { # description list-of-offenders
	local off
	off=$(echo $2)
	if [ -z "$off" ]; then ok "$1"; else nok "$1 (not: $off)"; fi
}
# words of $1 that are not words of $2
words() { tr -s ' \t\n' '\n' <<<"$1" | sed '/^$/d' | sort -u; }
missing() { comm -23 <(words "$1") <(words "$2"); }
# section BODY of an rst file: the lines under the heading TITLE up to the next heading
section() { # file title
	awk -v t="$2" '
		/^(=+|-+|~+|\^+)$/ && length($0) >= 3 { if (prev == t) on = 1; else if (on) { exit } }
		{ if (on && held != "") print held; held = on ? $0 : ""; prev = $0 }
		END { if (on) print held }' "$1"
}

# ---- make targets
help=$(make -s --no-print-directory help 2>/dev/null)
listed=$(sed -n 's/^  \([a-z][a-z0-9_-]*\)\( .*\)\?$/\1/p' <<<"$help" | sort -u)
# every word of a target line that names a target: "(uninstall-guest: ...)" lists one too
helpwords=$(sed -n '/^Targets:/,/^Variables:/p' <<<"$help" | grep -oE '[a-z][a-z0-9_-]*' | sort -u)
phony=$(sed -n '/^\.PHONY:/{:a;/\\$/{N;ba};p}' Makefile | sed 's/^\.PHONY://; s/\\$//; s/\\\n/ /g' | tr -s ' \t\n' '\n' | sed '/^$/d')
rules=$(sed -n 's/^\([a-z][a-z0-9_ -]*\):\([^=].*\)\?$/\1/p' Makefile | tr ' ' '\n' | sed '/^$/d')
targets=$(printf '%s\n%s\n' "$phony" "$rules" | sort -u)
check "every target make help lists is a Makefile rule" "$(missing "$listed" "$targets")"
check "every Makefile target is in make help" "$(missing "$(grep -vx help <<<"$targets")" "$helpwords")"

# ---- bridge options
main=tools/vhost-blk-bridge/main.c
man=Documentation/vhost-blk-bridge.8.rst
table=$(sed -n '/struct option long_opts\[\]/,/^};/p' $main | sed -n 's/^[[:space:]]*{ "\([a-z][a-z0-9-]*\)",.*/\1/p' | sort -u)
# short letter of each long option whose table entry returns a character
shortmap=$(sed -n '/struct option long_opts\[\]/,/^};/p' $main |
	sed -n "s/^[[:space:]]*{ \"\([a-z][a-z0-9-]*\)\",.*, '\(.\)' },.*/-\2,--\1/p" | sort -u)
optstring=$(sed -n 's/.*getopt_long(argc, argv, "\([^"]*\)".*/\1/p' $main)
shorts=$(tr -d ':' <<<"$optstring" | grep -o . | sed 's/^/-/' | sort -u)
manopts=$(section $man OPTIONS | sed -n 's/^\*\*\(-[a-zA-Z], \)\?--\([a-z][a-z0-9-]*\)\*\*.*/\2/p' | sort -u)
manshort=$(section $man OPTIONS | sed -n 's/^\*\*\(-[a-zA-Z]\), --\([a-z][a-z0-9-]*\)\*\*.*/\1,--\2/p' | sort -u)
check "bridge: the table's $(wc -w <<<"$table") long options are in vhost-blk-bridge(8)" "$(missing "$table" "$manopts")"
check "bridge: every option of vhost-blk-bridge(8) is in the table" "$(missing "$manopts" "$table")"
check "bridge: getopt's short options are the table's (\"$optstring\")" \
	"$(missing "$shorts" "$(cut -d, -f1 <<<"$shortmap")") $(missing "$(cut -d, -f1 <<<"$shortmap")" "$shorts")"
check "bridge: vhost-blk-bridge(8) gives each option its short letter" \
	"$(missing "$shortmap" "$manshort") $(missing "$manshort" "$shortmap")"
bridge=tools/vhost-blk-bridge/vhost-blk-bridge
if make -s --no-print-directory "$bridge" >/dev/null 2>&1 && [ -x "$bridge" ]; then
	helpopts=$("$bridge" --help | grep -oE -- '(^|[ ,])--[a-z][a-z0-9-]+' | sed 's/.*--//' | sort -u)
	check "bridge: --help names exactly the table's options" \
		"$(missing "$table" "$helpopts") $(missing "$helpopts" "$table")"
else
	echo "ok - docs: bridge: --help names exactly the table's options # SKIP the bridge does not build here (make deps-build)"
fi

# vhost-user: the protocol features the bridge offers and the requests it
# serves, against vhost-blk-bridge.rst's "Features", "Supported messages" and
# "Refused messages"; every request it knows is in one of the two lists.
vu=tools/vhost-blk-bridge/vhost_user.c
brst=Documentation/vhost-blk-bridge.rst
pf=$(sed -n '/^#define VU_PROTOCOL_FEATURES/,/))$/p' $vu | grep -oE 'VU_PF_[A-Z_]+' | sed 's/^VU_PF_//' | sort -u)
pfdoc=$(section $brst Features | sed -n 's/^``\([A-Z_]*\)`` (bit [0-9]*)$/\1/p' | sort -u)
check "bridge: the $(wc -w <<<"$pf") protocol features offered are those vhost-blk-bridge.rst lists" \
	"$(missing "$pf" "$pfdoc") $(missing "$pfdoc" "$pf")"
served=$(sed -n '/^static int dispatch(/,/^}/p' $vu | sed -n 's/^[[:space:]]*case VU_\([A-Z_]*\):.*/\1/p' | sort -u)
known=$(sed -n '/req_names\[VU_REQ_MAX\] = {/,/^};/p' $vu | sed -n 's/.*\[VU_\([A-Z_]*\)\] = ".*/\1/p' | sort -u)
supdoc=$(section $brst "Supported messages" | grep -E '^``[A-Z]' | grep -oE '``[A-Z_]+``' | tr -d '`' | sort -u)
refdoc=$(section $brst "Refused messages" | sed -n '1,/^$/p;/^Requests/,/^$/p' | grep -oE '``[A-Z_]+``' | tr -d '`' | sort -u)
check "bridge: every request served is in Supported messages, and every one there is served" \
	"$(missing "$served" "$supdoc") $(missing "$supdoc" "$served")"
check "bridge: no request in Refused messages is served" "$(comm -12 <(words "$refdoc") <(words "$served"))"
check "bridge: every request the bridge knows ($(wc -w <<<"$known")) is in Supported or Refused messages" \
	"$(missing "$known" "$supdoc $refdoc")"

# ---- module parameters: the module's directory, its document, its name
params() { # dir: the parameters module_param* declares there
	cat "$1"/*.c | tr -d '\n' | grep -oE 'module_param(_named|_cb|_array|_string)?\([[:space:]]*[a-z_][a-z0-9_]*' |
		sed 's/.*(\s*//; s/[[:space:]]//g' | sort -u
}
for m in "vhost_blk Documentation/vhost-blk.rst" "virtio_blk_bio Documentation/virtio-blk-bio.rst"; do
	set -- $m
	mod=$1 doc=$2
	code=$(params "$mod")
	body=$(section "$doc" "Module parameters")
	described=$(grep -oE '``[a-z_][a-z0-9_]*``' <<<"$body" | tr -d '`' | sort -u)
	check "$mod: its $(wc -w <<<"$code") parameters are described in $doc's Module parameters" \
		"$(missing "$code" "$described")"
	# the parameters the documents name, wherever they are
	named=$( {
		grep -ohE "/sys/module/$mod/parameters/[a-z_][a-z0-9_]*" Documentation/*.rst README.md | sed 's|.*/||'
		grep -ohE "(^|[^a-z_/])$mod\.[a-z_][a-z0-9_]*=" Documentation/*.rst README.md | sed "s/.*$mod\.//; s/=//"
		grep -ohE "modprobe $mod( [a-z_][a-z0-9_]*=[^ ]*)+" Documentation/*.rst README.md | tr ' ' '\n' | sed -n 's/=.*//p'
		section "$doc" "Module parameters" | sed -n 's/^ *parm: *\([a-z_][a-z0-9_]*\):.*/\1/p'
		section "$doc" "Module parameters" | sed -n 's/^``\([a-z_][a-z0-9_]*\)`` (\(bool\|uint\|int\|charp\|ulong\).*/\1/p'
	} | sort -u)
	check "$mod: every parameter the documents name exists" "$(missing "$named" "$code")"
done

# ---- debugfs (vhost_blk)
vdoc=Documentation/vhost-blk.rst
dfiles=$(cat vhost_blk/*.c | tr -d '\n' | grep -oE 'debugfs_create_(file|bool|u8|u16|u32|u64|x32|x64|atomic_t|size_t|ulong)\([[:space:]]*"[^"]*"' |
	sed 's/.*"\(.*\)"/\1/' | sort -u)
ddoc=$(grep -ohE '/sys/kernel/debug/vhost-blk/[^ `,;)]*' Documentation/*.rst README.md | sed 's|/$||; s|.*/||' | sort -u)
dfault=$(grep -oE '``fault_[a-z_]+``' $vdoc | tr -d '`' | sort -u)
check "vhost_blk: every debugfs file is described in $vdoc" "$(missing "$dfiles" "$ddoc $dfault")"
# (a per-device directory is named by a number: <id> in the reference)
check "vhost_blk: every debugfs file the documents name exists" \
	"$(missing "$(printf '%s\n' $ddoc $dfault | grep -Ev '^(<id>|[0-9]+)$')" "$dfiles")"
# the stats file's lines: the literal keys, and <type>_reqs/_bytes, queue<N>_reqs
keys=$(sed -n 's/.*seq_printf(m, "\([a-z_<>%]*\) %.*/\1/p' vhost_blk/stats.c |
	sed 's/^%s_/<type>_/; s/^queue%d_/queue<N>_/' | sort -u)
sdoc=$(section $vdoc "Statistics in debugfs" | grep -oE '^``[a-z_<>N]+``(, ``[a-z_<>N]+``)*$' | grep -oE '[a-z_<>N]+' | sort -u)
check "vhost_blk: every line of <id>/stats is described" "$(missing "$keys" "$sdoc")"
check "vhost_blk: every stats line described is printed" "$(missing "$sdoc" "$keys")"

# ---- the uapi and the tracepoints (vhost_blk)
ioctls=$(sed -n 's/^#define \(VHOST_BLK_[A-Z0-9_]*\)[[:space:]]*_IO.*/\1/p' include/uapi/linux/vhost_blk.h | sort -u)
check "vhost_blk: its $(wc -w <<<"$ioctls") ioctls are described in $vdoc" \
	"$(for n in $ioctls; do grep -qw "$n" $vdoc || echo "$n"; done)"
check "every VHOST_BLK_* name the documents use is in the code" \
	"$(for n in $(grep -ohE 'VHOST_BLK_[A-Z0-9_]+' Documentation/*.rst README.md | sort -u); do
		grep -rqw "$n" include vhost_blk tools selftests/vhost_blk Makefile Kbuild || echo "$n"; done)"
events=$(sed -n 's/^TRACE_EVENT(\([a-z_]*\),.*/\1/p' vhost_blk/trace.h | sort -u)
edoc=$(section $vdoc Tracepoints | grep -oE '``vhost_blk:[a-z_]+``' | sed 's/``vhost_blk://; s/``//' | sort -u)
check "vhost_blk: its $(wc -w <<<"$events") tracepoints are those $vdoc describes" \
	"$(missing "$events" "$edoc") $(missing "$edoc" "$events")"

# ---- sysfs (virtio_blk_bio's disk attributes)
gdoc=Documentation/virtio-blk-bio.rst
attrs=$(grep -ohE 'DEVICE_ATTR(_RO|_RW|_WO)?\([a-z_][a-z0-9_]*' virtio_blk_bio/*.c | sed 's/.*(//' | sort -u)
adoc=$(section $gdoc sysfs | sed -n 's/^``\([a-z_][a-z0-9_]*\)`` (0[0-7]*.*/\1/p' | sort -u)
check "virtio_blk_bio: every disk attribute is described in $gdoc's sysfs" "$(missing "$attrs" "$adoc")"
# A /sys/block/vdX/NAME the documents name is the driver's or the block
# layer's own (genhd's attributes and directories).
block="size ro stat inflight removable range ext_range capability alignment_offset discard_alignment
	hidden diskseq events events_async events_poll_msecs badblocks partscan integrity queue mq
	device power holders slaves trace subsystem uevent dev bdi"
named=$(grep -ohE '/sys/block/vd[a-zX*]+/[a-z_]+' Documentation/*.rst README.md | sed 's|.*/||' | sort -u)
check "virtio_blk_bio: every disk attribute the documents name exists" "$(missing "$(printf '%s\n' $adoc $named)" "$attrs $block")"

exit $failed
