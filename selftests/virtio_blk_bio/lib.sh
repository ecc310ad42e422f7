# SPDX-License-Identifier: GPL-2.0
# Shared by the in-guest test scripts guest-tests.sh and l3-matrix.sh (sourced):
# TAP-style result lines ($P prefixes each description; $fails counts the
# failures) and finding a disk by its virtio serial.
fails=0
P=""

ok() { echo "ok - $P$*"; }
nok() { echo "not ok - $P$*"; fails=$((fails + 1)); }
skip() { echo "ok - $P$1 # SKIP $2"; }
# check DESC CMD...: ok if CMD succeeds, output shown on failure
check() {
	local desc=$1; shift
	if "$@" >/tmp/check.out 2>&1; then ok "$desc"; else
		nok "$desc"; sed 's/^/#   /' /tmp/check.out | tail -n 15; fi
}

# disk_by_serial SERIAL: the vdX whose serial is SERIAL
disk_by_serial() {
	local d
	for d in /sys/block/vd*; do
		[ -e "$d/serial" ] || continue
		[ "$(cat "$d/serial" 2>/dev/null)" = "$1" ] && { echo "${d##*/}"; return 0; }
	done
	return 1
}

# bounded SEC CMD...: run CMD in the background, output in /tmp/bounded.out;
# its status, or 124 if it still runs after SEC seconds (it is left behind:
# a task stuck in the kernel cannot be killed).
bounded() {
	local sec=$1 pid i; shift
	"$@" >/tmp/bounded.out 2>&1 &
	pid=$!
	for i in $(seq 1 $((sec * 4))); do
		kill -0 $pid 2>/dev/null || { wait $pid; return $?; }
		sleep 0.25
	done
	return 124
}

# pci_of DISK: the sysfs directory of the PCI device of virtio disk DISK
pci_of() {
	readlink -f "/sys/block/$1/device/.."
}

# bus_master PCIDIR on|off: set or clear Bus Master Enable in the PCI command
# register (config offset 4), as blktests block/011 does with setpci.
bus_master() {
	local cfg=$1/config cmd
	cmd=$(od -An -tu2 -j4 -N2 "$cfg" | tr -d ' ')
	if [ "$2" = off ]; then cmd=$((cmd & ~4)); else cmd=$((cmd | 4)); fi
	# shellcheck disable=SC2059
	printf "$(printf '\\x%02x\\x%02x' $((cmd & 255)) $((cmd >> 8)))" |
		dd of="$cfg" bs=2 seek=2 count=1 conv=notrunc 2>/dev/null
}
