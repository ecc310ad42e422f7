#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# In the test VM: exercise virtio_blk_bio on the disks that vm-test.sh
# attached, once per submission path (use_bio=0, then use_bio=1). Prints TAP-style
# lines, exits nonzero if any check failed.
#
# Disks are found by serial (vm-test.sh sets them):
#   vbb-data    256M, 2 queues, discard=unmap
#   vbb-log     blklogwrites in the VM's QEMU (write-cache=on): device-side flush witness
#   vbb-ro      readonly, content md5 in $RO_MD5 (first 1M)
#   vbb-resize  64M, grown by vm-test.sh over QMP when it sees our marker
#   vbb-err     blkdebug: reads at 4M fail with EIO
#   vbb-small   queue-size=16, 1 queue, write-cache=on, no indirect descriptors:
#               ring-full paths (a request takes 3+ of the 16 entries)
#   vbb-topo    4K logical / 16K physical blocks, io_min 16K, io_opt 1M; discard
#               and write-zeroes limits of 1 sector (below one block: refused)
#   vbb-flush   null-co with 20 ms per request, write-back: concurrent
#               O_DSYNC writers share flushes
#
# Environment: RO_MD5 (required), PATHS (default "0 1"); SUSPEND=0 skips the
# suspend check (SUSPEND_WHY says why); ONLY=suspend runs that check alone,
# on the data and resize disks.
set -u
PATHS=${PATHS:-0 1}
JOBS=/src/selftests/virtio_blk_bio
. "$(dirname "$0")/lib.sh"

stat_of() { # disk key
	sed -n "s/^$2 //p" "/sys/block/$1/driver_stats"
}

fio_verify() { # disk extra-args...: fio data job with crc32c verification
	local dev=/dev/$1; shift
	fio --name=v --filename="$dev" --ioengine=libaio --direct=1 --verify=crc32c \
		--verify_fatal=1 --do_verify=1 --output-format=terse --terse-version=3 \
		--size=4M "$@"
}

wait_disks() {
	local i
	for i in $(seq 1 40); do
		[ "$(ls -d /sys/block/vd* 2>/dev/null | wc -l)" -ge 8 ] && return 0
		sleep 0.25
	done
	return 1
}

modprobe virtio_pci 2>/dev/null

