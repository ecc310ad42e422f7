#!/bin/bash
# dkms-test.sh REL OUTDIR: add, build and install the package with DKMS for kernel
# REL, copy the installed modules (as DKMS placed them) to OUTDIR, then remove the
# package again. The modules are loaded in that kernel's VM by selftests/l2/12-dkms.sh.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rel=$1 outdir=$2
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$TOP/dkms.conf")
name=vhost-blk
src=/usr/src/$name-$ver

cleanup() { dkms remove -m "$name" -v "$ver" --all >/dev/null 2>&1 || true; rm -rf "$src"; }
trap cleanup EXIT
cleanup
mkdir -p "$src"
(cd "$TOP" && git ls-files -co --exclude-standard -- dkms.conf Makefile Kbuild include \
	vhost_blk virtio_blk_bio scripts/find-vhost-src.sh | rsync -a --files-from=- . "$src/")
dkms add -m "$name" -v "$ver"
dkms build -m "$name" -v "$ver" -k "$rel"
dkms install -m "$name" -v "$ver" -k "$rel" --force
dkms status -m "$name" -v "$ver" -k "$rel" | grep -q installed
rm -rf "$outdir"; mkdir -p "$outdir"
for m in vhost_blk virtio_blk_bio; do
	f=$(modinfo -k "$rel" -n "$m")
	case $f in */updates/dkms/*) ;; *) echo "dkms-test: $m resolves to $f, not the DKMS copy" >&2; exit 1 ;; esac
	case $f in
	*.xz) xz -dc "$f" >"$outdir/$m.ko" ;;
	*.zst) zstd -qdc "$f" >"$outdir/$m.ko" ;;
	*.gz) gzip -dc "$f" >"$outdir/$m.ko" ;;
	*) cp "$f" "$outdir/$m.ko" ;;
	esac
	vm=$(modinfo -F vermagic "$outdir/$m.ko")
	case $vm in "$rel "*) ;; *) echo "dkms-test: $m vermagic '$vm' is not $rel" >&2; exit 1 ;; esac
	# modinfo: version of the package, author, description, license, every parameter described.
	[ "$(modinfo -F version "$outdir/$m.ko")" = "$ver" ] ||
		{ echo "dkms-test: $m version '$(modinfo -F version "$outdir/$m.ko")' is not $ver" >&2; exit 1; }
	for field in author description license; do
		[ -n "$(modinfo -F $field "$outdir/$m.ko")" ] ||
			{ echo "dkms-test: $m has no $field" >&2; exit 1; }
	done
	if modinfo -F parm "$outdir/$m.ko" | grep -Ev '^[a-z_0-9]+:.*[^ ].* \([a-z]+\)$' | grep -q .; then
		echo "dkms-test: $m has a parameter without a description:" >&2
		modinfo -F parm "$outdir/$m.ko" >&2; exit 1
	fi
	echo "dkms-test: $m installed as $f ($vm), version $ver"
done
