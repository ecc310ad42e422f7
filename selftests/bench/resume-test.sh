#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# resume-test.sh: scripts/bench.sh's L2 boots and RESUME=, no VM. bench.sh runs
# in a scratch tree where scripts/vm.sh is a stand-in for L2: it plays
# bench/l2-bench.sh over three rows of two workloads from the FROM_ROW and
# FROM_DONE its run.sh gives, and "panics in nested KVM" (the console lines
# bench.sh looks for, exit 1) where a plan file tells it to. A run whose L2
# boots run out stops with its pass unfinished; RESUME= must refuse other
# sources, then go on at the row and workload where it stopped, with the
# run's settings and not the caller's, finish pass 1, run pass 2, and on a
# finished run boot nothing. A make bench stopped while its L2 ran: RESUME
# goes on after what that boot had finished. A row skipped twice: run again
# at the end, and by a RESUME if that fails too, or if make bench stopped
# during it.
# Prints TAP-style "ok - " / "not ok - " lines (scripts/check.sh counts them).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
t=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$t"' EXIT
fail=0
ok() { echo "ok - bench resume: $*"; }
nok() { echo "not ok - bench resume: $*"; fail=1; }
check() { local desc=$1; shift; if "$@"; then ok "$desc"; else nok "$desc"; fi; }

rel=9.9.9-test-cloud-amd64
mkdir -p "$t/scripts" "$t/bench" "$t/vhost_blk" "$t/build/kernels/$rel"
touch "$t/build/kernels/$rel/.complete"
cp "$top/scripts/bench.sh" "$top/scripts/lib.sh" "$t/scripts/"
cp "$top/bench/done-workloads.sh" "$t/bench/"
printf 'plugin:\n\t@true\n' >"$t/Makefile"
printf '#!/bin/sh\necho report >"$1/reported"\n' >"$t/scripts/bench-report.sh"
echo 'int x;' >"$t/vhost_blk/x.c"

# The stand-in L2. Plan file: one "ROW WORKLOAD" a line, where successive
# boots panic (a boot takes the first line left); boots.log: what each boot
# was told.
cat >"$t/scripts/vm.sh" <<'EOF'
#!/bin/bash
case " $* " in *" --print-accel "*) echo tcg; exit 0 ;; esac
name= script=
while [ $# -gt 0 ]; do
	case $1 in
	--name) name=$2; shift 2 ;;
	--kernel|--timeout|--mem|--smp|--plugin) shift 2 ;;
	*) script=$1; shift ;;
	esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
eval "$(grep '^export ' "$script")"
echo "FROM_ROW=$FROM_ROW FROM_DONE=$FROM_DONE ROWS=${ROWS:-} IOS=${IOS:-}" >>"$here/boots.log"
echo "SKIP_ROWS=$SKIP_ROWS ROWS=${ROWS:-} BACKENDS=${BACKENDS:-}" >>"$here/skips.log"
die=$(head -n 1 "$here/plan" 2>/dev/null)
sed -i 1d "$here/plan" 2>/dev/null
mkdir -p "$here/build/vm/$name"
: >"$here/build/vm/$name/console.log"
skipping=0
[ -n "$FROM_ROW" ] && skipping=1
for row in ${ROWS:-a b c}; do
	r=nullb/$row
	if [ $skipping = 1 ]; then
		[ "$r" = "$FROM_ROW" ] || continue
		skipping=0
	fi
	case " $SKIP_ROWS " in *" $r "*) echo "@@FAIL $r - not run@@"; continue ;; esac
	echo "# row $r"
	for wl in w1 w2; do
		[ "$r" = "$FROM_ROW" ] && case " $FROM_DONE " in *" $wl "*) continue ;; esac
		echo "@@JSON $r $wl 1@@"
		if [ "$die" = "$row $wl stop" ]; then
			# make bench itself stopped (^C) while this L2 runs
			kill -TERM "$PPID"
			sleep 1
			exit 137
		fi
		if [ "$die" = "$row $wl" ]; then
			printf 'Kernel panic - not syncing: stand-in\nComm: qemu-system-x86\n' \
				>"$here/build/vm/$name/console.log"
			exit 1
		fi
		printf '{}\n@@END@@\n'
	done