# ---------------------------------------------------------------------------
run_path() {
	local ub=$1 mode
	[ "$ub" = 1 ] && mode=bio || mode=mq
	P="use_bio=$ub: "

	echo "# t=${SECONDS}s"
	check "modprobe virtio_blk_bio use_bio=$ub" modprobe virtio_blk_bio use_bio="$ub"
	check "all eight disks probed" wait_disks
	DATA=$(disk_by_serial vbb-data) LOG=$(disk_by_serial vbb-log) RO=$(disk_by_serial vbb-ro)
	RES=$(disk_by_serial vbb-resize) ERR=$(disk_by_serial vbb-err) SMALL=$(disk_by_serial vbb-small)
	TOPO=$(disk_by_serial vbb-topo) FLUSH=$(disk_by_serial vbb-flush)
	if [ -z "$DATA" ] || [ -z "$LOG" ] || [ -z "$RO" ] || [ -z "$RES" ] || [ -z "$ERR" ] ||
	   [ -z "$SMALL" ] || [ -z "$TOPO" ] || [ -z "$FLUSH" ]; then
		nok "every disk found by its serial (GET_ID)"
		ls -l /sys/block/; return
	fi
	ok "every disk found by its serial (GET_ID)"
	# fio's verify also passes on data an earlier run left at the same place:
	# each path starts from zeroed disks, so it verifies its own writes.
	check "data and small disks zeroed before this path" \
		sh -c "dd if=/dev/zero of=/dev/$DATA bs=1M oflag=direct 2>/dev/null; dd if=/dev/zero of=/dev/$SMALL bs=1M oflag=direct 2>/dev/null; [ \$(od -An -v -tx1 -N 512 /dev/$DATA | tr -d ' 0\n' | wc -c) = 0 ]"
	check "driver_stats reports the $mode path" \
		grep -qx "path $mode" "/sys/block/$DATA/driver_stats"
	check "data disk uses 2 virtqueues" grep -qx "queues 2" "/sys/block/$DATA/driver_stats"

	# --- data integrity
	check "fio randwrite 4k QD16 verify=crc32c" \
		fio_verify "$DATA" --rw=randwrite --bs=4k --iodepth=16
	check "fio randrw mixed sizes, 2 jobs, verify=crc32c" \
		fio_verify "$DATA" --rw=randrw --bssplit=4k/50:16k/20:64k/20:256k/10 \
		--iodepth=8 --numjobs=2 --offset_increment=32M
	check "fio 1M sequential write (split over segments) verify=crc32c" \
		fio_verify "$DATA" --rw=write --bs=1M --iodepth=4 --offset=64M

	echo "# t=${SECONDS}s"
	# --- submission batching: one kick per plugged batch, one per request unplugged
	local a0 k0 a1 k1 added kicks
	a0=$(stat_of "$DATA" added) k0=$(stat_of "$DATA" kick_tries)
	fio --name=b --filename="/dev/$DATA" --ioengine=libaio --direct=1 --rw=randread \
		--bs=4k --iodepth=32 --iodepth_batch_submit=16 --iodepth_batch_complete_min=16 \
		--size=16M --number_ios=1024 --output-format=terse >/dev/null 2>&1
	a1=$(stat_of "$DATA" added) k1=$(stat_of "$DATA" kick_tries)
	added=$((a1 - a0)) kicks=$((k1 - k0))
	echo "# batched: $added requests, $kicks kick attempts"
	# (the blk-mq path may merge a few of the 4096 reads)
	if [ "$added" -ge 512 ] && [ $((kicks * 4)) -le "$added" ]; then
		ok "batched submission: <= 1 kick per 4 requests ($kicks for $added)"
	else
		nok "batched submission: <= 1 kick per 4 requests ($kicks for $added)"
	fi
	a0=$a1 k0=$k1
	fio --name=s --filename="/dev/$DATA" --ioengine=psync --direct=1 --rw=randread \
		--bs=4k --size=16M --number_ios=128 --output-format=terse >/dev/null 2>&1
	a1=$(stat_of "$DATA" added) k1=$(stat_of "$DATA" kick_tries)
	added=$((a1 - a0)) kicks=$((k1 - k0))
	if [ "$added" -ge 128 ] && [ "$kicks" -ge "$added" ]; then
		ok "unbatched submission: one kick per request ($kicks for $added)"
	else
		nok "unbatched submission: one kick per request ($kicks for $added)"
	fi

	# --- REQ_POLLED bios (io_uring hipri) on the bio path, the same on 6.1
	# and 6.12: taken, completed by interrupt or ->poll_bio (the blk-mq
	# path polls with poll_queues, run_poll)
	if [ "$ub" = 0 ]; then
		:
	elif fio --enghelp 2>/dev/null | grep -qw io_uring; then
		check "io_poll is 1" grep -qx 1 "/sys/block/$DATA/queue/io_poll"
		check "io_uring hipri (REQ_POLLED) randrw verify=crc32c" \
			fio_verify "$DATA" --ioengine=io_uring --hipri=1 --rw=randrw --bs=4k \
			--iodepth=16 --offset=96M
	else
		skip "io_uring hipri verify" "fio without io_uring"
	fi

	echo "# t=${SECONDS}s"
	# --- discard and write zeroes
	local zmd5 md5
	zmd5=$(head -c 1048576 /dev/zero | md5sum | cut -d' ' -f1)
	check "discard and write-zeroes limits advertised" sh -c \
		"[ \$(cat /sys/block/$DATA/queue/discard_max_bytes) -gt 0 ] &&
		 [ \$(cat /sys/block/$DATA/queue/write_zeroes_max_bytes) -gt 0 ]"
	fio --name=p --filename="/dev/$DATA" --ioengine=psync --direct=1 --rw=write --bs=1M \
		--offset=8M --size=2M --output-format=terse >/dev/null 2>&1
	check "blkdiscard -z (write zeroes) of 1M" blkdiscard -z -o 8M -l 1M "/dev/$DATA"
	md5=$(dd if="/dev/$DATA" bs=1M skip=8 count=1 2>/dev/null | md5sum | cut -d' ' -f1)
	[ "$md5" = "$zmd5" ] && ok "write-zeroed range reads back as zeroes" ||
		nok "write-zeroed range reads back as zeroes"
	md5=$(dd if="/dev/$DATA" bs=1M skip=9 count=1 2>/dev/null | md5sum | cut -d' ' -f1)
	[ "$md5" != "$zmd5" ] && ok "the range after it is untouched" ||
		nok "the range after it is untouched"
	check "blkdiscard (discard) of 1M" blkdiscard -o 9M -l 1M "/dev/$DATA"
	md5=$(dd if="/dev/$DATA" bs=1M skip=9 count=1 2>/dev/null | md5sum | cut -d' ' -f1)
	[ "$md5" = "$zmd5" ] && ok "discarded range (discard=unmap) reads back as zeroes" ||
		nok "discarded range (discard=unmap) reads back as zeroes"
	check "secure erase is refused cleanly" sh -c "! blkdiscard -s -o 0 -l 1M /dev/$DATA"

	echo "# t=${SECONDS}s"
	# --- ext4: journal commits are PREFLUSH|FUA writes
	local pf0 fu0
	pf0=$(stat_of "$DATA" preflushes) fu0=$(stat_of "$DATA" fua_flushes)
	check "ext4: mkfs, mount, write + sync, umount, e2fsck clean" sh -c "
		mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=1 /dev/$DATA 32M &&
		mkdir -p /mnt/vbb && mount -t ext4 /dev/$DATA /mnt/vbb &&
		dd if=/dev/urandom of=/mnt/vbb/f bs=64k count=16 2>/dev/null &&
		md5sum /mnt/vbb/f >/tmp/f.md5 && sync && umount /mnt/vbb &&
		e2fsck -fn /dev/$DATA && mount -t ext4 /dev/$DATA /mnt/vbb &&
		cd /mnt/vbb && md5sum -c /tmp/f.md5 && cd / && umount /mnt/vbb"
	if [ "$ub" = 1 ]; then
		local pf fu
		pf=$(($(stat_of "$DATA" preflushes) - pf0)) fu=$(($(stat_of "$DATA" fua_flushes) - fu0))
		[ "$pf" -gt 0 ] && [ "$fu" -gt 0 ] &&
			ok "ext4 journal: preflushes ($pf) and FUA post-flushes ($fu) emulated" ||
			nok "ext4 journal: preflushes ($pf) and FUA post-flushes ($fu) emulated"
	fi

	echo "# t=${SECONDS}s"
	# --- flush witness: vm-test.sh checks the blklogwrites log. Region per path.
	local base=$((ub * 8))
	check "write-back cache reported" grep -qx "write back" "/sys/block/$LOG/queue/write_cache"
	fio --name=plain --filename="/dev/$LOG" --ioengine=psync --direct=1 --rw=write --bs=4k \
		--offset=$((base))M --size=40k --output-format=terse >/dev/null 2>&1 &&
	fio --name=dsync --filename="/dev/$LOG" --ioengine=psync --direct=1 --sync=1 \
		--rw=write --bs=4k --offset=$((base + 2))M --size=40k --output-format=terse \
		>/dev/null 2>&1 &&
	fio --name=fsync --filename="/dev/$LOG" --ioengine=psync --direct=1 --fsync=1 --end_fsync=1 \
		--rw=write --bs=4k --offset=$((base + 4))M --size=40k --output-format=terse \
		>/dev/null 2>&1
	[ $? = 0 ] && ok "log disk: plain, O_SYNC and fsync'ed writes" ||
		nok "log disk: plain, O_SYNC and fsync'ed writes"

	echo "# t=${SECONDS}s"
	# --- Concurrent flushes: 8 O_DSYNC writers, each write a FUA write, on a
	# device that takes 20 ms per request. On the bio path the flushes that
	# wait while one is in flight share the next: fewer flushes than FUA
	# writes. (QEMU merges flushes with no write between them, so its count
	# of flushes says nothing; selftests/l2/33 counts them at vhost_blk.)
	local fu0 fl0 pf0 fu fl pf
	fu0=$(stat_of "$FLUSH" fua_flushes) fl0=$(stat_of "$FLUSH" flushes)
	pf0=$(stat_of "$FLUSH" preflushes)
	check "flush disk: 8 jobs x 16 O_DSYNC 4k writes" \
		fio --name=cf --filename="/dev/$FLUSH" --ioengine=psync --direct=1 --sync=1 \
		--rw=write --bs=4k --size=64k --numjobs=8 --offset=$((ub * 8))M \
		--offset_increment=256k --group_reporting --output-format=terse
	if [ "$ub" = 1 ]; then
		fu=$(($(stat_of "$FLUSH" fua_flushes) - fu0)) fl=$(($(stat_of "$FLUSH" flushes) - fl0))
		pf=$(($(stat_of "$FLUSH" preflushes) - pf0))
		[ "$fu" = 128 ] && [ "$fl" -gt 0 ] && [ "$fl" -lt $((pf + fu)) ] &&
			ok "flush disk: $pf preflushes and $fu FUA writes shared $fl flushes" ||
			nok "flush disk: 128 FUA writes and their preflushes share flushes ($pf preflushes, $fu FUA writes, $fl flushes)"
	fi

	echo "# t=${SECONDS}s"
	# --- read-only disk
	check "read-only disk is marked ro" grep -qx 1 "/sys/block/$RO/ro"
	md5=$(dd if="/dev/$RO" bs=1M count=1 2>/dev/null | md5sum | cut -d' ' -f1)
	[ "$md5" = "$RO_MD5" ] && ok "read-only disk reads its content" ||
		nok "read-only disk reads its content ($md5 != $RO_MD5)"
	check "writing the read-only disk fails" sh -c \
		"! dd if=/dev/zero of=/dev/$RO bs=4k count=1 conv=fsync 2>/dev/null"

	echo "# t=${SECONDS}s"
	# --- I/O errors are reported, not hidden, and do not disturb other I/O
	check "read of a failing sector returns EIO" sh -c \
		"! fio --name=e --filename=/dev/$ERR --ioengine=psync --direct=1 --rw=read \
		 --bs=4k --offset=4M --size=4k --output-format=terse"
	check "reads elsewhere on that disk still work" \
		fio_verify "$ERR" --rw=write --bs=64k --iodepth=4 --size=2M
	check "error disk still serves a 4k read after the error" \
		dd if="/dev/$ERR" of=/dev/null bs=4k count=1

	echo "# t=${SECONDS}s"
	# --- a 16-entry ring: full-ring waits, deferred FUA stages, REQ_NOWAIT
	local full0 full
	full0=$(stat_of "$SMALL" ring_full)
	check "small ring: QD64 x2 jobs randwrite verify=crc32c" \
		fio_verify "$SMALL" --rw=randwrite --bs=4k --iodepth=64 --numjobs=2 \
		--offset_increment=8M --size=2M
	check "small ring: O_SYNC QD32 randwrite verify=crc32c" \
		fio_verify "$SMALL" --rw=randwrite --bs=4k --iodepth=32 --sync=1 --size=512k \
		--offset=32M
	if fio --enghelp 2>/dev/null | grep -qw io_uring; then
		check "small ring: io_uring QD64 (REQ_NOWAIT first) verify=crc32c" \
			fio_verify "$SMALL" --ioengine=io_uring --rw=randrw --bs=4k --iodepth=64 \
			--size=2M --offset=48M
	else
		skip "small ring: io_uring QD64 verify" "fio without io_uring"
	fi
	full=$(($(stat_of "$SMALL" ring_full) - full0))
	[ "$full" -gt 0 ] && ok "small ring: submitters found the ring full ($full) and waited" ||
		nok "small ring: submitters found the ring full ($full) and waited"
	# I/O statistics count completed I/O only: REQ_NOWAIT bios that found
	# the ring full and ended with EAGAIN (io_uring retries them) are not
	# I/O. 512 writes of 4k, each once: writes (+ merges) 512, no read.
	local st0 st1 wr rd
	if fio --enghelp 2>/dev/null | grep -qw io_uring; then
		read -ra st0 <"/sys/block/$SMALL/stat"
		fio --name=acct --filename="/dev/$SMALL" --ioengine=io_uring --direct=1 \
			--rw=randwrite --bs=4k --iodepth=64 --size=2M --offset=40M \
			--output-format=terse >/dev/null 2>&1
		read -ra st1 <"/sys/block/$SMALL/stat"
		wr=$((st1[4] + st1[5] - st0[4] - st0[5])) rd=$((st1[0] - st0[0]))
		[ "$wr" = 512 ] && [ "$rd" = 0 ] &&
			ok "small ring: I/O statistics count the 512 writes, no EAGAIN retry" ||
			nok "small ring: I/O statistics count the 512 writes, no EAGAIN retry ($wr writes, $rd reads)"
	else
		skip "small ring: I/O statistics" "fio without io_uring"
	fi

	echo "# t=${SECONDS}s"
	# --- limits read from the config space, as the driver validated them
	local q=/sys/block/$TOPO/queue v
	for v in logical_block_size:4096 physical_block_size:16384 minimum_io_size:16384 \
		 optimal_io_size:1048576 discard_max_bytes:0 write_zeroes_max_bytes:0; do
		check "4K disk: ${v%%:*} is ${v#*:}" grep -qx "${v#*:}" "$q/${v%%:*}"
	done
	check "4K disk: discard and write-zeroes limits below one block refused" sh -c \
		"dmesg | grep -q 'discard limit of 1 sectors is below one logical block' &&
		 dmesg | grep -q 'write zeroes limit of 1 sectors is below one logical block'"
	check "4K disk: 16k randwrite QD8 verify=crc32c" \
		fio_verify "$TOPO" --rw=randwrite --bs=16k --iodepth=8 --size=2M

	echo "# t=${SECONDS}s"
	# --- capacity change: vm-test.sh grows the disk when it reads our marker
	local size0 size i
	size0=$(cat "/sys/block/$RES/size")
	printf 'VBB-RESIZE-%s\n' "$ub" | dd of="/dev/$RES" bs=512 conv=sync,fsync 2>/dev/null
	for i in $(seq 1 120); do
		size=$(cat "/sys/block/$RES/size")
		[ "$size" != "$size0" ] && break
		sleep 0.25
	done
	[ "$size" -gt "$size0" ] && ok "capacity change seen ($size0 -> $size sectors)" ||
		nok "capacity change seen ($size0 -> $size sectors)"
	check "I/O beyond the old end after the resize" \
		fio_verify "$RES" --rw=write --bs=64k --iodepth=4 --offset=$((size0 * 512)) --size=1M

	run_suspend "$ub" 8
	run_unbind_busy "$ub"
	run_dead "$ub"

	check "rmmod virtio_blk_bio" rmmod virtio_blk_bio
	check "disks gone after rmmod" sh -c '! ls /sys/block/vd* >/dev/null 2>&1'
	P=""
}

