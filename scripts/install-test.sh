#!/bin/bash
# install-test.sh REL: make install into a staging root for kernel REL puts both
# modules under updates/ with a modules.dep that names them, and the bridge in
# PREFIX/bin; make uninstall removes them again.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rel=$1
stage=$(mktemp -d "${TMPDIR:-/tmp}/install-test.XXXXXX")
tree=$(mktemp -d "${TMPDIR:-/tmp}/install-tree.XXXXXX")
trap 'rm -rf "$stage" "$tree"' EXIT
(cd "$TOP" && git ls-files -co --exclude-standard | rsync -a --files-from=- . "$tree/")
kd=/lib/modules/$rel/build
make -s -C "$tree" KDIR="$kd" CACHE="$BUILD/cache" DESTDIR="$stage" PREFIX=/usr install
dep=$stage/lib/modules/$rel/modules.dep
for m in vhost_blk virtio_blk_bio; do
	ls "$stage/lib/modules/$rel/updates/$m/$m.ko"* >/dev/null
	grep -q "^updates/$m/$m.ko" "$dep" || { echo "install-test: $m not in modules.dep" >&2; exit 1; }
done
[ -x "$stage/usr/bin/vhost-blk-bridge" ]
# A production build has no fault injection (the tests build with VHOST_BLK_FAULT_INJECTION=y).
ko=$(ls "$stage/lib/modules/$rel/updates/vhost_blk/vhost_blk.ko"*)
case $ko in
*.xz) unpack="xz -dc" ;;
*.zst) unpack="zstd -qdc" ;;
*.gz) unpack="gzip -dc" ;;
*) unpack=cat ;;
esac
if $unpack "$ko" | grep -a fault_drop_flush >/dev/null; then
	echo "install-test: the installed vhost_blk.ko has the fault_drop_flush knob" >&2; exit 1
fi
make -s -C "$tree" KDIR="$kd" CACHE="$BUILD/cache" DESTDIR="$stage" PREFIX=/usr uninstall
if find "$stage" -name '*.ko*' | grep -q . || [ -e "$stage/usr/bin/vhost-blk-bridge" ]; then
	echo "install-test: uninstall left files behind" >&2; exit 1
fi
echo "install-test: ok"
