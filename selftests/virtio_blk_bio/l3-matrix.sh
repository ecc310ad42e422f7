#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# In L3: the part of selftests/l2/31-virtio-blk-bio-matrix.sh that runs in the
# guest, once per submission path (use_bio=0, then use_bio=1): hw queue counts
# and per-queue I/O for 1, 2 and 4 virtqueues, a fio verify=crc32c matrix
# (block size x iodepth x numjobs), and a PCI hot-unplug during I/O. Prints
# TAP-style lines, exits nonzero if any check failed. Wants 4 vCPUs.
#
# Disks are found by serial (the L2 script sets them):
#   vbb-ctl    1M, talks to L2: we write "VBB-UNPLUG-hpN" in sector 0, L2 sends
#              QMP device_del for hpN and answers at byte 4096
#              ("VBB-UNPLUGGED-hpN removed|refused ...|timeout ...")
#   vbb-mat    768M, 512-byte logical blocks, discard=unmap: the fio matrix
#   vbb-q1/2/4 64M, num-queues=1/2/4
#   vbb-hp0/1  64M, QEMU ids hp0/hp1: unplugged during I/O on use_bio=0/1
#
# Environment: PATHS (default "0 1").
set -u
PATHS=${PATHS:-0 1}
BAD_RE='Oops|BUG:|WARNING:|KASAN|UBSAN|lockdep|possible (recursive|circular) locking|blocked for more than|Kernel panic|general protection fault|soft lockup|hard LOCKUP|rcu.*detected stalls?'
. "$(dirname "$0")/lib.sh"

wait_disks() { # count
	local i
	for i in $(seq 1 40); do
		[ "$(ls -d /sys/block/vd* 2>/dev/null | wc -l)" -ge "$1" ] && return 0
		sleep 0.25
	done
	return 1
}

to_kib() { # a size (256k, 8M, or bytes) in KiB
	case $1 in
	*k) echo "${1%k}" ;;
	*M) echo $((${1%M} * 1024)) ;;
	*) echo $(($1 / 1024)) ;;
	esac
}

# fio_run OUT DISK ARGS...: fio with crc32c verification of everything it writes,
# output in OUT (terse, one line per run with --group_reporting); fio's status.
# Jobs are threads: forking them costs seconds per run in this nested guest.
fio_run() {
	local out=$1 dev=/dev/$2; shift 2
	fio --name=v --filename="$dev" --ioengine=libaio --direct=1 --verify=crc32c \
		--verify_fatal=1 --do_verify=1 --group_reporting --output-format=terse \
		--terse-version=3 --thread "$@" >"$out" 2>&1
}

# fio_judge DESC OUT RC WANT_KIB: ok if fio exited 0 and both wrote and read back
# (verified) WANT_KIB KiB.
fio_judge() {
	local desc=$1 out=$2 rc=$3 want=$4 line r w
	line=$(grep '^3;' "$out" | tail -n 1)
	r=$(echo "$line" | cut -d';' -f6) w=$(echo "$line" | cut -d';' -f47)
	if [ "$rc" = 0 ] && [ "$r" = "$want" ] && [ "$w" = "$want" ]; then
		ok "$desc"
	else
		nok "$desc (fio exit $rc, wrote ${w:-?} KiB, verified ${r:-?} KiB of $want)"
		grep -v '^3;' "$out" | tail -n 10 | sed 's/^/#   /'
	fi
}

fio_check() { # DESC DISK WANT_KIB ARGS...
	local desc=$1 disk=$2 want=$3 rc; shift 3
	fio_run /tmp/fio.out "$disk" "$@"
	rc=$?
	fio_judge "$desc" /tmp/fio.out "$rc" "$want"
}

irq_counts() { # virtioN: "count count ..." of its req.K interrupts, K = 0, 1, ...
	awk -v dev="$1" '$NF ~ "^" dev "-req\\.[0-9]+$" {
		s = 0; for (i = 2; i < NF; i++) if ($i ~ /^[0-9]+$/) s += $i
		k = $NF; sub(".*-req\\.", "", k); c[k] = s; if (k + 1 > n) n = k + 1 }
		END { for (k = 0; k < n; k++) printf "%s%d", (k ? " " : ""), c[k] }' /proc/interrupts
}

modprobe virtio_pci 2>/dev/null

