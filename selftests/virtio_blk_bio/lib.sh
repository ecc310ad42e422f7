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
