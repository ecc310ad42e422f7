#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# selftest-load.sh DEV ROW: the host-only row. vhost_blk_test's load mode plays the
# guest against /dev/vhost-blk on DEV (no VM); its result line is printed as a
# fio-shaped JSON block so the report treats it like fio's.
dev=$1 row=$2
reps=${REPS:-3}
if [ "${QUICK:-0}" = 1 ]; then secs=${RUNTIME:-2}; shapes="randread:32 randwrite:32"
else secs=${RUNTIME:-3}; shapes="randread:1 randwrite:1 randread:32 randwrite:32 randread:128 randwrite:128"; fi
what=--bdev; [ -f "$dev" ] && what=--file
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
ctxt() { awk '$1 == "ctxt" {print $2}' /proc/stat; }
# A cost window around each run where the vbcount plugin counts (workloads.sh).
mark=
command -v vbmark >/dev/null && mark=vbmark
winid() { local u; read -r u </proc/sys/kernel/random/uuid; u=${u//-/}; echo $((16#${u:0:15})); }
for s in $shapes; do
	rw=${s%%:*} qd=${s#*:}
	name=4k-$rw-qd$qd
	case " ${SKIP_WLS:-} " in *" $name "*) echo "# $row: $name already measured"; continue ;; esac
	[ -z "${WORKLOADS:-}" ] || case " $WORKLOADS " in *" $name "*) ;; *) continue ;; esac
	for rep in $(seq 1 "$reps"); do
		echo "@@START $row $name $rep@@"
		b0=$(busy) c0=$(ctxt) id=
		[ -n "$mark" ] && id=$(winid) && $mark open "$id"
		vhost_blk_test $what "$dev" --direct --load --rw "$rw" --qd "$qd" --bs 4096 \
			--seconds "$secs" >/tmp/load.out 2>&1
		[ -n "$id" ] && $mark close "$id"
		b1=$(busy) c1=$(ctxt)
		out=$(cat /tmp/load.out)
		line=$(echo "$out" | grep '^load: rw=')
		if [ -z "$line" ]; then
			echo "@@FAIL $row $name $rep $(echo "$out" | tail -n 2 | tr '\n' ' ')@@"; continue
		fi
		get() { echo "$line" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
		ios=$(get ios) iops=$(get iops) mib=$(get mib_s) avg=$(get avg) p99=$(get p99)
		dir=read; [ "$rw" = randwrite ] && dir=write
		other=write; [ $dir = write ] && other=read
		[ -n "$id" ] && echo "@@WIN $id $row $name $rep@@"
		echo "@@JSON $row $name $rep@@"
		awk -v d=$dir -v o=$other -v ios="$ios" -v iops="$iops" -v mib="$mib" -v avg="$avg" -v p99="$p99" 'BEGIN {
			printf "{\"jobs\":[{\"%s\":{\"total_ios\":%d,\"iops\":%s,\"bw\":%.0f,\"lat_ns\":{\"mean\":%.0f},", d, ios, iops, mib * 1024, avg * 1000
			printf "\"clat_ns\":{\"percentile\":{\"99.000000\":%.0f}}},\"%s\":{\"total_ios\":0}}]}\n", p99 * 1000, o }'
		echo "@@END@@"
		echo "@@CPU $row $name $rep $((b1 - b0))@@"
		echo "@@HOST $row $name $rep $((c1 - c0))@@"
	done
done