# Suspend to RAM with I/O in flight: ->freeze drains and removes the rings,
# ->restore builds them again; the host wakes the VM over QMP
# (system_wakeup) when it reads our marker on the resize disk and sees the
# VM suspended. run_suspend USE_BIO NDISKS (the disks the driver has).
# SUSPEND=0: not in this VM (a TCG VM does not come back from S3 here:
# Documentation/virtio-blk-bio.rst, "Testing").
run_suspend() {
	local ub=$1 ndisks=$2 fpid rc
	if [ "${SUSPEND:-1}" = 0 ]; then
		skip "suspend to RAM with I/O in flight" "${SUSPEND_WHY:-not in this VM}"
		return
	fi
	if ! grep -qw deep /sys/power/mem_sleep 2>/dev/null; then
		skip "suspend to RAM with I/O in flight" "no deep (S3) sleep state in this VM ($(cat /sys/power/mem_sleep 2>/dev/null))"
		return
	fi
	echo deep >/sys/power/mem_sleep
	dmesg -c >/dev/null
	fio_verify "$DATA" --rw=randwrite --bs=4k --iodepth=16 --size=32M \
		--offset=128M >/tmp/susp-fio.out 2>&1 &
	fpid=$!
	sleep 1
	printf 'VBB-SUSPEND-%s\n' "$ub" | dd of="/dev/$RES" bs=512 conv=sync,fsync 2>/dev/null
	echo mem >/sys/power/state; rc=$?
	[ $rc = 0 ] && ok "suspend to RAM and resume (fio writing)" ||
		nok "suspend to RAM and resume (fio writing) (status $rc)"
	wait $fpid
	[ $? = 0 ] && ok "fio randwrite verify=crc32c across suspend/resume" ||
		{ nok "fio randwrite verify=crc32c across suspend/resume"; tail -n 5 /tmp/susp-fio.out | sed 's/^/#   /'; }
	check "the driver froze and restored every disk ($ndisks + $ndisks messages)" \
		sh -c "[ \$(dmesg | grep -c '\] frozen\$') = $ndisks ] && [ \$(dmesg | grep -c '\] restored\$') = $ndisks ]"
	check "I/O after resume verify=crc32c" \
		fio_verify "$DATA" --rw=randrw --bs=16k --iodepth=8 --offset=192M
}

