#!/bin/bash
# workloads.sh DEV ROW [DEV2 ROW2]: run the benchmark workloads on DEV (in L2 or in
# an L3 guest) and print each fio JSON result between "@@JSON ROW WORKLOAD REP@@" and
# "@@END@@". With DEV2 ROW2 (two disks of one guest, the vhost-blk pair): every
# repetition of a workload runs on both, alternating which goes first (A B, B A,
# A B, ...), so a drift of this noisy host during the run falls on both rows alike.
# Environment: QUICK=1 (fewer workloads, shorter runs), REPS (default 3),
# SKIP_WLS="name ..." (workloads already measured: a row resumed after the flake),
# WORKLOADS="name ..." (only these; default all), RUNTIME (seconds a run),
# MEASURE_CPU=1 (also print "@@CPU ROW WORKLOAD REP BUSY_JIFFIES@@" from /proc/stat;
# in an L3 guest the L2 host measures instead, see l2-bench.sh). In an L3 guest also
# "@@GUEST ROW WORKLOAD REP IRQS KICKS BUSY@@": virtio-blk queue interrupts, driver
# notifications (virtio_blk_bio's driver_stats; "-" for other drivers) and the
# guest's own busy jiffies (/proc/stat, all vCPUs).
dev=$1 row=$2 dev2=${3:-} row2=${4:-}
here=$(dirname "$0")
reps=${REPS:-3}
if [ "${QUICK:-0}" = 1 ]; then
	export RUNTIME=${RUNTIME:-2}
	wls="4k-rand:randread:32:1 4k-rand:randwrite:32:1 4k-rand:randread:16:8 16k-qd74:write"
else
	export RUNTIME=${RUNTIME:-3}
	wls="4k-rand:randread:1:1 4k-rand:randwrite:1:1 4k-rand:randread:32:1 4k-rand:randwrite:32:1
	     4k-rand:randread:128:1 4k-rand:randwrite:128:1 4k-rand:randread:16:8 4k-rand:randwrite:16:8
	     16k-qd74:randwrite 16k-qd74:write
	     aio-stress:write aio-stress:read aio-stress:randwrite aio-stress:randread"
fi
export RAMP=0

busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
# In an L3 guest: interrupts of the virtio-blk request queues, and the kicks
# (notifications) virtio_blk_bio sent; "-" where the driver does not count.
virq() { awk '/virtio[0-9]+-req/ { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) n += $i; seen = 1 }
	END { print seen ? n : "-" }' /proc/interrupts; }
kicks() { # dev
	awk '$1 == "notifies" { print $2; f = 1 } END { if (!f) print "-" }' \
		"/sys/block/${1#/dev/}/driver_stats" 2>/dev/null || echo -; }

run_one() { # dev row name rep
	local d=$1 r=$2 name=$3 rep=$4 b0 b1 q0 q1 k0 k1 k rc
	echo "@@START $r $name $rep@@"
	b0=$(busy) q0=$(virq) k0=$(kicks "$d")
	DEV=$d fio --output-format=json "$here/fio/$job.fio" >/tmp/fio.json 2>/tmp/fio.err
	rc=$?
	b1=$(busy) q1=$(virq) k1=$(kicks "$d")
	if [ $rc = 0 ]; then
		echo "@@JSON $r $name $rep@@"
		# One line, indentation dropped: in an L3 guest every byte
		# is a VM exit on the serial port (6.7 KB -> 4.3 KB a run).
		sed -n '/^{/,$ s/^[[:space:]]*//p' /tmp/fio.json | tr -d '\n'
		echo
		echo "@@END@@"
		[ "${MEASURE_CPU:-0}" = 1 ] && echo "@@CPU $r $name $rep $((b1 - b0))@@"
		if [ "${MEASURE_CPU:-0}" != 1 ] && [ "$q0" != - ]; then
			k=-; [ "$k0" != - ] && [ "$k1" != - ] && k=$((k1 - k0))
			echo "@@GUEST $r $name $rep $((q1 - q0)) $k $((b1 - b0))@@"
		fi
	else
		echo "@@FAIL $r $name $rep fio exit $rc: $(tail -n 3 /tmp/fio.err | tr '\n' ' ')@@"
	fi
}

for wl in $wls; do
	IFS=: read -r job RW QD JOBS <<<"$wl"
	export RW QD=${QD:-1} JOBS=${JOBS:-1}
	case $job in
	4k-rand) name=4k-$RW-qd$QD; [ "$JOBS" != 1 ] && name=$name-j$JOBS ;;
	16k-qd74) name=16k-$RW-qd74 ;;
	aio-stress) name=aio-stress-8k-$RW-t64 ;;
	esac
	case " ${SKIP_WLS:-} " in *" $name "*) echo "# $row: $name already measured"; continue ;; esac
	[ -z "${WORKLOADS:-}" ] || case " $WORKLOADS " in *" $name "*) ;; *) continue ;; esac
	for rep in $(seq 1 "$reps"); do
		if [ -z "$dev2" ]; then
			run_one "$dev" "$row" "$name" "$rep"
		elif [ $((rep % 2)) = 1 ]; then
			run_one "$dev" "$row" "$name" "$rep"
			run_one "$dev2" "$row2" "$name" "$rep"
		else
			run_one "$dev2" "$row2" "$name" "$rep"
			run_one "$dev" "$row" "$name" "$rep"
		fi
	done
done
exit 0
