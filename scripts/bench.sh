#!/bin/bash
# bench.sh: make bench. Boots one L2 per kernel (KERNELS, default 6.12) and runs every
# benchmark row on the same backing device in that boot (bench/l2-bench.sh), then
# writes results/<date>-<kernel>/: fio's JSON per run, table.md, plots.
# QUICK=1: fewer workloads and shorter runs (about 10 minutes). REPS=N (default 3),
# ROWS="...", BACKENDS="nullb file" restrict what runs.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TOP"

kernels=${KERNELS:-6.12}
stamp=$(date +%Y%m%d-%H%M)
rc_all=0
for k in $kernels; do
	rel=$(kernel_rel "$k") || exit 1
	res=$TOP/results/$stamp-$rel
	mkdir -p "$res/json"
	{
		echo "export QUICK=${QUICK:-0} REPS=${REPS:-3}"
		[ -n "${ROWS:-}" ] && echo "export ROWS='$ROWS'"
		[ -n "${BACKENDS:-}" ] && echo "export BACKENDS='$BACKENDS'"
		echo "exec /src/bench/l2-bench.sh"
	} >"$res/run.sh"
	echo "bench: kernel $rel, QUICK=${QUICK:-0}, results in $res"
	start=$(date +%s)
	scripts/vm.sh --kernel "$rel" --name "bench-$rel" --timeout 5400 --mem 6G \
		"$res/run.sh" | tee "$res/output.log" |
		grep --line-buffered -E '^# |^@@(START|FAIL)' | sed -u 's/^@@START \(.*\)@@/  running \1/'
	vrc=${PIPESTATUS[0]}
	echo "bench: VM finished in $(($(date +%s) - start))s (status $vrc)"
	[ "$vrc" = 0 ] || rc_all=1
	# Split the fio JSON blocks out of the output.
	awk -v dir="$res/json" '
		/^@@JSON / { gsub(/@@/, ""); split($0, a, " "); f = a[2] "__" a[3] "__" a[4] ".json";
			gsub("/", "_", f); out = dir "/" f; next }
		/^@@END@@/ { close(out); out = ""; next }
		out != "" { print > out }' "$res/output.log"
	grep -h '^@@CPU ' "$res/output.log" | sed 's/@@//g' >"$res/cpu.txt"
	grep -h '^@@FAIL ' "$res/output.log" | sed 's/@@//g' >"$res/failures.txt"
	cp "$BUILD/vm/bench-$rel/console.log" "$res/l2-console.log" 2>/dev/null
	scripts/bench-report.sh "$res" || rc_all=1
	echo "bench: $res/table.md"
	cat "$res/targets.md" 2>/dev/null
done
exit $rc_all
