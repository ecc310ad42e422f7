#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# L3 half of scripts/demo.sh: fio on QEMU's virtio-blk and on vhost-blk (both
# guest paths), then the table.  Argument: fio runtime per job (s).
set -u
runtime=${1:-8}
say() { echo "demo[L3]: $*"; }
[ -d /sys/module/virtio_pci ] || modprobe virtio_pci 2>/dev/null

disk_by_serial() {
	local d
	for d in /sys/block/vd*; do
		[ "$(cat $d/serial 2>/dev/null)" = "$1" ] && { echo /dev/${d##*/}; return 0; }
	done
	return 1
}

load() {
	modprobe virtio_blk_bio use_bio="$1" || return 1
	for _ in $(seq 100); do
		disk_by_serial vhost-blk-demo >/dev/null &&
			disk_by_serial qemu-virtio-blk >/dev/null && return 0
		sleep 0.1
	done
	return 1
}

results=/tmp/demo-results
: >$results
# run LABEL DEV RW: one fio job; appends "label rw iops mean_us p99_us".
run() {
	local label=$1 dev=$2 rw=$3 line
	say "fio $rw 4k QD32 ${runtime}s on $label ($dev)"
	line=$(fio --name=demo --filename="$dev" --direct=1 --ioengine=libaio \
		--iodepth=32 --bs=4k --rw="$rw" --time_based --runtime="$runtime" \
		--ramp_time=1 --minimal 2>/dev/null) || { say "fio failed"; return 1; }
	# terse v3: read section from field 6, write section from field 47
	echo "$line" | awk -F';' -v label="$label" -v rw="$rw" '{
		b = (rw == "randread") ? 6 : 47
		iops = $(b + 2); mean = $(b + 10); p99 = 0
		for (i = b + 12; i <= b + 31; i++)
			if ($i ~ /^99\.000000%=/) { split($i, a, "="); p99 = a[2] }
		printf "%s|%s|%d|%.1f|%d\n", label, rw, iops, mean, p99
	}' >>$results
}

load 0 || { say "disks did not appear"; exit 1; }
vhost=$(disk_by_serial vhost-blk-demo)
qemu=$(disk_by_serial qemu-virtio-blk)
for rw in randread randwrite; do
	run "QEMU virtio-blk (aio=native, iothread)" "$qemu" $rw
	run "vhost-blk, guest blk-mq (use_bio=0)" "$vhost" $rw
done
rmmod virtio_blk_bio
load 1 || { say "disks did not appear with use_bio=1"; exit 1; }
vhost=$(disk_by_serial vhost-blk-demo)
for rw in randread randwrite; do
	run "vhost-blk, guest bio (use_bio=1)" "$vhost" $rw
done

echo
echo "4k random I/O, QD32, 1 job, ${runtime}s each; same null_blk disk in L2; completion latency"
awk -F'|' '
	{ lab[NR] = $1; rw[NR] = $2; iops[NR] = $3; mean[NR] = $4; p99[NR] = $5
	  if ($1 ~ /^QEMU/) base[$2] = $3 }
	END {
		printf "%-40s %-10s %8s %12s %10s %9s\n", "device / guest path", "workload",
			"IOPS", "mean (us)", "p99 (us)", "vs QEMU"
		for (i = 1; i <= NR; i++)
			printf "%-40s %-10s %8d %12.1f %10d %8.2fx\n", lab[i], rw[i], iops[i],
				mean[i], p99[i], base[rw[i]] ? iops[i] / base[rw[i]] : 0
	}' $results
