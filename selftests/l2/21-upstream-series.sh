#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# check: core
# make upstream's series, loaded and exercised in a 7.3 L2: the modules built from
# the 7.3 source with the series applied (scripts/upstream.sh --check, run by
# selftests/repo/upstream-test.sh, leaves them in build/upstream/modules/REL and
# make check passes them as /root/upstream-modules) replace the kernel's vhost and
# vhost_iotlb and the out-of-tree vhost_blk. Each loaded module must be the series'
# own: its GNU build ID the one recorded when it was built (MANIFEST), vhost
# with the series' vhost_vq_wants_signal(), vhost_blk without the out-of-tree
# module's MODULE_VERSION and fault injection. Then 20-vhost-blk-selftest.sh's
# suites run on them (functional, hostile, review, fuzz, load, flood, throttling,
# owner context, owner killed, interrupt moderation; results prefixed "series:")
# and the kernel's modules come back. The stock 7.3 kernel does not export
# bio_iov_iter_get_pages(), which the series' first patch does: a test-only module
# (selftests/upstream/bio_export.c) exports it first.
# UPSTREAM_MODULES=DIR: the modules from DIR instead.
set -u
M=${UPSTREAM_MODULES:-/root/upstream-modules}
[ -d "$M" ] || { echo "no $M: the upstream series' modules come from make check on 7.3 (selftests/repo/upstream-test.sh)"; exit 77; }
want=$(sed -n 's/^release //p' "$M/MANIFEST" 2>/dev/null)
[ "$want" = "$(uname -r)" ] || { echo "the series' modules are built for ${want:-an unknown release}, not $(uname -r)"; exit 77; }
rc=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; rc=1; }
loaded() { grep -q "^$1 " /proc/modules; }
# build_id MODULE: the GNU build ID of the loaded MODULE (the note's last 20 bytes)
build_id() {
	od -An -v -tx1 "/sys/module/$1/notes/.note.gnu.build-id" 2>/dev/null | tr -d ' \n' | tail -c 40
}
# series_module MODULE: loaded, and built from the series (MANIFEST's build ID)
series_module() {
	local want got
	want=$(sed -n "s/^module $1 //p" "$M/MANIFEST")
	got=$(build_id "$1")
	if [ -n "$want" ] && [ "$got" = "$want" ]; then
		ok "$1 is the series' module (build ID $got)"
	else
		nok "$1 is the series' module (build ID ${got:-none}, want ${want:-none})"
	fi
}
unload_all() { # the vhost modules, users first; fails if one stays
	local m
	for m in vhost_blk vhost_net vhost_vsock vhost_scsi vhost_vdpa vhost vhost_iotlb upstream_bio_export; do
		loaded "$m" || continue
		rmmod "$m" || { nok "rmmod $m"; return 1; }
	done
}
grep -q " /sys/kernel/debug " /proc/mounts || mount -t debugfs none /sys/kernel/debug
# A test that stops early leaves none of its modules to the tests after it.
trap unload_all EXIT

unload_all && ok "the kernel's vhost and the out-of-tree vhost_blk unloaded" || exit 1
for m in upstream_bio_export vhost_iotlb vhost; do
	if insmod "$M/$m.ko"; then ok "insmod $m.ko (series)"; else nok "insmod $m.ko (series)"; exit 1; fi
done
series_module vhost_iotlb
series_module vhost
grep -q ' vhost_vq_wants_signal	\[vhost\]' /proc/kallsyms &&
	ok "vhost has the series' vhost_vq_wants_signal()" ||
	nok "vhost has the series' vhost_vq_wants_signal()"
if insmod "$M/vhost_blk.ko"; then
	ok "insmod vhost_blk.ko (series)"
	series_module vhost_blk
	[ ! -e /sys/module/vhost_blk/version ] && [ ! -e /sys/kernel/debug/vhost-blk/fault_drop_flush ] &&
		ok "vhost_blk has no MODULE_VERSION and no fault injection (the out-of-tree test module has both)" ||
		nok "vhost_blk has no MODULE_VERSION and no fault injection (the out-of-tree test module has both)"
	rmmod vhost_blk || nok "rmmod vhost_blk (series)"
else
	nok "insmod vhost_blk.ko (series)"
	exit 1
fi

# The suites of 20-vhost-blk-selftest, on the series' vhost_blk.ko.
t0=$(date +%s)
VBT_KO=$M/vhost_blk.ko /src/selftests/l2/20-vhost-blk-selftest.sh >/tmp/series.out 2>&1
src=$?
sed -E 's/^(not ok|ok) - /\1 - series: /; /^(not ok|ok) - /!s/^/# /' /tmp/series.out
[ $src = 0 ] && ok "series: 20-vhost-blk-selftest's suites pass ($(($(date +%s) - t0)) s)" ||
	nok "series: 20-vhost-blk-selftest's suites pass (exit status $src)"

# The kernel's modules back: the out-of-tree vhost_blk on the kernel's vhost.
trap - EXIT
unload_all && ok "the series' modules unloaded" || exit 1
if modprobe vhost_blk && [ -e /sys/module/vhost_blk/version ] &&
   ! grep -q ' vhost_vq_wants_signal	\[vhost\]' /proc/kallsyms; then
	ok "modprobe vhost_blk loads the out-of-tree module on the kernel's vhost again"
else
	nok "modprobe vhost_blk loads the out-of-tree module on the kernel's vhost again"
fi
rmmod vhost_blk
exit $rc
