#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# install-test.sh REL [KEEP]: make install into a staging root for kernel REL (an
# unpacked test kernel) puts both modules under updates/ with a modules.dep that
# names them, the bridge in PREFIX/bin, its man page, the systemd units (with the
# bridge's path), the udev rule and the sysusers file; make uninstall removes them
# again. make install-guest, from a copy of the tree with no vhost_blk/ and no
# vhost source lookup, installs virtio_blk_bio alone. With KEEP, the staged host
# install is left in that directory (make check hands it to 44-real-host).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rel=$1 keep=${2:-}
kd=$(kernel_kdir "$rel")
stage=$(mktemp -d "${TMPDIR:-/tmp}/install-test.XXXXXX")
tree=$(mktemp -d "${TMPDIR:-/tmp}/install-tree.XXXXXX")
trap 'rm -rf "$stage" "$tree"' EXIT
fail() { echo "install-test: $*" >&2; exit 1; }

(cd "$TOP" && git ls-files -co --exclude-standard | rsync -a --files-from=- . "$tree/")
make -s -C "$tree" KDIR="$kd" CACHE="$BUILD/cache" DESTDIR="$stage" PREFIX=/usr/local install
dep=$stage/lib/modules/$rel/modules.dep
for m in vhost_blk virtio_blk_bio; do
	ls "$stage/lib/modules/$rel/updates/$m/$m.ko"* >/dev/null || fail "$m not installed"
	grep -q "^updates/$m/$m.ko" "$dep" || fail "$m not in modules.dep"
done
p=$stage/usr/local
[ -x "$p/bin/vhost-blk-bridge" ] || fail "no bridge in PREFIX/bin"
man -l "$p/share/man/man8/vhost-blk-bridge.8" 2>/dev/null | grep -q 'WHAT A CONNECTION GRANTS' ||
	fail "man page missing or not readable by man"
grep -qx 'ExecStart=/usr/local/bin/vhost-blk-bridge --user vhost-blk --backend ${BACKEND} $BRIDGE_OPTIONS' \
	"$p/lib/systemd/system/vhost-blk-bridge@.service" || fail "service unit without the bridge's path"
grep -qx 'ListenStream=/run/vhost-blk/%i.sock' "$p/lib/systemd/system/vhost-blk-bridge@.socket" ||
	fail "no socket unit"
grep -q '^KERNEL=="vhost-blk", GROUP="kvm", MODE="0660"' "$p/lib/udev/rules.d/60-vhost-blk.rules" ||
	fail "no udev rule"
grep -q '^m vhost-blk kvm' "$p/lib/sysusers.d/vhost-blk-bridge.conf" || fail "no sysusers file"
if command -v systemd-analyze >/dev/null; then
	# The units as systemd reads them (syntax, the ExecStart binary).
	mkdir -p "$stage/etc/vhost-blk-bridge"
	printf 'BACKEND=/dev/null\nBRIDGE_OPTIONS=--queues 1\n' >"$stage/etc/vhost-blk-bridge/vb0.conf"
	# ExecReload's kill is the system's, which a staging root lacks.
	mkdir -p "$stage/bin" && cp /bin/kill "$stage/bin/kill"
	# (A staging root has no sysinit.target and such: those lines are not ours.)
	out=$(cd "$p/lib/systemd/system" && SYSTEMD_LOG_LEVEL=warning systemd-analyze verify \
		--man=no --root="$stage" vhost-blk-bridge@vb0.socket vhost-blk-bridge@vb0.service 2>&1) || true
	bad=$(grep -Ev '^$|Unit [a-z-]+\.target not found' <<<"$out" || true)
	[ -z "$bad" ] || fail "systemd-analyze verify: $bad"
	rm -rf "$stage/etc/vhost-blk-bridge" "$stage/bin"
fi
# A production build has no fault injection (the tests build with VHOST_BLK_FAULT_INJECTION=y).
ko=$(ls "$stage/lib/modules/$rel/updates/vhost_blk/vhost_blk.ko"*)
case $ko in
*.xz) unpack="xz -dc" ;;
*.zst) unpack="zstd -qdc" ;;
*.gz) unpack="gzip -dc" ;;
*) unpack=cat ;;
esac
# (no grep -q: under pipefail its early exit would fail the pipe)
if $unpack "$ko" | grep -a fault_drop_flush >/dev/null; then
	fail "the installed vhost_blk.ko has the fault_drop_flush knob"
fi
echo "install-test: make install staged: $(cd "$stage" && find . -type f ! -name 'modules.*' | sort | tr '\n' ' ')"
if [ -n "$keep" ]; then
	rm -rf "$keep"
	cp -a "$stage" "$keep"
	chmod 755 "$keep"
fi

make -s -C "$tree" KDIR="$kd" CACHE="$BUILD/cache" DESTDIR="$stage" PREFIX=/usr/local uninstall
left=$(cd "$stage" && find . -type f ! -name 'modules.*')
[ -z "$left" ] || fail "uninstall left files behind: $left"

# The guest driver alone, from a tree that has nothing of the host module.
gsrc=$("$TOP/scripts/dkms-src.sh" guest "$tree/guest")
[ ! -e "$gsrc/vhost_blk" ] && [ ! -e "$gsrc/scripts/find-vhost-src.sh" ] || fail "guest tree has host parts"
rm -rf "$stage"; mkdir -p "$stage"
make -s -C "$gsrc" KDIR="$kd" DESTDIR="$stage" install-guest
ls "$stage/lib/modules/$rel/updates/virtio_blk_bio/virtio_blk_bio.ko"* >/dev/null ||
	fail "install-guest: virtio_blk_bio not installed"
[ ! -e "$stage/lib/modules/$rel/updates/vhost_blk" ] || fail "install-guest installed vhost_blk"
make -s -C "$gsrc" KDIR="$kd" DESTDIR="$stage" uninstall-guest
[ -z "$(cd "$stage" && find . -name '*.ko*')" ] || fail "uninstall-guest left the module"
echo "install-test: ok"
