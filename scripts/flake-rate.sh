#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# flake-rate.sh: how often nested KVM kills or wedges an L2 on this host (make
# flake-rate), measured under the L3 load make bench and make check put on it.
#
# usage: scripts/flake-rate.sh [--minutes N] [--kernel 6.1|6.12|7.3|REL] [--label NAME]
#            [--rows "virtio-blk vhost-blk"] [--l3-cpus N] [--cpu MODEL]
#            [--tcg-thread multi|single] [--l1-qemu trixie-backports]
#            [--kvm PARAMS] [--kvm-amd PARAMS] [--thp MODE]
#
# For N minutes (default 30) L2s boot one after another; each starts L3 guests
# back to back (selftests/flake/l2-load.sh: 30 s of 4k random fio per guest,
# QEMU's virtio-blk and vhost_blk through the bridge in turn) until the time is
# up or it dies. Each L2 is watched and its end told by the rules make check
# uses (scripts/lib.sh: l2_watch, l2_death): a panic in nested KVM, a wedge
# (soft lockup in the L3 guest's QEMU, a vCPU lost in L3, a frozen L2), a
# silent reset. A fresh L2 replaces a dead one. At the end it prints the setup
# (L1 QEMU and its command line, the L2 kernel, CPU model and flags, the kvm
# and kvm_amd parameters, the L3 QEMU command line), each L2 end with its
# signature, and the rates: L2 deaths and wedges per L3-hour, and L3 guests
# that reset or stopped on their own (the form of the flake run-tests.sh
# retries). L3 time is counted from the kernel log's l3run markers, up to
# the L2's last kernel line when it died. Results: build/flake-rate/LABEL-DATE/
# (summary.txt, each L2's console and output).
#
# The options change one thing at a time: --cpu and --tcg-thread the L1 QEMU
# that runs L2 (scripts/vm.sh), --l1-qemu trixie-backports that QEMU itself:
# Debian 13's backported one (11.1 today), installed with mmdebstrap into
# build/rootfs/qemu-l1 from the machine's own apt sources and run there under
# that release's dynamic loader (nothing on the machine changes), --kvm/--kvm-amd the module parameters L2
# reloads kvm/kvm_amd with, --thp L2's transparent_hugepage mode, --l3-cpus
# the L3 guests' vCPUs. Not a test: it never fails on a death, it counts them.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
cd "$TOP"

minutes=30 kernel=6.12 label=base rows="virtio-blk vhost-blk" l3c=2 kvm= kvm_amd= thp=
vmargs=() l1=
while [ $# -gt 0 ]; do
	case $1 in
	--minutes) minutes=$2; shift 2 ;;
	--kernel) kernel=$2; shift 2 ;;
	--label) label=$2; shift 2 ;;
	--rows) rows=$2; shift 2 ;;
	--l3-cpus) l3c=$2; shift 2 ;;
	--cpu) vmargs+=(--cpu "$2"); shift 2 ;;
	--tcg-thread) vmargs+=(--tcg-thread "$2"); shift 2 ;;
	--l1-qemu) l1=$2; shift 2 ;;
	--kvm) kvm=$2; shift 2 ;;
	--kvm-amd) kvm_amd=$2; shift 2 ;;
	--thp) thp=$2; shift 2 ;;
	-h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "flake-rate.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
done
case $minutes in ''|*[!0-9]*) echo "flake-rate.sh: --minutes takes a whole number" >&2; exit 2 ;; esac

# l1_qemu SUITE: make (once) a rootfs with SUITE's QEMU and print a wrapper
# that runs it here: its dynamic loader, libraries and firmware.
l1_qemu() {
	local r=$BUILD/rootfs/qemu-l1 w=$BUILD/rootfs/qemu-l1.sh uri
	case $1 in
	trixie-backports) ;;
	*) echo "flake-rate.sh: --l1-qemu takes trixie-backports" >&2; return 1 ;;
	esac
	if [ ! -x "$r/usr/bin/qemu-system-x86_64" ]; then
		uri=$(debian_uri | head -n 1)
		[ -n "$uri" ] || { echo "flake-rate.sh: no Debian suite in the apt sources" >&2; return 1; }
		command -v mmdebstrap >/dev/null ||
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap >&2
		rm -rf "$r.tmp"
		mmdebstrap --quiet --variant=apt --aptopt='APT::Default-Release "trixie-backports"' \
			--include=qemu-system-x86,seabios trixie "$r.tmp" \
			"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri trixie main" \
			"deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri trixie-backports main" >&2 &&
			mv "$r.tmp" "$r" || { rm -rf "$r.tmp"; return 1; }
	fi
	printf '#!/bin/sh\nexec "%s" --library-path "%s:%s" "%s" -L "%s" -L "%s" "$@"\n' \
		"$r/usr/lib64/ld-linux-x86-64.so.2" "$r/lib/x86_64-linux-gnu" "$r/usr/lib/x86_64-linux-gnu" \
		"$r/usr/bin/qemu-system-x86_64" "$r/usr/share/qemu" "$r/usr/share/seabios" >"$w"
	chmod +x "$w"
	echo "$w"
}
l1bin=qemu-system-x86_64
if [ -n "$l1" ]; then
	l1bin=$(l1_qemu "$l1") || exit 1
	vmargs+=(--qemu "$l1bin")
fi

res=$BUILD/flake-rate/$label-$(date +%Y%m%d-%H%M%S)
mkdir -p "$res"
sum=$res/summary.txt
deadline=$(($(date +%s) + minutes * 60))
boot=0

