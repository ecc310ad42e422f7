#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# dkms-test.sh REL OUTDIR: add, build and install both DKMS packages for kernel REL
# (an unpacked test kernel) and copy the installed modules (as DKMS placed them) to
# OUTDIR: vhost-blk (both modules) to OUTDIR, virtio-blk-bio (the guest driver
# alone, from a source tree with nothing of the host module) to OUTDIR/guest.
# The modules are loaded in that kernel's VM by selftests/l2/12-dkms.sh.
#
# DKMS runs on private trees (--dkmstree, --sourcetree, --installtree, its signing
# key and certificate): nothing goes to /var/lib/dkms, /usr/src or /lib/modules.
# The modules are signed as DKMS signs them for Secure Boot, with sign-file from
# the kernel's kbuild and a key DKMS makes in the private tree.
set -euo pipefail
. "$(dirname "$0")/lib.sh"
rel=$1 outdir=$2
kd=$(kernel_kdir "$rel")
root=$(kernel_root "$rel")
work=$(mktemp -d "${TMPDIR:-/tmp}/dkms-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/dkms" "$work/src" "$work/lib/modules/$rel"
export sign_file mok_signing_key=$work/mok.key mok_certificate=$work/mok.pub
sign_file=$(ls "$root"/usr/lib/linux-kbuild-*/scripts/sign-file)
trees=(--dkmstree "$work/dkms" --sourcetree "$work/src" --installtree "$work/lib/modules")

rm -rf "$outdir"; mkdir -p "$outdir/guest"
for kind in host guest; do
	src=$("$TOP/scripts/dkms-src.sh" "$kind" "$work/src")
	[ "$kind" = host ] || [ ! -e "$src/vhost_blk" ] || { echo "dkms-test: guest source has vhost_blk/" >&2; exit 1; }
	name=$(sed -n 's/^PACKAGE_NAME="\(.*\)"/\1/p' "$src/dkms.conf")
	ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$src/dkms.conf")
	mods=(virtio_blk_bio) dest=$outdir/guest
	[ "$kind" = host ] && mods=(vhost_blk virtio_blk_bio) dest=$outdir
	dkms add "${trees[@]}" -m "$name" -v "$ver"
	dkms build "${trees[@]}" -m "$name" -v "$ver" -k "$rel" --kernelsourcedir "$kd"
	dkms install "${trees[@]}" -m "$name" -v "$ver" -k "$rel" --kernelsourcedir "$kd" \
		--no-depmod --force
	dkms status "${trees[@]}" -m "$name" -v "$ver" -k "$rel" | grep -q installed
	for m in "${mods[@]}"; do
		f=$(ls "$work/lib/modules/$rel/updates/dkms/$m.ko"*)
		case $f in
		*.xz) xz -dc "$f" >"$dest/$m.ko" ;;
		*.zst) zstd -qdc "$f" >"$dest/$m.ko" ;;
		*.gz) gzip -dc "$f" >"$dest/$m.ko" ;;
		*) cp "$f" "$dest/$m.ko" ;;
		esac
		vm=$(modinfo -F vermagic "$dest/$m.ko")
		case $vm in "$rel "*) ;; *) echo "dkms-test: $m vermagic '$vm' is not $rel" >&2; exit 1 ;; esac
		signer=$(modinfo -F signer "$dest/$m.ko")
		[ "$signer" = "DKMS module signing key" ] ||
			{ echo "dkms-test: $m is not signed with DKMS's key (signer '$signer')" >&2; exit 1; }
		# modinfo: version of the package, author, description, license, every parameter described.
		[ "$(modinfo -F version "$dest/$m.ko")" = "$ver" ] ||
			{ echo "dkms-test: $m version '$(modinfo -F version "$dest/$m.ko")' is not $ver" >&2; exit 1; }
		for field in author description license; do
			[ -n "$(modinfo -F $field "$dest/$m.ko")" ] ||
				{ echo "dkms-test: $m has no $field" >&2; exit 1; }
		done
		if modinfo -F parm "$dest/$m.ko" | grep -Ev '^[a-z_0-9]+:.*[^ ].* \([a-z]+\)$' | grep -q .; then
			echo "dkms-test: $m has a parameter without a description:" >&2
			modinfo -F parm "$dest/$m.ko" >&2; exit 1
		fi
		echo "dkms-test: $name: $m installed as ${f#"$work"/} ($vm), version $ver, signed by '$signer'"
	done
	dkms remove "${trees[@]}" -m "$name" -v "$ver" --all --no-depmod
	for m in "${mods[@]}"; do
		! ls "$work/lib/modules/$rel/updates/dkms/$m.ko"* >/dev/null 2>&1 ||
			{ echo "dkms-test: dkms remove left $m" >&2; exit 1; }
	done
done
echo "dkms-test: ok"
