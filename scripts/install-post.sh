#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# install-post.sh SYSUSERS_CONF: what make install does on the machine itself
# (no DESTDIR) after copying the files: create the bridge's system user
# (vhost-blk, in group kvm), apply the udev rule to a /dev/vhost-blk that is
# already there, and have systemd read the new units.
set -u
conf=$1
if command -v systemd-sysusers >/dev/null 2>&1; then
	systemd-sysusers "$conf" || echo "install: systemd-sysusers $conf failed" >&2
elif ! getent passwd vhost-blk >/dev/null; then
	getent group kvm >/dev/null || groupadd --system kvm
	useradd --system --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin --groups kvm vhost-blk ||
		echo "install: could not create the user vhost-blk" >&2
fi
if command -v udevadm >/dev/null 2>&1 && udevadm control --reload 2>/dev/null &&
   [ -e /sys/class/misc/vhost-blk ]; then
	udevadm trigger --action=add /sys/class/misc/vhost-blk
fi
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload
fi
exit 0