# l3_times CONSOLE: one line per L3 guest of an L2's kernel log, "ROW STATUS
# SECONDS" (STATUS "-" for a guest still running when the log ends; its
# time runs to the log's last line).
l3_times() {
	awk '
	match($0, /^\[ *[0-9]+\.[0-9]+\]/) { t = substr($0, 2, RLENGTH - 2) + 0; last = t }
	/flake-rate: row / { row = $NF; next }
	/l3run: L3 guest #[0-9]+ starting/ { start = t; on = 1; next }
	/l3run: L3 guest #[0-9]+ ended/ {
		if (on) { st = $0; sub(/.*status /, "", st); sub(/\).*/, "", st)
			printf "%s %s %d\n", row, st, t - start }
		on = 0; next }
	END { if (on) printf "%s - %d\n", row, last - start }' "$1"
}

# signature CONSOLE: the first line that names how a dead L2 died.
signature() {
	grep -E -m 1 'Kernel panic - not syncing|soft lockup - CPU|INFO: task khugepaged|BUG: |general protection fault' "$1" |
		sed 's/^\[ *[0-9.]*\] //' | cut -c1-160
}

{
	echo "# make flake-rate: $minutes minutes on $kernel ($label), $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "L1: $("$l1bin" --version | head -n 1); host CPU: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1), $(nproc) CPUs"
	echo "options: rows=\"$rows\" l3-cpus=$l3c kvm=\"$kvm\" kvm-amd=\"$kvm_amd\" thp=\"$thp\" ${vmargs[*]}"
} | tee "$sum"

while [ $(($(date +%s) + 120)) -lt $deadline ]; do
	boot=$((boot + 1))
	secs=$((deadline - $(date +%s)))
	name=flake-rate-$boot
	printf 'export SECS=%s ROWS="%s" L3C=%s KVM="%s" KVM_AMD="%s" THP="%s" TEST_TIMEOUT=%s\nexec /src/selftests/lib/run-tests.sh /src/selftests/flake/l2-load.sh\n' \
		"$secs" "$rows" "$l3c" "$kvm" "$kvm_amd" "$thp" $((secs + 600)) >"$res/run-$boot.sh"
	rm -f "$BUILD/vm/$name/console.log" "$BUILD/vm/$name/l3-console.log"
	t0=$(date +%s)
	scripts/vm.sh --kernel "$kernel" --name "$name" --timeout $((secs + 900)) \
		${vmargs[@]+"${vmargs[@]}"} "$res/run-$boot.sh" >"$res/l2-$boot.log" 2>&1 &
	vpid=$!
	l2_watch "$name" $vpid "$res/l2-$boot.wedged"
	wait $vpid
	rc=$?
	cp "$BUILD/vm/$name/console.log" "$res/console-$boot.log" 2>/dev/null
	cp "$BUILD/vm/$name/qemu.cmdline" "$res/qemu-$boot.cmdline" 2>/dev/null
	l3_times "$res/console-$boot.log" >"$res/l3-$boot.txt"
	if why=$(l2_death "$name" "$rc" "$res/l2-$boot.log" "$res/l2-$boot.wedged"); then
		end="died: $why; $(signature "$res/console-$boot.log")"
	elif [ $rc = 0 ]; then
		end="ran its time out"
	else
		end="ended otherwise (status $rc): $(grep -m 1 '^vmrun: ' "$res/l2-$boot.log")"
	fi
	echo "$end" >"$res/end-$boot.txt"
	echo "L2 boot $boot: $(($(date +%s) - t0)) s, $(wc -l <"$res/l3-$boot.txt") L3 guests, $end" | tee -a "$sum"
	# (a run that fails on its own, not in nested KVM, would only repeat)
	case $end in "ended otherwise"*) break ;; esac
done

first=$res/console-1.log
{
	echo "## Setup"
	echo "L1 QEMU command line: $(cut -c1-400 "$res/qemu-1.cmdline" 2>/dev/null)"
	grep -h 'flake-rate: setup: ' "$first" 2>/dev/null | sed 's/^\[ *[0-9.]*\] flake-rate: setup: /  /' | awk '!seen[$0]++'
	echo "## L3 guests by row (status: count; 0 = ran to its end, 125 = reset itself, 124 = stopped or hung, - = its L2 died)"
	cat "$res"/l3-*.txt 2>/dev/null | awk '
	{ n[$1]++; s[$1] += $3; st[$1 " " $2]++ }
	END { for (r in n) { line = sprintf("  %-10s %4d guests, %6.1f L3-minutes; status", r, n[r], s[r] / 60)
		for (k in st) { split(k, a, " "); if (a[1] == r) line = line sprintf(" %s: %d", a[2], st[k]) }
		print line } }'
	l3s=$(cat "$res"/l3-*.txt 2>/dev/null | awk '{ s += $3 } END { print s + 0 }')
	deaths=$(grep -l '^died: ' "$res"/end-*.txt 2>/dev/null | wc -l)
	wedges=$(grep -l '^died: L2 \(wedged\|froze\)' "$res"/end-*.txt 2>/dev/null | wc -l)
	l3bad=$(cat "$res"/l3-*.txt 2>/dev/null | awk '$2 == 124 || $2 == 125 { n++ } END { print n + 0 }')
	echo "## Rate"
	awk -v s="$l3s" -v d="$deaths" -v w="$wedges" -v b="$l3bad" -v boots="$boot" 'BEGIN {
		h = s / 3600
		printf "%d L2 boots, %.1f L3-minutes: %d L2 deaths (%d of them wedges): %s per L3-hour; %d L3 guests reset or stopped: %s per L3-hour\n",
			boots, s / 60, d, w, (h > 0) ? sprintf("%.2f", d / h) : "n/a", b, (h > 0) ? sprintf("%.2f", b / h) : "n/a" }'
	echo "Results: $res"
} | tee -a "$sum"
