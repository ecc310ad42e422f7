#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# profile-test.sh: scripts/bench-profile.py on a fixture with known numbers,
# no VM. One row, one workload: a base run (1,000 I/Os) and two runs (9,000
# I/Os each) in one L2 boot, their windows' profiles at L3 and L2 addresses;
# the kernel's functions from L2's dump (or another log's, or a real
# System.map), an L3 kernel moved by KASLR (0x1000000 above L2's), a
# module function, a user-space block; in L2, user-space blocks named by
# file from the executable mappings L2 printed for each L3 guest (a block
# translated in an earlier guest's QEMU keeps that QEMU's address); a
# window the plugin dropped (not in windows.txt). Checks the names the
# addresses get and the per-I/O figures net of the base run, and --diff
# between two rows.
# Prints TAP-style "ok - " / "not ok - " lines (scripts/check.sh counts them).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
t=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$t"' EXIT
fail=0
ok() { echo "ok - bench profile: $*"; }
nok() { echo "not ok - bench profile: $*"; fail=1; }
check() { local desc=$1; shift; if "$@"; then ok "$desc"; else nok "$desc"; fi; }

rel=9.9.9-test-cloud-amd64
mkdir -p "$t/kernels/$rel/root/boot" "$t/res"
# Debian's System.map is a stub: the kernel's functions come from L2's dump
# (its boot at ffffffff81000000); L3 at another place, 0x1000000 up.
echo 'ffffffffffffffff B The real System.map is elsewhere' >"$t/kernels/$rel/root/boot/System.map-$rel"
ksym_dump() {
	echo "@@KSYM ffffffff81000000 _text@@"
	echo "@@KSYM ffffffff81001000 submit_bio@@"
	echo "@@KSYM ffffffff81002000 blk_mq_run@@"
}
{
	ksym_dump
	echo "@@KMOD 2 ffffffffc0100000 vhost_blk_handle [vhost_blk]@@"
	echo "@@KSYMS 2 $rel ffffffff81000000@@"
	echo "@@KMOD 3 ffffffffc0200000 vbb_queue_rq [virtio_blk_bio]@@"
	echo "@@KSYMS 3 $rel ffffffff82000000@@"
	for r in a b; do
		# each L3 guest's dump of L2's mappings; other lines come between
		echo "@@UMAP 1 init 00400000-00500000 r-xp 00001000 00:02 7 /init@@"
		echo "@@UMAP 1 init 7f0000003000-7f0000004000 r-xp 00000000 00:00 0 [vdso]@@"
		echo "@@KMOD 3 ffffffffc0200000 vbb_queue_rq [virtio_blk_bio]@@"
		[ $r = a ] && q=5555aaaa0000-5555aaab0000 || q=5555bbbb0000-5555bbbc0000
		echo "@@UMAP 300 qemu-system-x86 $q r-xp 00497000 00:02 9      /usr/bin/qemu-system-x86_64@@"
		echo "@@UMAP 300 qemu-system-x86 7f0000001000-7f0000002000 r-xp 00000000 00:00 0      [vdso]@@"
		echo "@@WIN ${r}0 nullb/$r wl base1@@"
		echo "@@WIN ${r}1 nullb/$r wl 1@@"
		echo "@@WIN ${r}2 nullb/$r wl 2@@"
	done
	echo "@@WIN a3 nullb/a wl 2@@"

} >"$t/res/attempt-1.log"
for r in a b; do
	printf 'nullb\t%s\twl\tbase1\t1\t1\t1\t1\t1000\n' $r >>"$t/res/runs-base.tsv"
	printf 'nullb\t%s\twl\t%s\t1\t1\t1\t1\t9000\n' $r 1 $r 2 >>"$t/res/runs.tsv"
