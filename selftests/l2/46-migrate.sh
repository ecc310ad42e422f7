#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# check: slow -- five L3 QEMUs (three migrations and a cancelled one) meet the nested-SVM flake of this host in most runs (an L3 reset or an L2 panic within seconds of an L3 start or a switch-over); run it with SLOW=1 or alone
# Live migration, in L2: one L3 guest on a vhost-user-blk disk (two
# vhost-blk-bridges on the same loop device, /dev/vhost-blk under each) is
# migrated from one stock QEMU to another and back; guest half:
# selftests/e2e/migrate-guest.sh. When the guest asks ("MIGRATE n"):
#  1. under fio, use_bio=0: first a migration cancelled half-way (the
#     bandwidth held low; the guest must carry on at the source), then one
#     that completes;
#  2. under fio, use_bio=1: back to the first bridge;
#  3. the guest idle.
# Each time a destination QEMU is started with -incoming on the other
# bridge, the source is migrated to it (QMP), and once the migration has
# completed the source quits and the mailbox disk says "MIGRATED-n". The
# guest checks every byte it wrote; here: every migration completed (the
# cancelled one did not), both bridges took the dirty log, vhost_blk failed
# no request, and the guest's last QEMU reports its exit status 0.
set -u
E2E=${E2E_DIR:-/src/selftests/e2e}
. /src/selftests/lib/migrate.sh
D=/tmp/migrate
fail=0
ok() { echo "ok - $*"; }
nok() { echo "not ok - $*"; fail=1; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }
# note TEXT: a comment line, also in L2's kernel log (kept if L2 dies).
note() { echo "# $*"; echo "46-migrate: $*" >/dev/kmsg 2>/dev/null; }

