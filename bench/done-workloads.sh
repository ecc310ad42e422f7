#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# done-workloads.sh LOG ROW [ROW2]: the workloads of ROW (and of ROW2 too, if
# given) that LOG already holds REPS (default 3) whole results for: an
# "@@JSON ROW WORKLOAD REP@@" line, one line of JSON, "@@END@@". A run cut short
# (its guest or L2 died while printing it) does not count. One name a line.
# A row interrupted by the nested-KVM flake resumes after these
# (workloads.sh SKIP_WLS) instead of from its first workload.
log=$1 row=$2 row2=${3:-}
awk -v reps="${REPS:-3}" -v r1="$row" -v r2="$row2" '
	/^@@JSON / { s = $0; gsub(/@@/, "", s); split(s, a, " ")
		if (a[4] ~ /^base[0-9]*$/) { state = 0; next }	# a cost base run, not a repetition
		cur = a[2] " " a[3] " " a[4]; state = 1; next }
	state == 1 && /^\{.*\}$/ { state = 2; next }
	/^@@END@@/ { if (state == 2) done[cur] = 1 }
	{ state = 0; cur = "" }
	END {
		for (k in done) { split(k, a, " "); n[a[1] " " a[2]]++ }
		for (k in n) {
			split(k, a, " ")
			if (a[1] != r1 || n[k] < reps) continue
			if (r2 != "" && n[r2 " " a[2]] < reps) continue
			print a[2]
		}
	}' "$log" | sort