# --- 1, 2 and 4 virtqueues: hw queues on the mq path, I/O on every queue
run_queues() {
	local ub=$1 n d vdev before after i b a busy
	for n in 1 2 4; do
		d=$(disk_by_serial "vbb-q$n") || { nok "num-queues=$n disk found"; continue; }
		check "num-queues=$n: driver_stats reports $n queues" \
			grep -qx "queues $n" "/sys/block/$d/driver_stats"
		if [ "$ub" = 0 ]; then
			i=$(ls -d "/sys/block/$d/mq/"[0-9]* 2>/dev/null | wc -l)
			[ "$i" = "$n" ] && ok "num-queues=$n: $n hw queues in /sys/block/$d/mq" ||
				nok "num-queues=$n: $n hw queues in /sys/block/$d/mq (found $i)"
		else
			[ ! -e "/sys/block/$d/mq" ] && ok "num-queues=$n: bio-based, no /sys/block/$d/mq" ||
				nok "num-queues=$n: bio-based, no /sys/block/$d/mq"
		fi
		vdev=$(basename "$(readlink -f "/sys/block/$d/device")")
		before=$(irq_counts "$vdev")
		# one job per CPU: every CPU's queue gets I/O
		fio_check "num-queues=$n: 4 jobs (one per CPU) randwrite 4k QD16 verify=crc32c" \
			"$d" $((4 * 1024)) --rw=randwrite --bs=4k --iodepth=16 --numjobs=4 \
			--cpus_allowed=0-3 --cpus_allowed_policy=split --size=1M \
			--offset=$((ub * 32))M --offset_increment=4M
		after=$(irq_counts "$vdev")
		busy=0
		set -- $before
		for a in $after; do
			b=${1:-0}; shift 2>/dev/null
			[ "$a" -gt "$b" ] && busy=$((busy + 1))
		done
		[ "$busy" = "$n" ] &&
			ok "num-queues=$n: all $n virtqueues completed I/O (interrupts $before -> $after)" ||
			nok "num-queues=$n: all $n virtqueues completed I/O (interrupts $before -> $after)"
	done
}

# --- fio matrix: bs x iodepth x numjobs, random writes, verify=crc32c.
# Every cell writes a region no earlier cell wrote (and discards it after), so a
# write that never reached the disk reads back as zeroes, not as older valid data.
MAT_OFF=0
run_matrix() {
	local d=$1 bs qd nj sz kib
	for bs in 512 4k 64k 1M; do
		case $bs in
		512) sz=128k ;; 4k) sz=1M ;; 64k) sz=4M ;; 1M) sz=4M ;;
		esac
		kib=$(to_kib "$sz")
		for qd in 1 32 128; do
			for nj in 1 8; do
				fio_check "matrix bs=$bs iodepth=$qd numjobs=$nj ($nj x $sz): randwrite verify=crc32c" \
					"$d" $((nj * kib)) --rw=randwrite --bs="$bs" --iodepth="$qd" \
					--numjobs="$nj" --size="$sz" --offset="$MAT_OFF" \
					--offset_increment="$sz"
				blkdiscard -o "$MAT_OFF" -l $((nj * kib * 1024)) "/dev/$d" 2>/dev/null
				MAT_OFF=$((MAT_OFF + nj * kib * 1024))
			done
		done
		echo "# t=${SECONDS}s"
	done
}

# --- PCI hot-unplug (ACPI, i440fx) of a disk under I/O
l2_answer() { # the ctl disk's answer from L2 (byte 4096), if any
	dd if="/dev/$CTL" bs=4096 skip=1 count=1 iflag=direct 2>/dev/null |
		tr -d '\0' | head -n 1
}