# rebind_data [VAR=VALUE]: unbind the data disk's virtio device and bind it
# again (after writing module parameters: VAR=VALUE, read at probe); DATA is
# its new name. Bounded: fails if either takes more than 30 s.
rebind_data() {
	local vdev=$1 drv=/sys/bus/virtio/drivers/virtio_blk_bio
	bounded 30 sh -c "echo $vdev >$drv/unbind" || return 1
	bounded 30 sh -c "echo $vdev >$drv/bind" || return 1
	for _ in $(seq 1 40); do DATA=$(disk_by_serial vbb-data) && return 0; sleep 0.25; done
	return 1
}

# Unbind under I/O, the device answering: fio (plugged batches) ends with I/O
# errors, the remove waits for what is in flight and completes; three rounds.
run_unbind_busy() {
	local ub=$1 vdev i rc
	for i in 1 2 3; do
		vdev=$(basename "$(readlink -f "/sys/block/$DATA/device")")
		fio --name=u --filename="/dev/$DATA" --ioengine=libaio --direct=1 --rw=randrw \
			--bs=4k --iodepth=32 --iodepth_batch_submit=8 --time_based --runtime=60 \
			--size=64M --output-format=terse >/tmp/unbind-fio.out 2>&1 &
		sleep 2
		bounded 30 sh -c "echo $vdev >/sys/bus/virtio/drivers/virtio_blk_bio/unbind"; rc=$?
		wait
		bounded 30 sh -c "echo $vdev >/sys/bus/virtio/drivers/virtio_blk_bio/bind"
		for _ in $(seq 1 40); do DATA=$(disk_by_serial vbb-data) && break; sleep 0.25; done
		[ "$rc" = 0 ] || break
	done
	[ "$rc" = 0 ] && [ -n "$DATA" ] &&
		ok "unbind under I/O completes, 3 rounds (plugged batches in flight)" ||
		nok "unbind under I/O completes, 3 rounds (round $i: status $rc)"
}

