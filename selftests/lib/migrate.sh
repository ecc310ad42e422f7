# SPDX-License-Identifier: GPL-2.0
# selftests/lib/migrate.sh: what the migration tests in L2 share
# (selftests/l2/46-migrate.sh, 49-virsh-migrate.sh). Sourced, not run; the
# test sets D (its directory), loopdev (the backing device) and pids (the
# array its cleanup kills).

# start_bridge NAME: a bridge on $loopdev at $D/NAME.sock (2 queues, serial
# mig-disk, log $D/NAME.log); 0 once it listens, 1 after 5 s.
start_bridge() {
	vhost-blk-bridge --socket "$D/$1.sock" --backend "$loopdev" --queues 2 \
		--serial mig-disk -v >"$D/$1.log" 2>&1 &
	pids+=($!)
	for _ in $(seq 50); do
		[ -S "$D/$1.sock" ] && return 0
		sleep 0.1
	done
	return 1
}

# mailbox WORD: write WORD into the first sector of the mailbox disk
# ($D/mbox.img), which the guest half (selftests/e2e/migrate-guest.sh) reads.
mailbox() {
	{ printf '%s' "$1"; head -c $((512 - ${#1})) /dev/zero; } |
		dd of="$D/mbox.img" bs=512 count=1 conv=notrunc 2>/dev/null
}

# ioerrs: requests vhost_blk failed, over its devices now open.
ioerrs() {
	cat /sys/kernel/debug/vhost-blk/[0-9]*/stats 2>/dev/null |
		awk '$1 == "ioerr" { e += $2 } END { print e + 0 }'
}
