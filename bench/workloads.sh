#!/bin/bash
# workloads.sh DEV ROW: run the benchmark workloads on DEV (in L2 or in an L3 guest)
# and print each fio JSON result between "@@JSON ROW WORKLOAD REP@@" and "@@END@@".
# Environment: QUICK=1 (fewer workloads, shorter runs), REPS (default 3),
# MEASURE_CPU=1 (also print "@@CPU ROW WORKLOAD REP BUSY_JIFFIES@@" from /proc/stat;
# in an L3 guest the L2 host measures instead, see l2-bench.sh).
dev=$1 row=$2
here=$(dirname "$0")
reps=${REPS:-3}
if [ "${QUICK:-0}" = 1 ]; then
	export RUNTIME=${RUNTIME:-2}
	wls="4k-rand:randread:32:1 4k-rand:randwrite:32:1 4k-rand:randread:16:8 16k-qd74:write"
else
	export RUNTIME=${RUNTIME:-4}
	wls="4k-rand:randread:1:1 4k-rand:randwrite:1:1 4k-rand:randread:32:1 4k-rand:randwrite:32:1
	     4k-rand:randread:128:1 4k-rand:randwrite:128:1 4k-rand:randread:16:8 4k-rand:randwrite:16:8
	     16k-qd74:randwrite 16k-qd74:write
	     aio-stress:write aio-stress:read aio-stress:randwrite aio-stress:randread"
fi
export RAMP=0 DEV=$dev

busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }

for wl in $wls; do
	IFS=: read -r job RW QD JOBS <<<"$wl"
	export RW QD=${QD:-1} JOBS=${JOBS:-1}
	case $job in
	4k-rand) name=4k-$RW-qd$QD; [ "$JOBS" != 1 ] && name=$name-j$JOBS ;;
	16k-qd74) name=16k-$RW-qd74 ;;
	aio-stress) name=aio-stress-8k-$RW-t64 ;;
	esac
	for rep in $(seq 1 "$reps"); do
		echo "@@START $row $name $rep@@"
		b0=$(busy)
		fio --output-format=json "$here/fio/$job.fio" >/tmp/fio.json 2>/tmp/fio.err
		rc=$?
		b1=$(busy)
		if [ $rc = 0 ]; then
			echo "@@JSON $row $name $rep@@"
			cat /tmp/fio.json
			echo "@@END@@"
			[ "${MEASURE_CPU:-0}" = 1 ] && echo "@@CPU $row $name $rep $((b1 - b0))@@"
		else
			echo "@@FAIL $row $name $rep fio exit $rc: $(tail -n 3 /tmp/fio.err | tr '\n' ' ')@@"
		fi
	done
done
exit 0
