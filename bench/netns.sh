# SPDX-License-Identifier: GPL-2.0
# netns.sh (sourced): a storage server on a "host of its own" for the
# network-storage rows of bench/l2-bench.sh and for
# selftests/l2/48-netstore.sh. A network namespace held by a sleeping
# process, joined to the caller's by a veth pair: NETNS_CLIENT on the
# caller's end (vh), NETNS_SERVER on the server's (vs). Needs iproute2's ip
# (busybox's has no veth) and util-linux's unshare and nsenter.
NETNS_IP=${NETNS_IP:-/usr/sbin/ip}
NETNS_CLIENT=10.77.0.1
NETNS_SERVER=10.77.0.2
NETNS_PID=
NBD_PORT=10809
NBD_SRV_PID=

# in_netns CMD...: CMD in the server's namespace.
in_netns() {
	/usr/bin/nsenter -t "$NETNS_PID" -n "$@"
}

netns_up() {
	/usr/bin/unshare -n sleep 1000000 &
	NETNS_PID=$!
	local i
	for i in $(seq 50); do
		[ "$(readlink /proc/$NETNS_PID/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
		sleep 0.1
	done
	modprobe veth 2>/dev/null
	$NETNS_IP link add vh type veth peer name vs &&
		$NETNS_IP link set vs netns "$NETNS_PID" &&
		$NETNS_IP addr add $NETNS_CLIENT/24 dev vh && $NETNS_IP link set vh up &&
		in_netns $NETNS_IP addr add $NETNS_SERVER/24 dev vs &&
		in_netns $NETNS_IP link set vs up && in_netns $NETNS_IP link set lo up
}

netns_down() {
	[ -n "$NETNS_PID" ] || return 0
	kill "$NETNS_PID" 2>/dev/null
	wait "$NETNS_PID" 2>/dev/null
	NETNS_PID=
	$NETNS_IP link del vh 2>/dev/null
	return 0
}

# nbd_serve PATH NAME [QEMU-NBD OPTIONS]: qemu-nbd in the server's namespace
# exports PATH (raw) as NAME on NETNS_SERVER:NBD_PORT, for any number of
# connections one after another; its log in /tmp/qemu-nbd-NAME.log.
nbd_serve() {
	local path=$1 name=$2
	shift 2
	# (nsenter execs qemu-nbd: NBD_SRV_PID is the server's)
	/usr/bin/nsenter -t "$NETNS_PID" -n qemu-nbd -f raw -x "$name" -b $NETNS_SERVER -p $NBD_PORT \
		--persistent --shared=4 "$@" "$path" >>/tmp/qemu-nbd-$name.log 2>&1 &
	NBD_SRV_PID=$!
}

# nbd_attach DEV NAME TIMEOUT: nbd-client connects DEV to the export NAME,
# requests failing after TIMEOUT seconds without an answer (0: never);
# retried while the server starts.
nbd_attach() {
	local i t=()
	[ "$3" != 0 ] && t=(-t "$3")
	for i in $(seq 50); do
		nbd-client $NETNS_SERVER $NBD_PORT "$1" -N "$2" "${t[@]}" >/tmp/nbd-client.log 2>&1 &&
			return 0
		sleep 0.2
	done
	cat /tmp/nbd-client.log >&2
	return 1
}