done
# Row a, base run: 10,000 in submit_bio (L3), 5,000 in vbb_queue_rq, 2,000
# in user space, 3,000 in vhost_blk_handle (L2); each run: 90,000, 45,000,
# 18,000, 27,000. Net of the base, per I/O (9,000 - 1,000 I/Os): 10, 5, 2
# and 3. Row b: 16,000 more in submit_bio each run, 2 more per I/O.
prof() { # id sb vbb user vh
	printf 'P\t%s\t3\tffffffff82001010\t%s\n' "$1" "$2"
	printf 'P\t%s\t3\tffffffffc0200040\t%s\n' "$1" "$3"
	printf 'P\t%s\t3\t401000\t%s\n' "$1" "$4"
	printf 'P\t%s\t2\tffffffffc0100010\t%s\n' "$1" "$5"
	# L2: in the first QEMU's binary, in no mapping
	printf 'P\t%s\t2\t5555aaaa0010\t%s\n' "$1" "$6"
	printf 'P\t%s\t2\t7e0000000000\t%s\n' "$1" "$6"
}
{
	prof a0 10000 5000 2000 3000 1000
	prof a1 90000 45000 18000 27000 9000
	prof a2 90000 45000 18000 27000 9000
	prof b0 10000 5000 2000 3000 1000
	prof b1 106000 45000 18000 27000 9000
	prof b2 106000 45000 18000 27000 9000
	printf 'P\tzz\t3\tffffffff82001010\t999999\n'	# a window no run names
	prof a3 999999 0 0 0 0	# a window the plugin dropped
} >"$t/res/profile-1.tsv"
# make bench's join of the windows to the runs: a3 (a run measured again)
# is not there
for r in a b; do
	for n in 0 1 2; do
		rep=$n
		[ $n = 0 ] && rep=base1
		printf 'nullb/%s\twl\t%s\t1\t%s%s\t1\t1\t1\t0\t-\n' $r $rep $r $n
	done
done >"$t/res/windows.txt"

out=$(TEST_KERNELS_DIR=$t/kernels python3 "$top/scripts/bench-profile.py" "$t/res" --rows a 2>&1)
echo "$out" | sed 's/^/#   /'
check "L3's total per I/O, net of the base run" grep -q '^L3 guest: 17 instructions per I/O' <<<"$out"
check "a kernel function under KASLR is named" grep -q '^| 10 | 58.8 % | submit_bio |$' <<<"$out"
check "a module function is named with its module" grep -q '^| 5 | 29.4 % | vbb_queue_rq \[virtio_blk_bio\] |$' <<<"$out"
check "user space is one entry" grep -q '^| 2 | 11.8 % | \[user\] |$' <<<"$out"
check "areas" grep -q 'by area: kernel 10, virtio_blk_bio 5, user 2$' <<<"$out"
check "L2 at its own layout" grep -q '^| 3 | 60.0 % | vhost_blk_handle \[vhost_blk\] |$' <<<"$out"
check "L2's user space by file (the mappings L2 printed)" grep -q '^| 1 | 20.0 % | \[user: qemu-system-x86_64\] |$' <<<"$out"
check "L2's user space outside every mapping" grep -q '^| 1 | 20.0 % | \[user\] |$' <<<"$out"
check "the two runs and not the base are counted" grep -q '^## nullb/a, wl (2 runs)$' <<<"$out"
check "another row is left out when not asked for" test "$(grep -c '^## ' <<<"$out")" = 1
# a run without a dump: named from another log's (--ksyms), or from a
# real System.map
{ ksym_dump; echo "@@KSYMS 2 $rel ffffffff81000000@@"; } >"$t/dump.log"
sed -i '/^@@KSYM /d' "$t/res/attempt-1.log"
out=$(TEST_KERNELS_DIR=$t/kernels python3 "$top/scripts/bench-profile.py" "$t/res" --rows a 2>&1)
check "no dump, a stub System.map: the kernel's functions are not named" grep -q '| \[kernel, unknown\] |$' <<<"$out"
out=$(TEST_KERNELS_DIR=$t/kernels python3 "$top/scripts/bench-profile.py" "$t/res" --rows a --ksyms "$t/dump.log" 2>&1)
check "--ksyms: named from another boot's dump" grep -q '^| 10 | 58.8 % | submit_bio |$' <<<"$out"
printf 'ffffffff81000000 T _text\nffffffff81001000 T submit_bio\nffffffff81002000 t blk_mq_run\n' \
	>"$t/kernels/$rel/root/boot/System.map-$rel"
out=$(TEST_KERNELS_DIR=$t/kernels python3 "$top/scripts/bench-profile.py" "$t/res" --rows a 2>&1)
check "a real System.map: named from it" grep -q '^| 10 | 58.8 % | submit_bio |$' <<<"$out"
out=$(TEST_KERNELS_DIR=$t/kernels python3 "$top/scripts/bench-profile.py" "$t/res" --diff a b 2>&1)
echo "$out" | sed 's/^/#   /'
check "--diff: the difference per I/O by function" grep -q '^| 10 | 12 | +2 | submit_bio |$' <<<"$out"
check "--diff: the level totals" grep -q '^L3 guest: 19 against 17 (+2)$' <<<"$out"
check "--diff: a block of an earlier guest's QEMU keeps its file" grep -q '^| 1 | 1 | +0 | \[user: qemu-system-x86_64\] |$' <<<"$out"
exit $fail