# A device that stops answering, as blktests block/011 makes it: bus
# mastering off under I/O (QEMU then stops the device). With io_timeout=5
# the driver gives it up: fio ends with EIO in bounded time, serial and new
# I/O fail at once, unbind completes; bus mastering on and a new probe bring
# the disk back. Then the same with the PCI device removed (a surprise
# removal as the driver sees it: the remove finds the device not answering)
# and the bus rescanned.
run_dead() {
	local ub=$1 vdev pci rc t0 dt how fpid
	for how in unbind remove; do
		P="use_bio=$ub: no answer, then $how: "
		echo 5 >/sys/module/virtio_blk_bio/parameters/io_timeout
		vdev=$(basename "$(readlink -f "/sys/block/$DATA/device")")
		if ! rebind_data "$vdev"; then
			nok "data disk probed again with io_timeout=5"
			break
		fi
		pci=$(pci_of "$DATA")
		fio --name=d --filename="/dev/$DATA" --ioengine=libaio --direct=1 --rw=randwrite \
			--bs=4k --iodepth=16 --time_based --runtime=120 --size=64M \
			--output-format=terse >/tmp/dead-fio.out 2>&1 &
		fpid=$!
		sleep 2
		dmesg -c >/dev/null
		bus_master "$pci" off
		t0=$SECONDS
		if [ $how = remove ]; then
			bounded 60 sh -c "echo 1 >$pci/remove"; rc=$?
			dt=$((SECONDS - t0))
			[ $rc = 0 ] && ok "PCI remove completes ($dt s)" ||
				nok "PCI remove completes (status $rc after $dt s)"
		fi
		for _ in $(seq 1 240); do kill -0 $fpid 2>/dev/null || break; sleep 0.25; done
		dt=$((SECONDS - t0))
		if kill -0 $fpid 2>/dev/null; then
			nok "fio ends with I/O errors in bounded time (still running after $dt s)"
		else
			wait $fpid; rc=$?
			[ $rc != 0 ] && grep -q 'Input/output error' /tmp/dead-fio.out &&
				ok "fio ends with EIO after $dt s" ||
				nok "fio ends with EIO in bounded time (status $rc, $dt s)"
		fi
		check "the driver gave the device up after its timeout (message)" \
			sh -c "dmesg | grep -q 'giving the device up'"
		if [ $how = unbind ]; then
			bounded 20 cat "/sys/block/$DATA/serial"; rc=$?
			[ $rc != 0 ] && [ $rc != 124 ] && grep -q 'Input/output error' /tmp/bounded.out &&
				ok "reading serial fails at once with EIO" ||
				nok "reading serial fails at once with EIO (status $rc)"
			bounded 20 dd if="/dev/$DATA" of=/dev/null bs=4k count=1 iflag=direct; rc=$?
			[ $rc != 0 ] && [ $rc != 124 ] && ok "a new read fails at once" ||
				nok "a new read fails at once (status $rc)"
			bounded 30 sh -c "echo $vdev >/sys/bus/virtio/drivers/virtio_blk_bio/unbind"; rc=$?
			[ $rc = 0 ] && ok "unbind completes" || nok "unbind completes (status $rc)"
			bus_master "$pci" on
			echo 30 >/sys/module/virtio_blk_bio/parameters/io_timeout
			bounded 30 sh -c "echo $vdev >/sys/bus/virtio/drivers/virtio_blk_bio/bind"
		else
			[ -z "$(disk_by_serial vbb-data)" ] && ok "the disk is gone" ||
				nok "the disk is gone"
			echo 30 >/sys/module/virtio_blk_bio/parameters/io_timeout
			echo 1 >/sys/bus/pci/rescan
		fi
		DATA=
		for _ in $(seq 1 40); do DATA=$(disk_by_serial vbb-data) && break; sleep 0.25; done
		if [ -n "$DATA" ]; then
			check "a new probe brings the disk back: fio verify=crc32c" \
				fio_verify "$DATA" --rw=randwrite --bs=4k --iodepth=8 --offset=224M
		else
			nok "a new probe brings the disk back"
			break
		fi
	done
	P="use_bio=$ub: "
}

