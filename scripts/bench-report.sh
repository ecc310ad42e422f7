#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# bench-report.sh RESULTS_DIR: summary.tsv, table.md (median of the repetitions,
# spread, ratios), targets.md and bar charts (gnuplot, SVG and PNG) from fio's JSON.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$1"
res=$(pwd)
reps=${REPS:-3}

# One line per run: backend row workload rep iops bw_kib lat_mean_us p99_us ios p50_us;
# the percentiles are of the whole latency, submission included (fio's
# lat_percentiles; completion latency only for a result without them).
# the cost base runs (rep "base1", "base2", ...; "base" in older results;
# bench/workloads.sh) in runs-base.tsv.
runs_tsv() { # dir
	local f base backend rest row wl rep out
	: >"$1/runs.tsv"
	: >"$1/runs-base.tsv"
	for f in "$1"/json/*.json; do
		[ -s "$f" ] || continue
		base=$(basename "$f" .json)
		backend=${base%%_*}; rest=${base#*_}; row=${rest%%__*}; rest=${rest#*__}
		wl=${rest%%__*}; rep=${rest##*__}
		out=$1/runs.tsv
		case $rep in base | base[0-9]*) out=$1/runs-base.tsv ;; esac
		jq -r --arg b "$backend" --arg r "$row" --arg w "$wl" --arg n "$rep" '
			.jobs[0] as $j
			| ([$j.read, $j.write] | map(select(.total_ios > 0))) as $d
			| if ($d | length) == 0 then empty else
			  [$b, $r, $w, $n,
			   ($d | map(.iops) | add),
			   ($d | map(.bw) | add),
			   (($d | map(.lat_ns.mean * .total_ios) | add) / ($d | map(.total_ios) | add) / 1000),
			   ($d | map(.lat_ns.percentile["99.000000"] // .clat_ns.percentile["99.000000"] // 0) | max / 1000),
			   ($d | map(.total_ios) | add),
			   ($d | map(.lat_ns.percentile["50.000000"] // .clat_ns.percentile["50.000000"] // 0) | max / 1000)] | @tsv end' "$f" >>"$out"
	done
}
runs_tsv .
[ -d pass2 ] && runs_tsv pass2

# The counted cost of an I/O (cost.tsv, cost.md, cost-targets.md), where the
# runs were counted (L2 under TCG with the vbcount plugin).
REPS=$reps python3 "$here/bench-cost.py" . || echo "bench-report: bench-cost.py failed" >&2

# Per I/O, from "CPU backend/row workload rep jiffies" (L2 CPU, USER_HZ = 100,
# in us), "KVM ... exits injections reqs batches" (the L3 guest's VM exits;
# vhost_blk's requests per completion batch) and "GUEST ... irqs kicks busy" (the L3
# guest's virtio-blk interrupts and notifications, and its own CPU time in
# jiffies from its /proc/stat); "-" if unknown.
touch cpu.txt kvm.txt guest.txt
awk -F'\t' -v OFS='\t' '
	function load(file, col, arr,   l, f, a) {
		while ((getline l < file) > 0) { split(l, f, " "); split(f[2], a, "/")
			arr[a[1] "|" a[2] "|" f[3] "|" f[4]] = f[col] }
		close(file) }
	function per(arr, k, scale, fmt) {
		if (!(k in arr) || arr[k] == "-" || arr[k] == "" || $9 <= 0) return "-"
		return sprintf(fmt, arr[k] * scale / $9) }
	BEGIN { load("cpu.txt", 5, cpu); load("kvm.txt", 5, ex); load("guest.txt", 5, irq)
		load("guest.txt", 6, kick); load("guest.txt", 7, gcpu)
		load("kvm.txt", 7, vreq); load("kvm.txt", 8, vbat) }
	{ k = $1 "|" $2 "|" $3 "|" $4
	  b = "-"
	  if ((k in vbat) && vbat[k] > 0) b = sprintf("%.1f", vreq[k] / vbat[k])
	  print $1, $2, $3, $4, $5, $6, $7, $8, $9, per(cpu, k, 10000, "%.1f"), per(ex, k, 1, "%.2f"), per(irq, k, 1, "%.2f"),
		per(kick, k, 1, "%.2f"), b, per(gcpu, k, 10000, "%.1f") }' runs.tsv >runs-cpu.tsv

# Median and spread per backend/row/workload.
sort -t$'\t' -k1,1 -k3,3 -k2,2 -k5,5g runs-cpu.tsv | awk -F'\t' -v OFS='\t' '
	function flush() {
		if (n == 0) return
		m = int((n + 1) / 2)
		print key[1], key[2], key[3], n, iops[m], iops[1], iops[n], bw[m], lat[m], p99[m], cpu[m],
			ex[m], irq[m], kick[m], bat[m], gcpu[m]
	}
	{ k = $1 FS $2 FS $3
	  if (k != prev) { flush(); n = 0; prev = k; split(k, key, FS) }
	  n++; iops[n] = $5; bw[n] = $6; lat[n] = $7; p99[n] = $8; cpu[n] = $10
	  ex[n] = $11; irq[n] = $12; kick[n] = $13; bat[n] = $14; gcpu[n] = $15 }
	END { flush() }' >summary.tsv

rows_order="native qemu-threads qemu-native qemu-io_uring vbb-mq-qemu qsd vhost-blk-mq vhost-blk-bio selftest-load"
{
	echo "# Benchmark results: $(basename "$res")"
	echo
	l3=$(awk '$1 == "SET" && $2 == "l3_cpus" { print $3; exit }' settings.txt 2>/dev/null || true)
	echo "L3 guests: ${l3:-${L3_CPUS:-2}} vCPU(s), as many queues per device."
	echo "Median of the repetitions; spread = (max - min) / median of IOPS. A row cut"
	echo "short by the nested-KVM flake says how many of the $reps runs it finished."
	echo "Ratios are of median IOPS, to L2 native and to QEMU aio=native, same backend and workload."
	echo "CPU = L2 (host) CPU time per I/O, whole VM, in microseconds; guest CPU = the L3 guest's"
	echo "own CPU time per I/O (its /proc/stat, all vCPUs), in microseconds. Per I/O of the L3 guest:"
	echo "exits = its VM exits (KVM's counter in L2), irq = its virtio-blk interrupts,"
	echo "kicks = its notifications to the device (virtio_blk_bio only); batch = requests"
	echo "vhost_blk retired per completion batch (one guest notification each). Values of the median run."
	for backend in $(cut -f1 summary.tsv | sort -u); do
		for wl in $(awk -F'\t' -v b="$backend" '$1 == b {print $3}' summary.tsv | sort -u); do
			echo
			echo "## $backend: $wl"
			echo
			echo "| row | IOPS | spread | MB/s | mean lat us | p99 lat us | CPU us/IO | guest CPU us/IO | exits/IO | irq/IO | kicks/IO | batch | x native | x aio=native |"
			echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
			nat=$(awk -F'\t' -v b="$backend" -v w="$wl" '$1 == b && $3 == w && $2 == "native" {print $5}' summary.tsv)
			qn=$(awk -F'\t' -v b="$backend" -v w="$wl" '$1 == b && $3 == w && $2 == "qemu-native" {print $5}' summary.tsv)
			for row in $rows_order; do
				awk -F'\t' -v b="$backend" -v w="$wl" -v r="$row" -v nat="${nat:-0}" -v qn="${qn:-0}" -v reps="$reps" '
					$1 == b && $3 == w && $2 == r {
						sp = 0; xn = "-"; xq = "-"
						if ($5 > 0) sp = ($7 - $6) * 100 / $5
						if (nat > 0) xn = sprintf("%.2f", $5 / nat)
						if (qn > 0) xq = sprintf("%.2f", $5 / qn)
						if ($4 < reps) r = r " (" $4 " of " reps " runs)"
						printf "| %s | %.0f | %.0f%% | %.1f | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s | %s |\n", r, $5, sp,
							$8 / 1024, $9, $10, $11, $16, $12, $13, $14, $15, xn, xq }' summary.tsv
			done
		done
	done
	if [ -s failures.txt ]; then
		echo
		echo "## Rows that did not run or did not finish"
		echo
		sed 's/^FAIL /- /' failures.txt
	fi
	if [ -s reruns.txt ]; then
		echo
		echo "## Rows run again (nested-SVM-under-TCG flake, see Documentation/testing.rst)"
		echo
		sed 's/^RERUN /- /' reruns.txt
	fi
	if [ -s cost.md ]; then
		echo
		cat cost.md
	fi
	if [ -s settings.md ]; then
		echo
		cat settings.md
	fi
} >table.md

# Targets of the project, each met or not, with the numbers. A counted run
# (L2 under TCG with the vbcount plugin: the "counted" marker scripts/bench.sh
# writes, or counts in cost.tsv) is judged on its counts; its IOPS and
# latency measure the emulator, so their targets are printed, not judged.
# IOPS targets are judged only where nothing was counted (KVM, no plugin).
counted=0
[ -e counted ] || [ -s cost.tsv ] && counted=1
# val BACKEND ROW WORKLOAD: "median-IOPS runs"
val() { awk -F'\t' -v b="$1" -v r="$2" -v w="$3" '$1 == b && $2 == r && $3 == w {print $5, $4}' summary.tsv; }
target() { # description numerator denominator threshold
	local d=$1 a=$2 b=$3 t=$4
	if [ -z "$a" ] || [ -z "$b" ]; then echo "- $d: not measured"; return; fi
	awk -v d="$d" -v a="$a" -v b="$b" -v t="$t" -v reps="$reps" -v counted=$counted 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		r = 0; v = "NOT MET"
		if (y[1] > 0) r = x[1] / y[1]
		if (r >= t) v = "MET"
		# a median of fewer runs than asked for decides nothing
		if (x[2] < reps || y[2] < reps)
			v = sprintf("INCOMPLETE (%d and %d of %d runs), neither met nor not met", x[2], y[2], reps)
		if (counted) v = "IOPS on TCG: not judged, see counts"
		printf "- %s: %.2fx (%.0f / %.0f IOPS), target %.2fx: %s\n", d, r, x[1], y[1], t, v }'
}
# lat BACKEND ROW WORKLOAD: "median-of-p50-latency-us runs"
lat() { awk -F'\t' -v b="$1" -v r="$2" -v w="$3" '$1 == b && $2 == r && $3 == w {print $10}' runs.tsv |
	sort -g | awk '{v[NR] = $1} END { if (NR) print v[int((NR + 1) / 2)], NR }'; }
lat_target() { # description numerator denominator
	local d=$1 a=$2 b=$3
	[ -n "$a" ] && [ -n "$b" ] || return 0
	awk -v d="$d" -v a="$a" -v b="$b" -v reps="$reps" -v counted=$counted 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		v = (x[1] <= y[1]) ? "MET" : "NOT MET"
		if (x[2] < reps || y[2] < reps)
			v = sprintf("INCOMPLETE (%d and %d of %d runs), neither met nor not met", x[2], y[2], reps)
		if (counted) v = "latency on TCG: not judged, see counts"
		printf "- %s: median latency %.0f us against %.0f us, target at most: %s\n", d, x[1], y[1], v }'
}
{
	echo "# Targets ($(basename "$res"))"
	echo
	if [ $counted = 1 ]; then
		echo "Counted (L2 under TCG, the vbcount plugin): the targets are judged on the"
		echo "counts; the IOPS and latency targets are informational (IOPS on TCG measure"
		echo "the emulator, not the code)."
	else
		echo "Not counted (KVM, no plugin): the targets are judged on IOPS and latency."
	fi
	# what was set for repeatable counts, flagged where it was not
	if [ $counted = 1 ] && [ -s settings.md ]; then
		echo
		cat settings.md
	fi
	if [ $counted = 1 ]; then
		echo
		echo "## On the counts (instructions and VM exits per I/O, whole machine; cost.tsv)"
		echo
		if [ -s cost-targets.md ]; then
			cat cost-targets.md
		else
			echo "- no counted run was joined to its fio result (windows.txt): no target judged"
		fi
	fi
	echo
	if [ $counted = 1 ]; then
		echo "## On IOPS and latency (same run; backend nullb): informational, not judged"
	else
		echo "## On IOPS and latency (same run; backend nullb)"
	fi
	echo
	for rw in randread randwrite; do
		for v in vhost-blk-mq vhost-blk-bio; do
			lat_target "$v vs QEMU aio=native, 4k-$rw-qd1" "$(lat nullb $v 4k-$rw-qd1)" "$(lat nullb qemu-native 4k-$rw-qd1)"
		done
	done
	for rw in randread randwrite; do
		w=4k-$rw-qd32
		for v in vhost-blk-mq vhost-blk-bio; do
			target "$v vs QEMU aio=native, $w" "$(val nullb $v $w)" "$(val nullb qemu-native $w)" 1.6
			target "$v vs qemu-storage-daemon, $w" "$(val nullb $v $w)" "$(val nullb qsd $w)" 1.4
		done
		target "selftest load vs fio native, $w" "$(val nullb selftest-load $w)" "$(val nullb native $w)" 0.8
	done
	for w in 4k-randread-qd16-j8 4k-randwrite-qd16-j8 aio-stress-8k-randread-t64 aio-stress-8k-randwrite-t64; do
		target "guest bio vs request path (vhost-blk), $w" "$(val nullb vhost-blk-bio $w)" "$(val nullb vhost-blk-mq $w)" 1.0
	done
	for w in 16k-write-qd74 aio-stress-8k-write-t64 aio-stress-8k-read-t64; do
		target "guest bio vs request path (vhost-blk), sequential $w" "$(val nullb vhost-blk-bio $w)" "$(val nullb vhost-blk-mq $w)" 0.97
	done
	for w in 4k-randread-qd32 4k-randwrite-qd32; do
		target "virtio_blk_bio request path vs stock virtio_blk (aio=native), $w" "$(val nullb vbb-mq-qemu $w)" "$(val nullb qemu-native $w)" 1.0
	done
} | grep -v ': not measured$' >targets.md || true

# Cost charts: instructions and exits per I/O by workload, a bar per row.
for dat in cost-*-insns.dat; do
	[ -e "$dat" ] || continue
	backend=${dat#cost-}; backend=${backend%-insns.dat}
	ncol=$(head -n 1 "$dat" | awk -F'\t' '{print NF}')
	for term in svg png; do
		case $term in
		svg) t="set terminal svg size 1400,1000 dynamic background '#ffffff'" ;;
		png) t="set terminal png size 1400,1000" ;;
		esac
		gnuplot <<GP
$t
set output 'cost-$backend.$term'
set multiplot layout 2,1 title "What an I/O costs, backend $backend ($(basename "$res")): whole machine, counted"
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key outside right top
set xtics rotate by -35 font ",9"
set grid ytics
set ylabel "thousand instructions per I/O"
plot for [i=2:$ncol] 'cost-$backend-insns.dat' using i:xtic(1) title columnheader(i)
set ylabel "L3 VM exits per I/O"
plot for [i=2:$ncol] 'cost-$backend-exits.dat' using i:xtic(1) title columnheader(i)
unset multiplot
GP
	done
done

# Bar charts: one per backend, workloads on x, a bar per row (median IOPS).
for backend in $(cut -f1 summary.tsv | sort -u); do
	present=$(for r in $rows_order; do awk -F'\t' -v b="$backend" -v r="$r" '$1 == b && $2 == r {print r; exit}' summary.tsv; done)
	{
		printf 'workload'; for r in $present; do printf '\t%s' "$r"; done; echo
		for wl in $(awk -F'\t' -v b="$backend" '$1 == b {print $3}' summary.tsv | sort -u); do
			printf '%s' "$wl"
			for r in $present; do
				v=$(awk -F'\t' -v b="$backend" -v w="$wl" -v r="$r" '$1 == b && $3 == w && $2 == r {print $5}' summary.tsv)
				printf '\t%s' "${v:-0}"
			done
			echo
		done
	} >"chart-$backend.dat"
	ncol=$(($(echo "$present" | wc -w) + 1))
	for term in svg png; do
		case $term in
		svg) t="set terminal svg size 1400,650 dynamic background '#ffffff'" ;;
		png) t="set terminal png size 1400,650" ;;
		esac
		gnuplot <<GP
$t
set output 'iops-$backend.$term'
set title "Median IOPS by workload, backend $backend ($(basename "$res"))"
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set key outside right top
set xtics rotate by -35 font ",9"
set ylabel "IOPS"
set grid ytics
plot for [i=2:$ncol] 'chart-$backend.dat' using i:xtic(1) title columnheader(i)
GP
	done
done
