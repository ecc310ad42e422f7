# SPDX-License-Identifier: GPL-2.0
# selftests/lib/libvirt.sh: libvirtd in L2 for the tests that need it
# (selftests/l2/43-libvirt.sh, 49-virsh-migrate.sh). Sourced, not run.
# libvirtd runs as root with no systemd, dbus, polkit or security driver;
# the tests write its configuration themselves.

# lv_have: libvirtd and virsh are in the L2 image (make deps adds them).
lv_have() {
	command -v libvirtd >/dev/null && command -v virsh >/dev/null
}

# lv_prepare: the users, groups and directories libvirt expects.
lv_prepare() {
	# libvirt's paths are under /var/run; /var is not in the image.
	[ -e /var/run ] || { mkdir -p /var && ln -s /run /var/run; }
	# The QEMU driver resolves its built-in default user and group
	# (Debian's libvirt-qemu, kvm) before it reads qemu.conf: they must
	# exist.
	grep -q '^libvirt-qemu:' /etc/passwd ||
		echo 'libvirt-qemu:x:64055:64055::/var/lib/libvirt:/bin/false' >>/etc/passwd
	grep -q '^libvirt-qemu:' /etc/group || echo 'libvirt-qemu:x:64055:' >>/etc/group
	grep -q '^kvm:' /etc/group || echo 'kvm:x:104:' >>/etc/group
	mkdir -p /etc/libvirt/qemu /run/libvirt /var/lib/libvirt/qemu \
		/var/log/libvirt/qemu /var/cache/libvirt/qemu
}

# lv_config ETC_DIR LOG_FILE [HOST_UUID]: libvirtd.conf and qemu.conf in
# ETC_DIR (libvirtd reads /etc/libvirt). HOST_UUID replaces the host's own
# (libvirt will not migrate a domain to a host with its own UUID).
lv_config() {
	mkdir -p "$1/qemu"
	{
		echo 'auth_unix_ro = "none"'
		echo 'auth_unix_rw = "none"'
		echo 'unix_sock_rw_perms = "0700"'
		echo "log_outputs = \"3:file:$2\""
		[ -n "${3:-}" ] && echo "host_uuid = \"$3\""
	} >"$1/libvirtd.conf"
	# stdio_handler "file": QEMU's log without virtlogd; namespaces and
	# cgroup_controllers empty: L2 has neither mounted nor needed.
	cat >"$1/qemu.conf" <<-EOF
	user = "root"
	group = "root"
	dynamic_ownership = 0
	remember_owner = 0
	security_driver = "none"
	namespaces = [ ]
	cgroup_controllers = [ ]
	stdio_handler = "file"
	EOF
}

# lv_wait_up URI PID OUT: wait (120 s at most) until the libvirtd with PID
# answers on URI; virsh's last answer in OUT.
lv_wait_up() {
	local end=$(($(date +%s) + 120))
	while [ "$(date +%s)" -le $end ]; do
		virsh -c "$1" version >"$3" 2>&1 && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 1
	done
	return 1
}
