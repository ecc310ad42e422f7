#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# dkms-test.sh REL OUTDIR: add, build and install both DKMS packages for kernel REL
# (an unpacked test kernel) and copy the installed modules (as DKMS placed them) to
# OUTDIR: vhost-blk (both modules) to OUTDIR, virtio-blk-bio (the guest driver
# alone, from a source tree with nothing of the host module) to OUTDIR/guest.
# The modules are loaded in that kernel's VM by selftests/l2/12-dkms.sh.
# Then what DKMS must refuse: a kernel outside the supported series
# (BUILD_EXCLUSIVE_KERNEL: status 77, the supported kernels named) and a
# linux-source of another version than the kernel's (the build fails naming
# the version to install).
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
	dkms build "${trees[@]}" -m "$name" -v "$ver" -k "$rel" --kernelsourcedir "$kd" ||
		{ cat "$work/dkms/$name/$ver/build/make.log" >&2; exit 1; }
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

# Outside the supported range (BUILD_EXCLUSIVE_KERNEL): DKMS skips the build
# (status 77) and the package says which kernels it supports. Both packages, a
# release no supported series has (6.10 is not 6.1), this kernel's headers.
for kind in host guest; do
	src=$("$TOP/scripts/dkms-src.sh" "$kind" "$work/src")
	name=$(sed -n 's/^PACKAGE_NAME="\(.*\)"/\1/p' "$src/dkms.conf")
	ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$src/dkms.conf")
	dkms add "${trees[@]}" -m "$name" -v "$ver" >/dev/null
	for other in 6.10.0-1-cloud-amd64 7.2.13+deb14-cloud-amd64; do
		rc=0
		dkms build "${trees[@]}" -m "$name" -v "$ver" -k "$other" --kernelsourcedir "$kd" \
			>"$work/excl.log" 2>&1 || rc=$?
		if [ $rc != 77 ] || ! grep -q "kernel $other is not supported.*supports Linux 6.1, 6.12 and 7.3" "$work/excl.log"; then
			echo "dkms-test: $name for $other: status $rc, want 77 and the supported kernels named:" >&2
			cat "$work/excl.log" >&2; exit 1
		fi
		echo "dkms-test: $name for $other refused (77): $(grep -m1 'not supported' "$work/excl.log")"
	done
	dkms remove "${trees[@]}" -m "$name" -v "$ver" --all --no-depmod >/dev/null 2>&1 || true
done

# The vhost source's version (scripts/find-vhost-src.sh) under DKMS: the same
# headers and tarball, the package's record saying another version. The build
# fails, its log naming the version to install.
series=$(echo "$rel" | cut -d. -f1-2)
kver=$(sed -n 's/^#define LINUX_PACKAGE_ID " *Debian \([^ "]*\).*/\1/p' "$kd/include/generated/package.h")
fake=$work/fake/usr/src/linux-headers-$rel
mkdir -p "$fake" "$work/fake/usr/share/doc/linux-source-$series"
for f in "$kd"/* "$kd"/.config "$kd"/.kernelvariables; do ln -s "$(realpath "$f")" "$fake/"; done
ln -s "$(realpath "$(kernel_srctar "$rel")")" "$work/fake/usr/src/"
printf 'linux (%s) unstable; urgency=medium\n' "${kver%%-*}-99" | gzip -9n \
	>"$work/fake/usr/share/doc/linux-source-$series/changelog.Debian.gz"
src=$("$TOP/scripts/dkms-src.sh" host "$work/src")
name=$(sed -n 's/^PACKAGE_NAME="\(.*\)"/\1/p' "$src/dkms.conf")
ver=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"/\1/p' "$src/dkms.conf")
dkms add "${trees[@]}" -m "$name" -v "$ver" >/dev/null
if dkms build "${trees[@]}" -m "$name" -v "$ver" -k "$rel" --kernelsourcedir "$fake" >"$work/mismatch.log" 2>&1; then
	echo "dkms-test: $name built with linux-source-$series ${kver%%-*}-99 for $kver" >&2; exit 1
fi
mlog=$(ls "$work/dkms/$name/$ver/build/make.log" 2>/dev/null || true)
if ! cat "$work/mismatch.log" ${mlog:+"$mlog"} | grep -qF "install linux-source-$series=$kver"; then
	echo "dkms-test: $name with linux-source-$series ${kver%%-*}-99: no 'install linux-source-$series=$kver' in the log:" >&2
	cat "$work/mismatch.log" ${mlog:+"$mlog"} >&2; exit 1
fi
echo "dkms-test: $name with linux-source-$series ${kver%%-*}-99 for $kver refused: $(cat "$work/mismatch.log" ${mlog:+"$mlog"} | grep -o -m1 'install linux-source-[^ ;]*' | head -n 1)"
dkms remove "${trees[@]}" -m "$name" -v "$ver" --all --no-depmod >/dev/null 2>&1 || true
echo "dkms-test: ok"