rm -rf $D; mkdir -p $D
pids=() l3pids=() loopdev=
cleanup() {
	local p
	# The L3 QEMUs first (an l3run killed leaves its QEMU running).
	for p in /proc/[0-9]*; do
		tr '\0' ' ' <$p/cmdline 2>/dev/null | grep -q "unix:$D/q" && kill -9 ${p#/proc/}
	done
	for p in "${l3pids[@]}" "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${l3pids[@]}" "${pids[@]}"; do wait "$p" 2>/dev/null; done
	[ -n "$loopdev" ] && losetup -d "$loopdev" 2>/dev/null
	rmmod vhost_blk 2>/dev/null
}
trap cleanup EXIT


qmp() { # QMP-SOCKET COMMAND-JSON...: the replies, after the handshake
	{ printf '{"execute":"qmp_capabilities"}\n'; printf '%s\n' "$@"; sleep 1; } |
		socat -t 2 - "UNIX-CONNECT:$1" 2>&1
}

# migration_status QMP: active, completed, failed, cancelled, ...
migration_status() {
	qmp "$1" '{"execute":"query-migrate"}' | grep -o '"status": "[a-z-]*"' |
		tail -n 1 | sed 's/.*: "\(.*\)"/\1/'
}

vm_status() {
	qmp "$1" '{"execute":"query-status"}' | grep -o '"status": "[a-z-]*"' |
		tail -n 1 | sed 's/.*: "\(.*\)"/\1/'
}

# start_qemu K BRIDGE [QEMU_ARGS...]: QEMU #K on BRIDGE's socket, QMP on
# $D/qK.qmp, its l3run output in $D/l3-K.out; sets out_K (the guest's
# output as it comes) once the run directory exists.
start_qemu() {
	local k=$1 br=$2 prev cur i
	shift 2
	prev=$(ls -d /tmp/l3run.* 2>/dev/null | sort -t. -k2 -n | tail -n 1)
	# (-s 0: a source QEMU keeps its guest paused after the switch-over.)
	# -svm: no nested state to move (6.12's KVM in L2 refuses to load the
	# one it saved: "Failed to set nested state").
	l3run -t 1500 -s 0 -m 512M $D/guest.sh -cpu host,-svm \
		-object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
		-chardev socket,id=c0,path=$D/$br.sock \
		-device vhost-user-blk-pci,chardev=c0,num-queues=2,id=vdisk \
		-drive file=$D/mbox.img,if=none,id=mb,format=raw,file.locking=off \
		-device virtio-blk-pci,drive=mb,serial=mig-mbox,id=vmbox \
		-qmp unix:$D/q$k.qmp,server=on,wait=off "$@" >$D/l3-$k.out 2>&1 &
	l3pid[$k]=$!
	l3pids+=($!)
	for i in $(seq 300); do
		cur=$(ls -d /tmp/l3run.* 2>/dev/null | sort -t. -k2 -n | tail -n 1)
		if [ -n "$cur" ] && [ "$cur" != "$prev" ] && [ -S $D/q$k.qmp ]; then
			out[$k]=$cur/output.log
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# wait_word K WORD: the guest on QEMU #K prints WORD (900 s at most).
wait_word() {
	local i
	for i in $(seq 1800); do
		grep -q "^$2" "${out[$1]}" 2>/dev/null && return 0
		kill -0 "${l3pid[$1]}" 2>/dev/null || return 1
		sleep 0.5
	done
	return 1
}

# migrate FROM TO: migrate QEMU #FROM to QEMU #TO (started with -incoming
# unix:$D/mig-TO.sock); the status it ended in.
migrate() {
	local i st
	qmp $D/q$1.qmp '{"execute":"migrate","arguments":{"uri":"unix:'$D'/mig-'$2'.sock"}}' >/dev/null
	for i in $(seq 600); do
		st=$(migration_status $D/q$1.qmp)
		case $st in completed|failed|cancelled) break ;; esac
		kill -0 "${l3pid[$1]}" 2>/dev/null || { st="lost (QEMU #$1 ended)"; break; }
		sleep 0.5
	done
	echo "$st"
}

set_params() { # QMP JSON-OBJECT
	qmp "$1" '{"execute":"migrate-set-parameters","arguments":'"$2"'}' >/dev/null
}



modprobe vhost_blk || { nok "modprobe vhost_blk"; exit 1; }
modprobe loop 2>/dev/null
truncate -s 256M $D/disk.img && truncate -s 1M $D/mbox.img &&
	loopdev=$(losetup -f --show $D/disk.img) || { nok "backing file and loop device"; exit 1; }
check "two bridges start on $loopdev" eval 'start_bridge a && start_bridge b' ||
	{ cat $D/*.log; exit 1; }
printf '#!/bin/sh\nexec bash %s/migrate-guest.sh\n' "$E2E" >$D/guest.sh

declare -A l3pid out moved
# Downtime: the guest pauses for the last pass; under TCG that takes longer
# than QEMU's 300 ms default, so allow 5 s.
fast='{"downtime-limit":5000,"max-bandwidth":1073741824}'
slow='{"downtime-limit":5000,"max-bandwidth":1048576}'
start_qemu 1 a || { nok "the first QEMU starts"; exit 1; }
cur=1 errs=0 steps=0
# phase:from-bridge:to-bridge
for step in 1:b 2:a 3:b; do
	phase=${step%%:*} to=${step#*:}
	if ! wait_word $cur "MIGRATE $phase"; then
		nok "the guest reaches phase $phase (on QEMU #$cur)"
		break
	fi
	next=$((cur + 1))
	# The guest's results so far, kept in L2's kernel log too.
	tr -d '\r' <"${out[$cur]}" | grep -E '^(not )?ok - ' | while IFS= read -r l; do
		echo "46-migrate: guest: $l" >/dev/kmsg 2>/dev/null
	done
	note "phase $phase: the guest on QEMU #$cur asks to migrate"
	if [ $phase = 1 ]; then
		# Cancelled half-way: the guest carries on at the source.
		start_qemu $next $to -incoming unix:$D/mig-$next.sock ||
			{ nok "QEMU #$next starts, incoming"; break; }
		set_params $D/q$cur.qmp "$slow"
		qmp $D/q$cur.qmp '{"execute":"migrate","arguments":{"uri":"unix:'$D'/mig-'$next'.sock"}}' >/dev/null
		sleep 4
		st1=$(migration_status $D/q$cur.qmp)
		qmp $D/q$cur.qmp '{"execute":"migrate_cancel"}' >/dev/null
		for i in $(seq 60); do
			st2=$(migration_status $D/q$cur.qmp)
			[ "$st2" = cancelled ] && break
			sleep 0.5
		done
		# The destination gives up on its own once the stream breaks.
		for i in $(seq 60); do kill -0 "${l3pid[$next]}" 2>/dev/null || break; sleep 0.5; done
		qmp $D/q$next.qmp '{"execute":"quit"}' >/dev/null 2>&1
		wait "${l3pid[$next]}" 2>/dev/null
		moved[$next]=1
		vs=$(vm_status $D/q$cur.qmp)
		check "phase $phase: a migration cancelled half-way ($st1, then $st2) leaves the guest running at the source ($vs)" \
			test "$st1" = active -a "$st2" = cancelled -a "$vs" = running
		next=$((next + 1))
	fi
	start_qemu $next $to -incoming unix:$D/mig-$next.sock ||
		{ nok "QEMU #$next starts, incoming"; break; }
	set_params $D/q$cur.qmp "$fast"
	t0=$(date +%s)
	note "phase $phase: migrating QEMU #$cur to #$next"
	st=$(migrate $cur $next)
	t1=$(date +%s)
	note "phase $phase: migration $st after $((t1 - t0)) s"
	for k in $cur $next; do
		[ -s "${out[$k]%/*}/qemu.log" ] && tail -n 3 "${out[$k]%/*}/qemu.log" |
			while IFS= read -r l; do note "QEMU #$k: $l"; done
	done
	vs=$(vm_status $D/q$next.qmp)
	check "phase $phase: migrated from QEMU #$cur to #$next (bridge $to): $st in $((t1 - t0)) s, the guest $vs there" \
		test "$st" = completed -a "$vs" = running
	if [ "$st" != completed ]; then
		qmp $D/q$cur.qmp '{"execute":"query-migrate"}' | tail -n 1 | sed 's/^/# /'
		break
	fi
	# The source's counters go with its session.
	e=$(ioerrs)
	[ "$e" -gt $errs ] && errs=$e
	qmp $D/q$cur.qmp '{"execute":"quit"}' >/dev/null
	wait "${l3pid[$cur]}" 2>/dev/null
	moved[$cur]=1
	mailbox MIGRATED-$phase
	cur=$next
	steps=$((steps + 1))
done
# The guest's last part, bounded: a run cut short above is stopped.
[ $steps = 3 ] || qmp $D/q$cur.qmp '{"execute":"quit"}' >/dev/null 2>&1
for i in $(seq 600); do
	kill -0 "${l3pid[$cur]}" 2>/dev/null || break
	sleep 1
done
kill -0 "${l3pid[$cur]}" 2>/dev/null && qmp $D/q$cur.qmp '{"execute":"quit"}' >/dev/null 2>&1
wait "${l3pid[$cur]}"
rc=$?
for k in $(seq 1 $cur); do
	[ -e $D/l3-$k.out ] && tr -d '\r' <$D/l3-$k.out
done >$D/guest.out
grep -E '^(not )?ok - ' $D/guest.out
grep -q '^not ok - ' $D/guest.out && fail=1
check "the guest's last QEMU (#$cur) reports its exit status 0 (got $rc)" \
	eval 'grep -q MIGRATE-DONE $D/guest.out && test $rc = 0'
for b in a b; do
	check "bridge $b took the dirty log of a migration (SET_LOG_BASE, VHOST_F_LOG_ALL)" \
		grep -q "dirty log:" $D/$b.log
done
e=$(ioerrs)
[ "$e" -gt $errs ] && errs=$e
check "vhost_blk failed no request ($errs I/O errors)" test "$errs" = 0
if [ $fail != 0 ]; then
	tail -n 30 $D/guest.out | sed 's/^/# L3: /'
	for b in a b; do grep -v ' <- ' $D/$b.log | tail -n 15 | sed "s/^/# bridge $b: /"; done
	for k in $(seq 1 $next); do
		[ -n "${out[$k]:-}" ] && [ -s "${out[$k]%/*}/qemu.log" ] &&
			sed "s/^/# QEMU #$k said: /" "${out[$k]%/*}/qemu.log" | tail -n 5
	done
	# A QEMU the guest left ends with no status, as the L3 flake does:
	# only the others' ends are shown as vmrun says them.
	for k in $(seq 1 $cur); do
		[ -e $D/l3-$k.out ] || continue
		if [ -n "${moved[$k]:-}" ]; then
			grep '^vmrun' $D/l3-$k.out | sed "s/^vmrun:/# QEMU #$k (the guest left it) ended:/"
		else
			grep '^vmrun' $D/l3-$k.out
		fi
	done
fi
exit $fail
