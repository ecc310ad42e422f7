#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""bench-cost.py RESULTS_DIR: what an I/O costs, from make bench's counted runs.

Inputs (written by scripts/bench.sh into RESULTS_DIR and, for a second pass in
a fresh L2 boot, RESULTS_DIR/pass2): runs.tsv (one line per fio run, from its
JSON; bench-report.sh), windows.txt (the vbcount plugin's counts joined to the
runs: row workload rep boot id insns exits ns l1_other), guest.txt (the L3
guest's queue interrupts, kicks, busy time and timer interrupts), host.txt (L2's context switches), kvm.txt
(KVM's counters in L2: the L3 guest's HLT exits and exits for L2's own
interrupts; vhost_blk's requests, completion batches, waits for the
guest's burst and looks at the ring during them),
settings.txt and idle.txt (L2's halt polling, the L3 guests' idle loop).

Outputs in RESULTS_DIR:
  cost-runs.tsv  one line per counted run, both passes
  cost.tsv       per backend/row/workload: medians of pass 1, spreads, and
                 the median and spread across L2 boots
  cost.md        the cost tables, the seeds' tables, repeatability (table.md
                 includes it)
  cost-targets.md  the targets judged on the counts
  settings.md    what was set for repeatable counts (L2 halt polling, the L3
                 guests' idle loop), flagged where it was not
  cost-<backend>.dat  chart data (insns/IO and exits/IO by workload and row)

Environment: EXIT_COST (instruction equivalents of one VM exit on real
hardware, default 2000; Documentation/benchmarks.rst says where it comes
from), BUSY_CPUS (host CPUs used by others during a window above which its
count is marked as taken on a busy box, default 0.25), REPS (default 3).
"""
import math
import os
import re
import statistics
import sys

ROWS_ORDER = ["native", "qemu-threads", "qemu-native", "qemu-io_uring",
              "vbb-mq-qemu", "qsd", "vhost-blk-mq", "vhost-blk-bio",
              "selftest-load"]
EXIT_COST = float(os.environ.get("EXIT_COST", "2000"))
BUSY_CPUS = float(os.environ.get("BUSY_CPUS", "0.25"))
REPS = int(os.environ.get("REPS", "3"))
# How far apart a row's insns/IO may be, measured twice in one L2 boot
# (ROW@2), for the counts of the run to be called repeatable (issue 13: 5 %
# at most, on an idle box).
REPEAT_PCT = 5.0


# Rows whose L3 guest's idle loop polled ("IDLE backend/row driver governor
# on" in idle.txt, bench/workloads.sh): set by settings_md.
POLLING = set()


def row_key(row):
    base, _, again = row.partition("@")
    i = ROWS_ORDER.index(base) if base in ROWS_ORDER else len(ROWS_ORDER)
    return (i, again, row)


def read_lines(path):
    try:
        with open(path) as f:
            return [l.rstrip("\n") for l in f if l.strip()]
    except OSError:
        return []


def split_row(r):
    """'nullb/vhost-blk-mq' -> ('nullb', 'vhost-blk-mq')"""
    b, _, row = r.partition("/")
    return b, row


def is_base(rep):
    return re.fullmatch(r"base[0-9]*", rep) is not None


COUNTS = ("insns", "exits", "l3insns", "irqs", "kicks", "wakeups", "halts",
          "hirqs", "ticks")


def median_base(ws):
    """The median of each count over a workload's base runs of one boot
    (None without any), how many there were, and the spread of their exits:
    the fixed part of a run varies by far more than one I/O, and one base
    run, subtracted from every run of the workload, would move them all."""
    if not ws:
        return None
    m = {"runs": len(ws), "ios": statistics.median_low(x["ios"] for x in ws),
         "exits_spread": spread([x["exits"] for x in ws])}
    for n in COUNTS:
        m[n] = med([x[n] for x in ws])
    return m


def fio_runs(d):
    """The fio runs of a pass directory (runs.tsv, runs-base.tsv), by
    (backend, row, workload, rep): IOPS, latencies and I/Os."""
    fio = {}
    for name in ("runs.tsv", "runs-base.tsv"):
        for l in read_lines(os.path.join(d, name)):
            f = l.split("\t")
            if len(f) < 9:
                continue
            fio[(f[0], f[1], f[2], f[3])] = {
                "iops": float(f[4]), "lat_us": float(f[6]),
                "p99_us": float(f[7]), "ios": int(float(f[8]))}
    return fio


def load_pass(d, pas):
    """Counted runs of one pass directory, as dicts, each per I/O net of its
    workload's base runs (the same fio job with an eighth of the I/Os):
    (count - base count) / (I/Os - base I/Os), base the median of the base
    runs of the same L2 boot, takes what every run costs besides its I/Os
    (fio's start and exit, the queue filling and draining) out of the
    figure. Without a base run: count / I/Os, said as such."""
    fio = fio_runs(d)
    extra = {}
    # kvm.txt before HLT and interrupt exits were recorded has four
    # figures: the ones it lacks are unknown.
    for name, fields, least in (
            ("guest.txt", ("irqs", "kicks", "gbusy", "ticks"), 2),
            ("host.txt", ("wakeups",), 1),
            ("kvm.txt", ("kvm_exits", "injections", "vreqs", "vbatches",
                         "halts", "hirqs", "vwaits", "vlooks"), 4)):
        for l in read_lines(os.path.join(d, name)):
            f = l.split()
            if len(f) < 4 + least:
                continue
            b, row = split_row(f[1])
            k = (b, row, f[2], f[3])
            for i, n in enumerate(fields):
                v = f[4 + i] if 4 + i < len(f) else "-"
                extra.setdefault(k, {})[n] = None if v == "-" else float(v)
    # A row resumed in a fresh L2 after the flake runs a workload again:
    # its later run (a later L2 boot, later in the file) is the one whose
    # fio result was kept, so the later window wins.
    raw = {}
    # The base runs of a workload ("base1", "base2", ...; "base" in older
    # results), by boot: a run's base is the median of its boot's, so base
    # windows of every boot are kept, each boot's runs netted against its
    # own.  The other figures (guest.txt, kvm.txt, ...) name no boot: only
    # the latest window of a base has them.
    bases = {}
    for l in read_lines(os.path.join(d, "windows.txt")):
        f = l.split("\t")
        if len(f) < 9:
            continue
        b, row = split_row(f[0])
        k = (b, row, f[1], f[2])
        if k not in fio or fio[k]["ios"] <= 0:
            continue
        x = extra.get(k, {})
        w = {"boot": f[3], "insns": int(f[5]), "exits": int(f[6]),
             "ns": int(f[7]), "l1_other": float(f[8]),
             "l3insns": int(f[9]) if len(f) > 9 and f[9] != "-" else None,
             "ios": fio[k]["ios"], "irqs": x.get("irqs"),
             "kicks": x.get("kicks"), "wakeups": x.get("wakeups"),
             "halts": x.get("halts"), "hirqs": x.get("hirqs"),
             "ticks": x.get("ticks"), "vreqs": x.get("vreqs"),
             "vbatches": x.get("vbatches"),
             "vwaits": x.get("vwaits"), "vlooks": x.get("vlooks")}
        if is_base(k[3]):
            if k in raw:	# an earlier boot's: its figures were not its own
                for n in COUNTS[3:]:
                    raw[k][n] = None
            bases.setdefault(k[:3] + (w["boot"],), {})[k[3]] = w
        raw[k] = w
    bases = {k: list(v.values()) for k, v in bases.items()}
    runs = []
    for k, w in raw.items():
        b, row, wl, rep = k
        if is_base(rep):
            continue
        base = median_base([x for x in bases.get((b, row, wl, w["boot"]), [])
                            if x["ios"] < w["ios"]])
        ios = w["ios"] - (base["ios"] if base else 0)

        def net(n):
            if w[n] is None:
                return None
            if base is None:
                return w[n] / ios
            if base[n] is None:
                return None
            return (w[n] - base[n]) / ios

        run = {
            "pass": pas, "backend": b, "row": row, "wl": wl, "rep": rep,
            "boot": "%d.%s" % (pas, w["boot"]), "ios": w["ios"],
            "net_ios": ios, "base_insns": base["insns"] if base else None,
            "base_runs": base["runs"] if base else 0,
            "base_exits_spread": base["exits_spread"] if base else None,
            "insns": w["insns"], "exits": w["exits"], "ns": w["ns"],
            "l1_other": w["l1_other"], "busy": w["l1_other"] > BUSY_CPUS,
            "iops": fio[k]["iops"], "lat_us": fio[k]["lat_us"],
            "p99_us": fio[k]["p99_us"],
        }
        for n in ("insns", "exits", "l3insns", "irqs", "kicks", "wakeups",
                  "halts", "hirqs", "ticks"):
            run[n + "_io"] = net(n)
        # The datapath's own notifications: the guest's kicks and the
        # queue interrupts it took, each at least one exit on any host.
        run["notifs_io"] = None
        if run["kicks_io"] is not None and run["irqs_io"] is not None:
            run["notifs_io"] = run["kicks_io"] + run["irqs_io"]
        # Exits a second of the window, not net of anything: what comes
        # with time (the guests' timer ticks, halts, L2's interrupts) is
        # about the same a second in every row, so exits/IO follows 1/IOPS.
        run["exits_s"] = w["exits"] / (w["ns"] / 1e9) if w["ns"] > 0 else None
        # vhost_blk's requests per completion batch (one guest interrupt
        # at most each), over the whole run: a ratio of two net figures
        # is noise once batches are few
        vr, vb = w["vreqs"], w["vbatches"]
        run["reqs_batch"] = vr / vb if vr and vb else None
        # ... and per wait: what each pass that waited for the guest's
        # burst fetched (the notifications side of batching)
        vw = w["vwaits"]
        run["reqs_wait"] = vr / vw if vr and vw else None
        # ... and the looks at the ring in each such wait that found the
        # guest still adding to it (each a timer of L2's that woke the
        # worker); None from results before they were recorded
        vl = w["vlooks"]
        run["looks_wait"] = vl / vw if vl is not None and vw else None
        run["weighted_io"] = run["insns_io"] + run["exits_io"] * EXIT_COST
        runs.append(run)
    return runs


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def spread(vals):
    vals = [v for v in vals if v is not None]
    if len(vals) < 2:
        return None
    m = statistics.median(vals)
    return (max(vals) - min(vals)) / m * 100 if m else None


def fmt(v, f="%.0f", none="-"):
    return none if v is None else f % v


def summarize(runs):
    """Per (backend, row, wl): medians over pass-1 runs, boot spreads."""
    groups = {}
    for r in runs:
        groups.setdefault((r["backend"], r["row"], r["wl"]), []).append(r)
    out = {}
    for k, rs in groups.items():
        p1 = [r for r in rs if r["pass"] == 1] or rs
        s = {"runs": len(p1), "boots": sorted({r["boot"] for r in p1}),
             "busy": sum(1 for r in p1 if r["busy"]), "all": rs,
             "polls": "%s/%s" % (k[0], k[1]) in POLLING}
        for n in ("ios", "insns_io", "exits_io", "irqs_io", "kicks_io",
                  "wakeups_io", "iops", "weighted_io", "lat_us", "p99_us",
                  "halts_io", "hirqs_io", "reqs_batch", "reqs_wait",
                  "l3insns_io", "looks_wait", "ticks_io", "notifs_io",
                  "exits_s"):
            s[n] = med([r[n] for r in p1])
        s["insns_spread"] = spread([r["insns_io"] for r in p1])
        s["base_runs"] = min(r["base_runs"] for r in p1)
        s["base_exits_spread"] = med([r["base_exits_spread"] for r in p1])
        s["exits_spread"] = spread([r["exits_io"] for r in p1])
        # Across L2 boots (pass 2, and fresh boots after the flake):
        # the median of each boot's median, and their spread.
        byboot = {}
        for r in rs:
            byboot.setdefault(r["boot"], []).append(r)
        s["nboots"] = len(byboot)
        bi = [med([r["insns_io"] for r in v]) for v in byboot.values()]
        be = [med([r["exits_io"] for r in v]) for v in byboot.values()]
        s["boots_insns"] = med(bi)
        s["boots_exits"] = med(be)
        s["boots_insns_spread"] = spread(bi)
        s["boots_exits_spread"] = spread(be)
        out[k] = s
    return out


def write_cost_tsv(res, summ):
    cols = ["backend", "row", "workload", "ios", "insns_per_io",
            "exits_per_io", "irqs_per_io", "kicks_per_io", "wakeups_per_io",
            "iops", "weighted_per_io", "runs", "insns_spread_pct",
            "exits_spread_pct", "busy_runs", "boots",
            "boots_insns_per_io", "boots_insns_spread_pct",
            "boots_exits_per_io", "boots_exits_spread_pct",
            "hlt_exits_per_io", "irq_exits_per_io", "reqs_per_batch",
            "reqs_per_wait", "base_runs", "base_exits_spread_pct",
            "l3_insns_per_io", "looks_per_wait", "ticks_per_io",
            "notifications_per_io", "exits_per_s"]
    with open(os.path.join(res, "cost.tsv"), "w") as f:
        f.write("\t".join(cols) + "\n")
        for (b, row, wl) in sorted(summ, key=lambda k: (k[0], k[2], row_key(k[1]))):
            s = summ[(b, row, wl)]
            f.write("\t".join([
                b, row, wl, fmt(s["ios"]), fmt(s["insns_io"], "%.0f"),
                fmt(s["exits_io"], "%.3f"), fmt(s["irqs_io"], "%.3f"),
                fmt(s["kicks_io"], "%.3f"), fmt(s["wakeups_io"], "%.3f"),
                fmt(s["iops"], "%.0f"), fmt(s["weighted_io"], "%.0f"),
                str(s["runs"]), fmt(s["insns_spread"], "%.1f"),
                fmt(s["exits_spread"], "%.1f"), str(s["busy"]),
                str(s["nboots"]), fmt(s["boots_insns"], "%.0f"),
                fmt(s["boots_insns_spread"], "%.1f"),
                fmt(s["boots_exits"], "%.3f"),
                fmt(s["boots_exits_spread"], "%.1f"),
                fmt(s["halts_io"], "%.3f"), fmt(s["hirqs_io"], "%.3f"),
                fmt(s["reqs_batch"], "%.1f"),
                fmt(s["reqs_wait"], "%.1f"), str(s["base_runs"]),
                fmt(s["base_exits_spread"], "%.1f"),
                fmt(s["l3insns_io"], "%.0f"),
                fmt(s["looks_wait"], "%.1f"), fmt(s["ticks_io"], "%.3f"),
                fmt(s["notifs_io"], "%.3f"), fmt(s["exits_s"], "%.0f")]) + "\n")


def write_runs_tsv(res, runs):
    cols = ["pass", "boot", "backend", "row", "workload", "rep", "ios",
            "insns", "exits", "base_insns", "net_ios", "insns_per_io", "exits_per_io", "irqs_per_io",
            "kicks_per_io", "wakeups_per_io", "iops", "window_ms",
            "l1_other_cpus", "busy", "hlt_exits_per_io", "irq_exits_per_io",
            "reqs_per_batch", "reqs_per_wait", "base_runs",
            "base_exits_spread_pct", "l3_insns_per_io", "looks_per_wait",
            "ticks_per_io", "notifications_per_io", "exits_per_s"]
    with open(os.path.join(res, "cost-runs.tsv"), "w") as f:
        f.write("\t".join(cols) + "\n")
        for r in runs:
            f.write("\t".join([
                str(r["pass"]), r["boot"], r["backend"], r["row"], r["wl"],
                r["rep"], str(r["ios"]), str(r["insns"]), str(r["exits"]),
                fmt(r["base_insns"], "%d"), str(r["net_ios"]),
                "%.0f" % r["insns_io"], "%.3f" % r["exits_io"],
                fmt(r["irqs_io"], "%.3f"), fmt(r["kicks_io"], "%.3f"),
                fmt(r["wakeups_io"], "%.3f"), "%.0f" % r["iops"],
                "%.0f" % (r["ns"] / 1e6), "%.2f" % r["l1_other"],
                "busy" if r["busy"] else "idle",
                fmt(r["halts_io"], "%.3f"), fmt(r["hirqs_io"], "%.3f"),
                fmt(r["reqs_batch"], "%.1f"),
                fmt(r["reqs_wait"], "%.1f"), str(r["base_runs"]),
                fmt(r["base_exits_spread"], "%.1f"),
                fmt(r["l3insns_io"], "%.0f"),
                fmt(r["looks_wait"], "%.1f"), fmt(r["ticks_io"], "%.3f"),
                fmt(r["notifs_io"], "%.3f"), fmt(r["exits_s"], "%.0f")]) + "\n")


def get(summ, b, row, wl):
    return summ.get((b, row, wl))


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def cost_md(summ, runs):
    out = []
    w = out.append
    w("## What an I/O costs (counted)")
    w("")
    w("The whole machine (L2 host and L3 guest), counted by the vbcount TCG plugin")
    w("over each fio run of a fixed number of I/Os: instructions and L3 VM exits per")
    w("I/O, the L3 guest's interrupts and notifications (kicks) per I/O, L2's")
    w("context switches (host wakeups) per I/O, each net of the workload's base runs")
    w("(an eighth of the I/Os: (run - base) / (I/Os - base I/Os), base the median of")
    w("the base runs of the same L2 boot, which takes fio's start and exit out).")
    w("Medians of the runs of one L2 boot;")
    w("spread = (max - min) / median of insns/IO over those runs. weighted =")
    w("insns/IO + exits/IO x %.0f, the instruction-equivalent of one exit on real" % EXIT_COST)
    w("hardware (benchmarks.rst): the number to read for a KVM host. HLT, L2 irq:")
    w("the exits among them for the guest going idle and for interrupts of L2's own")
    w("(KVM's halt_exits and irq_exits in L2); batch: vhost_blk's requests per")
    w("completion batch, and per wait for the guest's burst (each ends in one")
    w("fetching pass). L3 ticks: the guest's local timer interrupts per I/O (each")
    w("costs exits whatever the backend); exits/s: exits a second of the window,")
    w("about the same in every row where they come with time, so that exits/IO")
    w("follows 1 / IOPS; notif/IO: kicks + queue interrupts, the datapath's own.")
    w("Runs taken while other processes used more than %.2f host" % BUSY_CPUS)
    w("CPUs are counted as busy.")
    for b in sorted({k[0] for k in summ}):
        for wl in sorted({k[2] for k in summ if k[0] == b}):
            rows = sorted([k[1] for k in summ if k[0] == b and k[2] == wl],
                          key=row_key)
            qn = get(summ, b, "qemu-native", wl)
            w("")
            w("### %s: %s" % (b, wl))
            w("")
            w("| row | insns/IO | spread | L3, L2 | exits/IO | HLT, L2 irq | L3 ticks, exits/s "
              "| irq/IO | kicks/IO | notif/IO "
              "| wakeups/IO | batch, per wait, looks | weighted/IO | x aio=native (insns, exits, weighted) "
              "| IOPS | runs | boots |")
            w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
            for row in rows:
                s = summ[(b, row, wl)]
                rel = "-"
                if qn and row != "qemu-native":
                    rel = "%s, %s, %s" % tuple(
                        fmt(ratio(s[n], qn[n]), "%.2fx") for n in
                        ("insns_io", "exits_io", "weighted_io"))
                note = " (%d busy)" % s["busy"] if s["busy"] else ""
                boots = "-"
                if s["nboots"] > 1:
                    boots = "%d: %s insns/IO, spread %s" % (
                        s["nboots"], fmt(s["boots_insns"]),
                        fmt(s["boots_insns_spread"], "%.1f%%"))
                why = "-"
                if s["halts_io"] is not None or s["hirqs_io"] is not None:
                    why = "%s, %s" % (fmt(s["halts_io"], "%.2f"),
                                      fmt(s["hirqs_io"], "%.2f"))
                split = "-"
                if s["l3insns_io"] is not None and s["insns_io"] is not None:
                    split = "%s, %s" % (fmt(s["l3insns_io"]),
                                        fmt(s["insns_io"] - s["l3insns_io"]))
                batch = fmt(s["reqs_batch"], "%.1f")
                if s["reqs_wait"] is not None:
                    batch += ", " + fmt(s["reqs_wait"], "%.1f")
                    if s["looks_wait"] is not None:
                        batch += ", " + fmt(s["looks_wait"], "%.1f")
                ticks = "%s, %s" % (fmt(s["ticks_io"], "%.2f"), fmt(s["exits_s"]))
                w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                  "| %s | %d%s | %s |" % (
                      row, fmt(s["insns_io"]), fmt(s["insns_spread"], "%.1f%%"),
                      split, fmt(s["exits_io"], "%.2f"), why, ticks,
                      fmt(s["irqs_io"], "%.2f"), fmt(s["kicks_io"], "%.2f"),
                      fmt(s["notifs_io"], "%.3f"), fmt(s["wakeups_io"], "%.2f"),
                      batch, fmt(s["weighted_io"]), rel,
                      fmt(s["iops"]), s["runs"], note, boots))
    # Repeatability: a row measured again in the same L2 boot (ROW@2).
    again = [k for k in summ if k[1].endswith("@2")]
    w("")
    w("## Repeatability")
    w("")
    w("Spread of insns/IO over the runs of one row in one L3 boot (median and")
    w("largest over the rows and workloads above), and a row measured again in a new")
    w("L3 boot of the same L2 boot (ROW@2; REPEAT_ROW: at most %g %% apart on" % REPEAT_PCT)
    w("insns/IO on an idle box, or the counts of the run are not repeatable), and")
    w("across L2 boots (pass 2 of a full run). Counts taken on a busy box are not")
    w("comparable.")
    w("")
    sp = [s["insns_spread"] for s in summ.values() if s["insns_spread"] is not None]
    if sp:
        w("- within a row: median spread %.1f%%, largest %.1f%% (%d rows x workloads)"
          % (statistics.median(sp), max(sp), len(sp)))
    out.extend(repeat_lines(summ))
    bs = [(k, s) for k, s in summ.items() if s["nboots"] > 1]
    for k, s in sorted(bs, key=lambda x: (x[0][0], x[0][2], row_key(x[0][1]))):
        w("- %s %s %s across %d L2 boots: insns/IO %s (spread %s), exits/IO %s (spread %s)" % (
            k[0], k[1], k[2], s["nboots"], fmt(s["boots_insns"]),
            fmt(s["boots_insns_spread"], "%.1f%%"), fmt(s["boots_exits"], "%.2f"),
            fmt(s["boots_exits_spread"], "%.1f%%")))
    busy = [r for r in runs if r["busy"]]
    w("- host load: %d of %d counted runs were taken while other processes used more "
      "than %.2f host CPUs%s" % (len(busy), len(runs), BUSY_CPUS,
                                 " (marked busy above)" if busy else ""))
    out.extend(seeds_md(summ, runs))
    return "\n".join(out) + "\n"


def repeat_lines(summ):
    """ROW@2 against ROW, per workload: how far apart their insns/IO are,
    judged against REPEAT_PCT; counts taken on a busy box say so."""
    out = []
    for k in sorted(k for k in summ if k[1].endswith("@2")):
        b, row, wl = k
        first = summ.get((b, row[:-2], wl))
        s = summ[k]
        if not (first and first["insns_io"] and s["insns_io"]):
            continue
        d = abs(s["insns_io"] - first["insns_io"]) / first["insns_io"] * 100
        de = None
        if first["exits_io"]:
            de = abs(s["exits_io"] - first["exits_io"]) / first["exits_io"] * 100
        v = "within %g %%" % REPEAT_PCT
        if d > REPEAT_PCT:
            v = "over %g %%: counts not repeatable in this run" % REPEAT_PCT
        busy = first["busy"] + s["busy"]
        note = []
        if busy:
            note.append("counts taken on a busy box: %d of %d runs" % (
                busy, first["runs"] + s["runs"]))
        if first["polls"] or s["polls"]:
            note.append("L3 idle loop polled (cpuidle)")
        out.append("- %s %s %s measured twice in one L2 boot (ROW@2): %s and %s "
                   "insns/IO, %.1f%% apart: %s; exits/IO %s and %s (%s apart)%s" % (
                       b, row[:-2], wl, fmt(first["insns_io"]), fmt(s["insns_io"]),
                       d, v, fmt(first["exits_io"], "%.2f"),
                       fmt(s["exits_io"], "%.2f"), fmt(de, "%.1f%%"),
                       " [" + "; ".join(note) + "]" if note else ""))
    return out


def seeds_md(summ, runs):
    out = []
    w = out.append
    b = "nullb"
    w("")
    w("## The seeds' questions, in counts")
    # seed 000: aio=threads vs aio=native
    lines = []
    for wl in ("16k-write-qd74", "16k-randwrite-qd74"):
        t, n = get(summ, b, "qemu-threads", wl), get(summ, b, "qemu-native", wl)
        if t and n:
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                wl, fmt(t["insns_io"]), fmt(n["insns_io"]),
                fmt(ratio(t["insns_io"], n["insns_io"]), "%.2fx"),
                fmt(t["exits_io"], "%.2f"), fmt(n["exits_io"], "%.2f"),
                fmt(t["iops"]), fmt(n["iops"])))
    if lines:
        w("")
        w("QEMU aio=threads against aio=native (seed 000), %s:" % b)
        w("")
        w("| workload | insns/IO threads | insns/IO native | threads/native "
          "| exits/IO threads | exits/IO native | IOPS threads | IOPS native |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|")
        out.extend(lines)
    # seed 002: request vs bio path, aio-stress shape
    lines = []
    for rw in ("write", "read", "randwrite", "randread"):
        wl = "aio-stress-8k-%s-t64" % rw
        m, bi = get(summ, b, "vhost-blk-mq", wl), get(summ, b, "vhost-blk-bio", wl)
        if m and bi:
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                wl, fmt(m["insns_io"]), fmt(bi["insns_io"]),
                fmt(ratio(bi["insns_io"], m["insns_io"]), "%.2fx"),
                fmt(m["exits_io"], "%.2f"), fmt(bi["exits_io"], "%.2f"),
                fmt(m["iops"]), fmt(bi["iops"])))
    if lines:
        w("")
        w("Request path against bio path on vhost_blk, aio-stress shape (seed 002), %s:" % b)
        w("")
        w("| workload | insns/IO request | insns/IO bio | bio/request | exits/IO request "
          "| exits/IO bio | IOPS request | IOPS bio |")
        w("|---|---:|---:|---:|---:|---:|---:|---:|")
        out.extend(lines)
    # seed 001: what a batch saves per I/O (queue depth 1 against 32, 128)
    lines = []
    for row in ("qemu-native", "qsd", "vhost-blk-mq", "vhost-blk-bio"):
        for rw in ("randread", "randwrite"):
            q1 = get(summ, b, row, "4k-%s-qd1" % rw)
            q32 = get(summ, b, row, "4k-%s-qd32" % rw)
            q128 = get(summ, b, row, "4k-%s-qd128" % rw)
            if not (q1 and q32):
                continue
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                row, rw, fmt(q1["insns_io"]), fmt(q32["insns_io"]),
                fmt(q128["insns_io"] if q128 else None),
                fmt(q1["insns_io"] - q32["insns_io"]),
                fmt(q1["exits_io"], "%.2f"), fmt(q32["exits_io"], "%.2f")))
    if lines:
        w("")
        w("What batching saves per I/O (seed 001): QEMU's batched linux-aio submission "
          "against vhost_blk's plugged submission, queue depth 1 against 32 and 128, %s:" % b)
        w("")
        w("| row | rw | insns/IO QD1 | QD32 | QD128 | saved per I/O at QD32 "
          "| exits/IO QD1 | exits/IO QD32 |")
        w("|---|---|---:|---:|---:|---:|---:|---:|")
        out.extend(lines)
    # seed 004: repeated runs, qemu-img bench style
    w("")
    w("Repeated runs, insns/IO over the runs of pass 1 (the qemu-img bench style of seed 004):")
    w("")
    w("| backend | row | workload | mean | stddev | min | median | max | count |")
    w("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for k in sorted(summ, key=lambda k: (k[0], k[2], row_key(k[1]))):
        v = [r["insns_io"] for r in summ[k]["all"] if r["pass"] == 1]
        if not v:
            continue
        sd = statistics.stdev(v) if len(v) > 1 else 0.0
        w("| %s | %s | %s | %.0f | %.0f | %.0f | %.0f | %.0f | %d |" % (
            k[0], k[1], k[2], statistics.mean(v), sd, min(v),
            statistics.median(v), max(v), len(v)))
    return out


def targets_md(summ):
    """Issue targets judged on the counts (ratios of medians, one boot)."""
    out = []
    w = out.append

    def judge(desc, a, b, n, limit, le=True):
        if not a or not b or a[n] is None or b[n] is None or not b[n]:
            return
        r = a[n] / b[n]
        ok = r <= limit if le else r >= limit
        v = "MET" if ok else "NOT MET"
        if a["runs"] < REPS or b["runs"] < REPS:
            v = "INCOMPLETE (%d and %d of %d runs), neither met nor not met" % (
                a["runs"], b["runs"], REPS)
        note = []
        if set(a["boots"]) != set(b["boots"]):
            note.append("rows from different L2 boots")
        if a["busy"] or b["busy"]:
            note.append("counts taken on a busy box")
        if a["polls"] or b["polls"]:
            note.append("L3 idle loop polled (cpuidle), counts not repeatable")
        w("- %s: %.3fx (%s / %s), target %s %.3fx: %s%s" % (
            desc, r, fmt(a[n], "%.3f" if n == "exits_io" else "%.0f"),
            fmt(b[n], "%.3f" if n == "exits_io" else "%.0f"),
            "at most" if le else "at least", limit, v,
            " [" + "; ".join(note) + "]" if note else ""))

    def exits_parts(a, b):
        """Under an exits target: how much of each row's exits is the
        datapath's and how much comes with time (informational)."""
        if not a or not b or a["exits_io"] is None or b["exits_io"] is None:
            return
        part = []
        if a["notifs_io"] is not None and b["notifs_io"] is not None:
            part.append("notifications (kicks + queue interrupts) %s and %s an I/O%s" % (
                fmt(a["notifs_io"], "%.3f"), fmt(b["notifs_io"], "%.3f"),
                fmt(ratio(a["notifs_io"], b["notifs_io"]), " (%.2fx)", "")))
        if a["ticks_io"] is not None and b["ticks_io"] is not None:
            part.append("L3 timer interrupts %s and %s an I/O" % (
                fmt(a["ticks_io"], "%.3f"), fmt(b["ticks_io"], "%.3f")))
        if a["exits_s"] is not None and b["exits_s"] is not None:
            part.append("exits a second %s and %s at %s and %s IOPS" % (
                fmt(a["exits_s"]), fmt(b["exits_s"]), fmt(a["iops"]), fmt(b["iops"])))
        if part:
            w("  - what the exits are (informational): " + "; ".join(part))

    backends = sorted({k[0] for k in summ})
    for b in backends:
        for wl in ("4k-randread-qd32", "4k-randwrite-qd32",
                   "4k-randread-qd16-j8", "4k-randwrite-qd16-j8"):
            qn = get(summ, b, "qemu-native", wl)
            qs = get(summ, b, "qsd", wl)
            for v in ("vhost-blk-mq", "vhost-blk-bio"):
                s = get(summ, b, v, wl)
                judge("%s exits/IO vs QEMU aio=native, %s %s" % (v, b, wl), s, qn, "exits_io", 0.5)
                exits_parts(s, qn)
                judge("%s insns/IO vs QEMU aio=native, %s %s" % (v, b, wl), s, qn, "insns_io", 0.625)
                judge("%s insns/IO vs qemu-storage-daemon, %s %s" % (v, b, wl), s, qs, "insns_io", 0.7)
        for wl in ("4k-randread-qd16-j8", "4k-randwrite-qd16-j8",
                   "aio-stress-8k-randread-t64", "aio-stress-8k-randwrite-t64"):
            judge("guest bio vs request path insns/IO (vhost-blk), %s %s" % (b, wl),
                  get(summ, b, "vhost-blk-bio", wl), get(summ, b, "vhost-blk-mq", wl),
                  "insns_io", 1.0)
        for wl in ("16k-write-qd74", "aio-stress-8k-write-t64", "aio-stress-8k-read-t64"):
            judge("guest bio vs request path insns/IO (vhost-blk), sequential %s %s" % (b, wl),
                  get(summ, b, "vhost-blk-bio", wl), get(summ, b, "vhost-blk-mq", wl),
                  "insns_io", 1.03)
    out.extend(repeat_lines(summ))
    return "\n".join(out) + ("\n" if out else "")


def settings_md(res, counted):
    """What was set for repeatable counts (benchmarks.rst): L2 KVM's halt
    polling ("SET halt_poll_ns N", settings.txt, bench/l2-bench.sh), where
    L3's threads ran ("SET pin vcpus-mod-N,backend-cpuC" or "off"), the L3
    guests' vCPUs ("SET l3_cpus N") and whether any shared the backend's
    CPU, whether the L3 guests had an HPET ("SET l3_hpet on|off") and the
    L3 guests' idle loop ("IDLE backend/row driver governor polling",
    idle.txt, bench/workloads.sh), shown, and flagged where it was not so.
    Fills POLLING."""
    out = []
    w = out.append
    sets = {}
    for d in (res, os.path.join(res, "pass2")):
        for l in read_lines(os.path.join(d, "settings.txt")):
            f = l.split()
            if len(f) >= 3 and f[0] == "SET":
                sets.setdefault(f[1], []).append(f[2])
    idle = {}
    for d in (res, os.path.join(res, "pass2")):
        for l in read_lines(os.path.join(d, "idle.txt")):
            f = l.split()
            if len(f) < 5 or f[0] != "IDLE":
                continue
            # a row run again (the flake): the last boot's settings, but
            # polling in any of its boots counts
            old = idle.get(f[1])
            poll = f[4] if not old or old[2] != "on" else "on"
            idle[f[1]] = (f[2], f[3], poll)
    if not sets and not idle:
        return ""
    w("## Settings for repeatable counts")
    w("")
    hp = sets.get("halt_poll_ns")
    if hp:
        vals = sorted(set(hp))
        line = "- L2 KVM halt_poll_ns: %s" % ", ".join(vals)
        if vals == ["0"]:
            line += " (halt polling off)"
        elif counted:
            line += (" -- FLAG: halt polling on in L2, an L3 vCPU that halts spins "
                     "for a time that depends on timing: counts not repeatable")
        else:
            line += " (the host's own setting, left alone)"
        w(line)
    pin = sets.get("pin")
    if pin:
        vals = sorted(set(pin))
        if vals == ["off"]:
            line = "- L3 threads in L2: not pinned"
            if counted:
                line += (" -- FLAG: L2's scheduler places the L3 vCPUs and the "
                         "backend's threads differently from run to run: counts "
                         "less repeatable")
        else:
            line = "- L3 threads in L2: pinned (%s)" % ", ".join(
                v.replace("vcpus-mod-", "vCPU i on CPU i mod ")
                 .replace(",backend-cpu", ", the backend on CPU ") for v in vals)
        w(line)
    l3 = [v for v in sets.get("l3_cpus", []) if v.isdigit()]
    if l3:
        vals = sorted(set(l3), key=int)
        line = "- L3 guests: %s vCPU(s), as many queues per disk" % ", ".join(vals)
        layout = [v for v in sorted(set(pin or [])) if v.startswith("vcpus-mod-")]
        if layout:
            m = re.match(r"vcpus-mod-(\d+),backend-cpu(\d+)$", layout[0])
            if m:
                mod, cpu = int(m.group(1)), int(m.group(2))
                shared = [i for i in range(max(int(v) for v in vals))
                          if mod and i % mod == cpu]
                if shared:
                    line += ("; vCPU %s on the backend's CPU %d: the backend "
                             "runs when L2's scheduler lets it, and that decides "
                             "how much its notifications batch"
                             % (", ".join(str(i) for i in shared), cpu))
                else:
                    line += "; none on the backend's CPU %d" % cpu
        w(line)
    hpet = sets.get("l3_hpet")
    if hpet:
        vals = sorted(set(hpet))
        line = "- L3 guests' HPET: %s" % ", ".join(vals)
        if vals == ["off"]:
            line += " (-machine hpet=off)"
        else:
            line += (" (QEMU's main loop wakes at the guest's HZ for the periodic "
                     "timer Linux leaves in it, in every row: benchmarks.rst)")
        w(line)
    if "on" in sets.get("exit_reasons", []) and counted:
        w("- exit reasons recorded (EXIT_REASONS=1) -- FLAG: KVM's tracepoints "
          "ran a hist trigger on every L3 exit, and it is counted: a diagnostic "
          "run, its counts not comparable with others")
    if "on" in sets.get("profile", []) and counted:
        w("- profiled (PROFILE=1) -- FLAG: the plugin ran a callback for every "
          "block executed, so the machine was slower: its exits (which come "
          "with time) are not comparable with other runs' (profile.md)")
    groups = {}
    for row, v in idle.items():
        groups.setdefault(v, []).append(row)
        if v[2] == "on":
            POLLING.add(row)
    for (drv, gov, poll), rows in sorted(groups.items()):
        line = "- L3 cpuidle: driver %s, governor %s, polling %s: %s" % (
            drv, gov, poll, ", ".join(sorted(rows)))
        if poll == "on":
            line += (" -- FLAG: the L3 idle loop polls (%s), for a time that depends "
                     "on timing: counts of these rows not repeatable" % drv)
        w(line)
    if not idle and counted:
        w("- L3 cpuidle: not recorded (no @@IDLE line)")
    return "\n".join(out) + "\n"


def chart_data(res, summ):
    for b in sorted({k[0] for k in summ}):
        rows = sorted({k[1] for k in summ if k[0] == b}, key=row_key)
        wls = sorted({k[2] for k in summ if k[0] == b})
        for n, name in (("insns_io", "insns"), ("exits_io", "exits")):
            with open(os.path.join(res, "cost-%s-%s.dat" % (b, name)), "w") as f:
                f.write("workload\t" + "\t".join(rows) + "\n")
                for wl in wls:
                    vals = []
                    for row in rows:
                        s = summ.get((b, row, wl))
                        v = s[n] if s and s[n] is not None else 0
                        vals.append("%.4f" % (v / 1000 if n == "insns_io" else v))
                    f.write(wl + "\t" + "\t".join(vals) + "\n")


# Names for the exit codes and MSRs exit-reasons.tsv shows (AMD SVM's exit
# codes, as L2 on this host runs; a code without a name is shown as is).
SVM_EXITS = {
    0x60: "INTR", 0x61: "NMI", 0x62: "SMI", 0x63: "INIT", 0x64: "VINTR",
    0x72: "CPUID", 0x77: "PAUSE", 0x78: "HLT", 0x7b: "IOIO", 0x7c: "MSR",
    0x7f: "SHUTDOWN", 0x81: "VMMCALL", 0x400: "NPF",
    0x401: "AVIC_INCOMPLETE_IPI", 0x402: "AVIC_NOACCEL",
}
MSRS = {0x6e0: "TSC_DEADLINE", 0x80b: "x2APIC_EOI", 0x830: "x2APIC_ICR",
        0x838: "x2APIC_TMICT", 0x4b564d02: "KVM_ASYNC_PF_EN",
        0x4b564d04: "KVM_PV_EOI_EN"}


def exit_reasons(d):
    """Per-reason L3 exits of each run (EXIT_REASONS=1: exitr.txt, "ROW WL
    REP CODE:N ... msrMSR/W:N ..."; hrtFUNC:N are L2's hrtimer expiries), per I/O net of the workload's base
    runs as in load_pass, median over a row's runs: rows of (backend, row,
    workload, reason, name, runs, per_io)."""
    ios = {k: v["ios"] for k, v in fio_runs(d).items()}
    per = {}
    for l in read_lines(os.path.join(d, "exitr.txt")):
        f = l.split()
        if len(f) < 4:
            continue
        b, row = split_row(f[1])
        k = (b, row, f[2], f[3])
        if k not in ios:
            continue
        c = {}
        for x in f[4:]:
            key, _, n = x.rpartition(":")
            if key and n.isdigit():
                c[key] = c.get(key, 0) + int(n)
        per[k] = c
    out = []
    for g in sorted({k[:3] for k in per}):
        reps = [k for k in per if k[:3] == g and not is_base(k[3])]
        bases = [k for k in per if k[:3] == g and is_base(k[3])]
        if not reps:
            continue
        keys = set()
        for k in reps:
            keys |= set(per[k])
        bios = statistics.median_low(ios[k] for k in bases) if bases else 0
        for key in keys:
            base = med([per[k].get(key, 0) for k in bases]) if bases else 0
            vals = [(per[k].get(key, 0) - base) / (ios[k] - bios)
                    for k in reps if ios[k] > bios]
            if not vals:
                continue
            if key.startswith("hrt"):
                name = "L2 hrtimer " + key[3:]
            elif key.startswith("msr"):
                code, _, wr = key[3:].partition("/")
                name = "%s %s" % (MSRS.get(int(code, 16), "MSR " + code),
                                  "write" if wr == "1" else "read")
            else:
                name = SVM_EXITS.get(int(key, 16), key)
            out.append((g[0], g[1], g[2], key, name, len(vals), med(vals)))
    return out


def write_exit_reasons(res):
    rows = exit_reasons(res)
    if not rows:
        return
    rows.sort(key=lambda r: (r[0], r[2], row_key(r[1]), -r[6]))
    with open(os.path.join(res, "exit-reasons.tsv"), "w") as f:
        f.write("backend\trow\tworkload\treason\tname\truns\texits_per_io\n")
        for r in rows:
            f.write("\t".join(list(r[:5]) + [str(r[5]), "%.4f" % r[6]]) + "\n")


def main():
    res = sys.argv[1]
    write_exit_reasons(res)
    runs = load_pass(res, 1)
    p2 = os.path.join(res, "pass2")
    if os.path.isdir(p2):
        runs += load_pass(p2, 2)
    counted = bool(runs) or os.path.exists(os.path.join(res, "counted"))
    with open(os.path.join(res, "settings.md"), "w") as f:
        f.write(settings_md(res, counted))
    if not runs:
        for n in ("cost.md", "cost-targets.md"):
            with open(os.path.join(res, n), "w"):
                pass
        return 0
    summ = summarize(runs)
    write_runs_tsv(res, runs)
    write_cost_tsv(res, summ)
    with open(os.path.join(res, "cost.md"), "w") as f:
        f.write(cost_md(summ, runs))
    with open(os.path.join(res, "cost-targets.md"), "w") as f:
        f.write(targets_md(summ))
    chart_data(res, summ)
    return 0


if __name__ == "__main__":
    sys.exit(main())