# ONLY=dead: the unbind-under-I/O and no-answer checks alone, on the data disk.
run_dead_only() {
	local ub
	for ub in $PATHS; do
		P="use_bio=$ub: "
		check "modprobe virtio_blk_bio use_bio=$ub" modprobe virtio_blk_bio use_bio="$ub"
		wait_disks >/dev/null
		DATA=$(disk_by_serial vbb-data)
		run_unbind_busy "$ub"
		run_dead "$ub"
		check "rmmod virtio_blk_bio" bounded 30 rmmod virtio_blk_bio
		P=""
	done
}

# ONLY=suspend: the suspend check alone, on the data and resize disks (both
# paths), for a VM where S3 works (selftests/l2/32-virtio-blk-bio-suspend.sh).
run_suspend_only() {
	local ub
	for ub in $PATHS; do
		P="use_bio=$ub: "
		check "modprobe virtio_blk_bio use_bio=$ub" modprobe virtio_blk_bio use_bio="$ub"
		for _ in $(seq 1 40); do
			DATA=$(disk_by_serial vbb-data) && RES=$(disk_by_serial vbb-resize) && break
			sleep 0.25
		done
		if [ -z "$DATA" ] || [ -z "$RES" ]; then
			nok "data and resize disks found by their serial"
		else
			run_suspend "$ub" "$(ls -d /sys/block/vd* | wc -l)"
		fi
		check "rmmod virtio_blk_bio" rmmod virtio_blk_bio
		P=""
	done
}