run_unplug() {
	local ub=$1 id=hp$1 d vdev pci fpid opid r0 i ans="" rc orc q1
	d=$(disk_by_serial "vbb-$id") || { nok "hot-unplug: disk vbb-$id found"; return; }
	q1=$(disk_by_serial vbb-q1)
	vdev=$(basename "$(readlink -f "/sys/block/$d/device")")
	pci=$(basename "$(readlink -f "/sys/block/$d/device/..")")
	echo "# hot-unplug: QEMU device $id is /dev/$d, $vdev on PCI $pci"

	fio --name=hp --filename="/dev/$d" --ioengine=libaio --direct=1 --rw=randrw \
		--bs=4k --iodepth=32 --numjobs=2 --size=16M --offset_increment=16M \
		--time_based --runtime=900 >/tmp/hp.out 2>&1 </dev/null &
	fpid=$!
	# I/O must be under way before the unplug is asked for
	r0=$(awk '{print $1 + $5}' "/sys/block/$d/stat")
	for i in $(seq 1 120); do
		[ "$(awk '{print $1 + $5}' "/sys/block/$d/stat" 2>/dev/null || echo 0)" -ge $((r0 + 512)) ] && break
		sleep 0.5
	done
	echo "# hot-unplug: $(awk '{print $1 + $5}' "/sys/block/$d/stat") I/Os done on /dev/$d before the unplug"
	# another disk stays under I/O across the unplug
	fio_run /tmp/other.out "$q1" --rw=randwrite --bs=4k --iodepth=16 --size=8M \
		--offset=$((ub * 32 + 16))M &
	opid=$!

	dmesg -c >/dev/null
	printf 'VBB-UNPLUG-%s\n' "$id" | dd of="/dev/$CTL" bs=512 conv=sync oflag=direct 2>/dev/null
	# wait for the driver to let go of the device (remove done), or for L2 to
	# say that QEMU refused the unplug or that the guest never ejected the device
	for i in $(seq 1 360); do
		[ -e "/sys/bus/virtio/devices/$vdev" ] || break
		ans=$(l2_answer)
		case $ans in
		"VBB-UNPLUGGED-$id removed") ;;
		"VBB-UNPLUGGED-$id "*) break ;;
		esac
		sleep 0.5
	done
	for i in $(seq 1 60); do
		ans=$(l2_answer)
		case $ans in "VBB-UNPLUGGED-$id "*) break ;; esac
		sleep 0.5
	done
	echo "# hot-unplug: L2 says: ${ans:-nothing}"
	case $ans in
	"VBB-UNPLUGGED-$id refused"*)
		skip "hot-unplug of $id during fio" "QEMU refused device_del: ${ans#* refused }"
		kill "$fpid" 2>/dev/null; wait "$fpid"; wait "$opid"
		return ;;
	esac

	[ ! -e "/sys/block/$d" ] && ok "hot-unplug: /dev/$d gone from /sys/block" ||
		nok "hot-unplug: /dev/$d gone from /sys/block"
	[ ! -e "/sys/bus/virtio/devices/$vdev" ] && [ ! -e "/sys/bus/pci/devices/$pci" ] &&
		ok "hot-unplug: driver remove completed ($vdev and PCI $pci gone)" ||
		nok "hot-unplug: driver remove completed ($vdev and PCI $pci gone)"
	# fio must end by itself, with errors: no task left waiting for the disk
	for i in $(seq 1 240); do
		kill -0 "$fpid" 2>/dev/null || break
		sleep 0.5
	done
	if kill -0 "$fpid" 2>/dev/null; then
		nok "hot-unplug: fio on /dev/$d ended (still running 120s after the unplug)"
		# (no pgrep in the VM image: fio's tasks by their comm)
		for i in /proc/[0-9]*; do
			[ "$(cat "$i/comm" 2>/dev/null)" = fio ] || continue
			echo "fio ${i#/proc/}: $(head -n 8 "$i/stack" 2>/dev/null | tr '\n' ' ')"
		done | sed 's/^/#   /'
		kill -9 "$fpid" 2>/dev/null
	else
		wait "$fpid"
		rc=$?
		if [ "$rc" != 0 ] && grep -qi 'error' /tmp/hp.out; then
			ok "hot-unplug: fio on /dev/$d ended with I/O errors (exit $rc)"
		else
			nok "hot-unplug: fio on /dev/$d ended with I/O errors (exit $rc)"
		fi
		grep -i -m 2 'error' /tmp/hp.out | sed 's/^/#   fio: /'
	fi
	wait "$opid"
	orc=$?
	fio_judge "hot-unplug: fio verify=crc32c on another disk across the unplug" \
		/tmp/other.out "$orc" 8192
	dmesg | grep -E "$BAD_RE" >/tmp/bad.out
	[ ! -s /tmp/bad.out ] && ok "hot-unplug: kernel log clean (no Oops, WARN, hung task)" || {
		nok "hot-unplug: kernel log clean (no Oops, WARN, hung task)"
		head -n 10 /tmp/bad.out | sed 's/^/#   /'; }
	dmesg | grep -i -E 'acpiphp|pci.*(remov|eject)|virtio' | tail -n 5 | sed 's/^/#   kernel: /'
	fio_check "hot-unplug: another disk works after the unplug (verify=crc32c)" \
		"$q1" 4096 --rw=randwrite --bs=64k --iodepth=8 --size=4M --offset=$((ub * 32 + 24))M
}

run_path() {
	local ub=$1 mode n
	[ "$ub" = 1 ] && mode=bio || mode=mq
	P="use_bio=$ub: "
	echo "# t=${SECONDS}s"
	check "modprobe virtio_blk_bio use_bio=$ub" modprobe virtio_blk_bio use_bio="$ub"
	n=$((5 + 2 - ub))
	check "all $n disks probed" wait_disks "$n"
	CTL=$(disk_by_serial vbb-ctl) MAT=$(disk_by_serial vbb-mat)
	if [ -z "$CTL" ] || [ -z "$MAT" ]; then
		nok "control and matrix disks found by serial"; ls -l /sys/block/; P=""; return
	fi
	check "driver_stats reports the $mode path" \
		grep -qx "path $mode" "/sys/block/$MAT/driver_stats"

	run_queues "$ub"
	echo "# t=${SECONDS}s"
	check "matrix disk has 512-byte logical blocks" \
		grep -qx 512 "/sys/block/$MAT/queue/logical_block_size"
	MAT_OFF=$((ub * 384 * 1024 * 1024))
	run_matrix "$MAT"
	run_unplug "$ub"
	echo "# t=${SECONDS}s"

	check "rmmod virtio_blk_bio" rmmod virtio_blk_bio
	check "disks gone after rmmod" sh -c '! ls /sys/block/vd* >/dev/null 2>&1'
	P=""
}

echo "# $(nproc) CPUs"
[ "$(nproc)" = 4 ] && ok "L3 has 4 CPUs" || nok "L3 has 4 CPUs ($(nproc))"
for ub in $PATHS; do
	run_path "$ub"
done
echo "# $fails failed"
[ "$fails" = 0 ]