done
exit 0
EOF
chmod +x "$t/scripts/vm.sh" "$t/scripts/bench-report.sh"
git -C "$t" init -q && git -C "$t" add -A && git -C "$t" -c user.name=t -c user.email=t@t commit -qm t

bench() { (cd "$t" && env BUILD="$t/build" TEST_KERNELS_DIR="$t/build/kernels" KERNELS=$rel REPS=1 "$@" scripts/bench.sh >>"$t/bench.out" 2>&1); }

# Boot 1 panics in b/w2, boot 2 in c/w2: two boots allowed, pass 1 stops;
# pass 2 (its own rows) runs whole.
printf 'b w2\nc w2\nnone\nnone\n' >"$t/plan"
bench BENCH_L2_BOOTS=2 IOS=123 PASSES=2
rc=$?
res=$(ls -d "$t"/results/*-$rel 2>/dev/null | head -n 1)
check "a run whose L2 boots ran out fails" test "$rc" = 1
check "and says where its pass stopped" grep -q '^status 1 after L2 boot 2: the L2 kernel panicked' "$res/pass.status"
check "boot 2 went on in b after w1" grep -q '^FROM_ROW=nullb/b FROM_DONE=w1 ' "$t/boots.log"
check "pass 2 ran its own rows, with the run's IOS" \
	test "$(sed -n 3p "$t/boots.log")" = "FROM_ROW= FROM_DONE= ROWS=native qemu-native qsd vhost-blk-mq vhost-blk-bio IOS=123"
check "the sources it ran are recorded" grep -q '^sources [0-9a-f]\{16\}$' "$res/source"

# Other sources: refused, nothing booted.
echo 'int y;' >>"$t/vhost_blk/x.c"
bench RESUME="$res"
rc=$?
check "RESUME on changed sources is refused" test "$rc" = 1
check "with a reason" grep -q 'RESUME: the sources differ' "$t/bench.out"
check "and boots no L2" test "$(wc -l <"$t/boots.log")" = 3
git -C "$t" checkout -q vhost_blk/x.c

bench RESUME="$res" IOS=999 ROWS="a"
rc=$?
check "RESUME finishes the run" test "$rc" = 0
check "its first boot is boot 3 of the pass" test -e "$res/attempt-3.log"
check "boot 3 starts at c after w1, with the run's own IOS" \
	test "$(sed -n 4p "$t/boots.log")" = "FROM_ROW=nullb/c FROM_DONE=w1 ROWS= IOS=123"
check "the resume is in the results" grep -q '^RERUN nullb/c - this pass had stopped (status 1 after L2 boot 2: .*make bench RESUME= went on in a fresh L2 (boot 3) after the workloads the row had finished (w1)' "$res/reruns.txt"
for row in a b c; do
	check "pass 1 has row $row's workloads whole" \
		test "$(REPS=1 "$t/bench/done-workloads.sh" "$res/output.log" "nullb/$row" | tr '\n' ' ')" = "w1 w2 "
done
check "pass 1 is done" grep -q '^status 0 ' "$res/pass.status"
check "pass 2, done before, is not run again" grep -q '^bench: pass 2 was done' "$t/bench.out"
check "the report was made" test -e "$res/reported"

bench RESUME="$res"
rc=$?
check "RESUME of a finished run succeeds" test "$rc" = 0
check "and boots nothing" test "$(wc -l <"$t/boots.log")" = 4

# make bench stopped during boot 1, in b/w2: what that boot finished is
# not lost, and a RESUME goes on there.
rm -rf "$t/results" "$t/boots.log"
printf 'b w2 stop\nnone\nnone\n' >"$t/plan"
bench PASSES=1
rc=$?
res=$(ls -d "$t"/results/*-$rel 2>/dev/null | head -n 1)
check "make bench stopped: status 130, no pass status" test "$rc" = 130 -a ! -e "$res/pass.status"
bench RESUME="$res"
rc=$?
check "RESUME of a stopped run finishes it" test "$rc" = 0
check "starting at b after w1, in boot 2" test "$(sed -n 2p "$t/boots.log")" = "FROM_ROW=nullb/b FROM_DONE=w1 ROWS= IOS="
check "the stopped boot's runs are in the results" \
	test "$(REPS=1 "$t/bench/done-workloads.sh" "$res/output.log" nullb/a | tr '\n' ' ')" = "w1 w2 "

# Row b kills L2 twice with nothing finished: skipped, c runs, then b again
# in a boot of its own, at the end.
rm -rf "$t/results" "$t/boots.log" "$t/skips.log"
printf 'b w1\nb w1\nnone\nnone\n' >"$t/plan"
bench PASSES=1 BENCH_L2_BOOTS=6
rc=$?
res=$(ls -d "$t"/results/*-$rel 2>/dev/null | head -n 1)
check "a skipped row: the pass still ends well" test "$rc" = 0
check "boot 3 runs the rows after it" test "$(sed -n 3p "$t/skips.log")" = "SKIP_ROWS=nullb/b ROWS= BACKENDS="
check "boot 4 runs it alone at the end" test "$(sed -n 4p "$t/skips.log")" = "SKIP_ROWS= ROWS=b BACKENDS=nullb"
check "and it is whole in the results" \
	test "$(REPS=1 "$t/bench/done-workloads.sh" "$res/output.log" nullb/b | tr '\n' ' ')" = "w1 w2 "
check "the pass has no row left" grep -q '^status 0 after L2 boot 4$' "$res/pass.status"

# The retry fails too: the row is not run, and the pass says so; a RESUME
# tries it once more.
rm -rf "$t/results" "$t/boots.log" "$t/skips.log"
printf 'b w1\nb w1\nnone\nb w1\nnone\n' >"$t/plan"
bench PASSES=1 BENCH_L2_BOOTS=6
res=$(ls -d "$t"/results/*-$rel 2>/dev/null | head -n 1)
check "a retry that fails: the row is reported not run" grep -q '^status 0 after L2 boot 4; rows not run: nullb/b$' "$res/pass.status"
check "and no boot is spent on nothing" test "$(wc -l <"$t/boots.log")" = 4
bench RESUME="$res"
rc=$?
check "RESUME runs the row once more" test "$rc" = 0 -a "$(sed -n 5p "$t/skips.log")" = "SKIP_ROWS= ROWS=b BACKENDS=nullb"
check "and the pass is whole" test "$(cat "$res/pass.status")" = "status 0 after L2 boot 5"
check "b is whole in the results" \
	test "$(REPS=1 "$t/bench/done-workloads.sh" "$res/output.log" nullb/b | tr '\n' ' ')" = "w1 w2 "

# b and c each skipped; make bench stopped during the retry of b (after
# its w1): a RESUME goes on with that retry, then c's, and runs nothing of
# the pass's own rows again.
rm -rf "$t/results" "$t/boots.log" "$t/skips.log"
printf 'b w1\nb w1\nc w1\nc w1\nnone\nb w2 stop\nnone\nnone\n' >"$t/plan"
bench PASSES=1 BENCH_L2_BOOTS=8
res=$(ls -d "$t"/results/*-$rel 2>/dev/null | head -n 1)
bench RESUME="$res"
rc=$?
check "stopped in a retry: RESUME goes on with it" \
	test "$rc" = 0 -a "$(sed -n 7p "$t/boots.log")" = "FROM_ROW=nullb/b FROM_DONE=w1 ROWS=b IOS="
check "then the other skipped row" test "$(sed -n 8p "$t/boots.log")" = "FROM_ROW=nullb/c FROM_DONE= ROWS=c IOS="
check "and nothing else" test "$(wc -l <"$t/boots.log")" = 8
check "the pass is whole" test "$(cat "$res/pass.status")" = "status 0 after L2 boot 8"
[ $fail = 0 ] || { echo "# bench.sh's output:"; sed 's/^/#   /' "$t/bench.out"; }
exit $fail