# poll queues, and a queue_depth larger than the rings (blk-mq path only)
run_poll() {
	P="use_bio=0 poll_queues=1 queue_depth=1000: "
	check "modprobe" modprobe virtio_blk_bio use_bio=0 poll_queues=1 queue_depth=1000
	wait_disks >/dev/null
	DATA=$(disk_by_serial vbb-data) SMALL=$(disk_by_serial vbb-small)
	check "queue_depth capped at the 16-entry ring (message)" \
		sh -c "dmesg | grep -q 'queue_depth 1000 capped at the ring size 16'"
	# without an I/O scheduler nr_requests is the tag set depth, and plugged
	# requests go to ->queue_rqs: 16 tags of 3+ entries overflow the ring there
	echo none >"/sys/block/$SMALL/queue/scheduler"
	check "small ring: nr_requests is the ring size (16)" \
		grep -qx 16 "/sys/block/$SMALL/queue/nr_requests"
	local full0 full
	full0=$(stat_of "$SMALL" ring_full)
	check "small ring: QD64 randrw at the capped depth verify=crc32c" \
		fio_verify "$SMALL" --rw=randrw --bs=4k --iodepth=64 --size=2M --offset=16M
	full=$(($(stat_of "$SMALL" ring_full) - full0))
	[ "$full" -gt 0 ] && ok "small ring, no scheduler: ring found full ($full), all I/O verified" ||
		nok "small ring, no scheduler: ring found full ($full), all I/O verified"
	check "io_poll enabled on a 2-queue disk" grep -qx 1 "/sys/block/$DATA/queue/io_poll"
	if fio --enghelp 2>/dev/null | grep -qw io_uring; then
		check "io_uring hipri randrw verify=crc32c" \
			fio_verify "$DATA" --ioengine=io_uring --hipri=1 --rw=randrw --bs=4k --iodepth=16
	else
		skip "io_uring hipri verify" "fio without io_uring"
	fi
	check "rmmod" rmmod virtio_blk_bio
	P=""
}

