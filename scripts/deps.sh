#!/bin/bash
# Install everything the build, tests, demo and bench need, from Debian's archive.
# Root, Debian 12 (bookworm), idempotent.  The 6.12 test kernel and QEMU 10.0 come
# from bookworm-backports, which is added by reusing the URI of the bookworm suite
# already configured in this machine's apt sources (no mirror host is written here).
set -euo pipefail

[ "$(id -u)" = 0 ] || { echo "deps: must run as root" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive

bpo_list=/etc/apt/sources.list.d/vhost-blk-backports.sources

# The URI that serves the plain "bookworm" suite, from deb822 or one-line sources.
bookworm_uri() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk 'BEGIN{RS=""; IGNORECASE=1}
		     /(^|\n)Suites:[^\n]*(^| )bookworm( |\n|$)/ && /(^|\n)Types:[^\n]*deb( |\n|$)/ {
			n = split($0, l, "\n")
			for (i = 1; i <= n; i++) if (l[i] ~ /^URIs:/) {
				sub(/^URIs:[ \t]*/, "", l[i]); split(l[i], u, " "); print u[1]; exit
			}
		     }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/) {
			if ($(i+1) == "bookworm") print $i; break } }' "$f"
	done
}

have_bpo() {
	grep -rqsE '(^|[[:space:]])bookworm-backports([[:space:]]|$)' \
		/etc/apt/sources.list /etc/apt/sources.list.d/
}

if ! have_bpo; then
	uri=$(bookworm_uri | head -n1)
	[ -n "$uri" ] || { echo "deps: no bookworm suite in the apt sources to derive backports from" >&2; exit 1; }
	cat >"$bpo_list" <<SRC
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
	echo "deps: added bookworm-backports from the configured bookworm URI"
fi

stamp=/var/lib/apt/periodic/vhost-blk-deps-update
if [ ! -f "$stamp" ] || [ -n "$(find "$stamp" -mmin +360 2>/dev/null)" ] ||
   ! apt-cache policy 2>/dev/null | grep -q bookworm-backports; then
	apt-get update -q
	mkdir -p "$(dirname "$stamp")"; touch "$stamp"
fi

apt_install() { apt-get install -y -q --no-install-recommends "$@"; }

# Tools for the build, the VM harness and the tests.
apt_install build-essential bc kmod cpio xz-utils zstd gzip busybox-static \
	fio sparse gnuplot-nox e2fsprogs util-linux dkms perl python3 \
	socat jq strace procps file rsync
# QEMU 10.0 (bookworm's 7.2 TCG crashes the 6.12 kernel about one boot in four).
apt_install -t bookworm-backports qemu-system-x86 qemu-utils qemu-block-extra ipxe-qemu seabios
# qemu-storage-daemon lives in qemu-system-common on bookworm-backports.
apt_install -t bookworm-backports qemu-system-common
# make bench counts instructions and VM exits with a TCG plugin built against
# the plugin API header of this QEMU (from its source package; glib's headers
# for its types): scripts/qemu-plugin-api.sh fetches the header into build/.
apt_install libglib2.0-dev pkg-config
"$(dirname "$0")/qemu-plugin-api.sh" >/dev/null
# libvirt for selftests/l2/43-libvirt.sh (carried into the L2 image by vm.sh):
# the monolithic libvirtd, the QEMU driver and virsh, from bookworm-backports
# (11.3, of the same suite as QEMU 10.0; bookworm's 9.0 predates that QEMU).
# Each package is named with its suite rather than "-t bookworm-backports",
# which would also take systemd from backports (libvirt-daemon-driver-qemu
# wants systemd-container, of which bookworm's matches the installed systemd).
# The tests run libvirtd in the L2 VM only, never on this machine (where, with
# systemd, Debian's packages enable the libvirtd and virtlogd sockets).
lv=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients libvirt-common libvirt0
    libvirt-daemon-common libvirt-daemon-log)
apt_install "${lv[@]/%//bookworm-backports}"

# The versioned kernel package a meta-package points at, per series: the bookworm
# suite has 6.1, bookworm-backports 6.12; both are installed by name, side by side.
versioned() { # meta series
	apt-cache show "$1" 2>/dev/null | awk -v s="$2" '
		/^Depends:/ { n = split($0, d, /[ ,]+/)
			for (i = 1; i <= n; i++) if (d[i] ~ "^linux-(image|headers)-" s "[.]") { print d[i]; exit } }'
}
for series in 6.1 6.12; do
	img=$(versioned linux-image-cloud-amd64 "$series")
	hdr=$(versioned linux-headers-cloud-amd64 "$series")
	[ -n "$img" ] && [ -n "$hdr" ] || { echo "deps: cannot resolve the $series cloud kernel in the apt sources" >&2; exit 1; }
	t=(); [ "$series" = 6.12 ] && t=(-t bookworm-backports)
	apt_install "${t[@]}" "$img" "$hdr" "linux-source-$series"
	apt-mark manual "$img" "$hdr" >/dev/null
done

# Kernel images must be readable to build initramfs images as any user.
chmod a+r /boot/vmlinuz-* 2>/dev/null || true
echo "deps: ok"