# use_bio is read when a device is probed: written at runtime, it switches
# one disk by unbind/bind while the others keep the path they were probed with
run_switch() {
	local vdev i
	P="use_bio switched at runtime: "
	check "modprobe virtio_blk_bio use_bio=0" modprobe virtio_blk_bio use_bio=0
	wait_disks >/dev/null
	DATA=$(disk_by_serial vbb-data) SMALL=$(disk_by_serial vbb-small)
	vdev=$(basename "$(readlink -f "/sys/block/$DATA/device")")
	check "use_bio=1 written to /sys/module/virtio_blk_bio/parameters/use_bio" \
		sh -c 'echo 1 >/sys/module/virtio_blk_bio/parameters/use_bio'
	check "unbind $vdev (the data disk)" \
		sh -c "echo $vdev >/sys/bus/virtio/drivers/virtio_blk_bio/unbind"
	check "bind $vdev again" sh -c "echo $vdev >/sys/bus/virtio/drivers/virtio_blk_bio/bind"
	for i in $(seq 1 40); do DATA=$(disk_by_serial vbb-data) && break; sleep 0.25; done
	check "rebound data disk reports the bio path" grep -qx "path bio" "/sys/block/$DATA/driver_stats"
	check "the disk not rebound keeps the request path" grep -qx "path mq" "/sys/block/$SMALL/driver_stats"
	check "rebound disk: fio randwrite 4k QD16 verify=crc32c" \
		fio_verify "$DATA" --rw=randwrite --bs=4k --iodepth=16 --offset=128M
	check "rmmod" rmmod virtio_blk_bio
	P=""
}

if [ "${ONLY:-}" = suspend ]; then
	DATA= RES=
	run_suspend_only
	echo "# $fails failed"
	[ "$fails" = 0 ]
	exit
fi
if [ "${ONLY:-}" = dead ]; then
	run_dead_only
	echo "# $fails failed"
	[ "$fails" = 0 ]
	exit
fi
[ -n "${RO_MD5:-}" ] || { echo "not ok - RO_MD5 not set"; exit 1; }
for ub in $PATHS; do
	run_path "$ub"
done
run_poll
run_switch
echo "# $fails failed"
[ "$fails" = 0 ]
