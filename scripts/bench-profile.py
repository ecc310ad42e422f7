#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""bench-profile.py RESULTS [--rows R,...] [--workloads W,...] [--top N]
[--diff ROW_A ROW_B]: where the instructions of a make bench PROFILE=1 run
went, by function, per I/O.

Reads the vbcount plugin's profile (profile-N.tsv: "P id level address
insns" for every block run in window id, level 2 or 3), the "@@WIN ID ROW
WORKLOAD REP@@" lines that name each window, the "@@KSYMS LEVEL RELEASE
_TEXT@@" and "@@KMOD LEVEL ADDRESS NAME [MODULE]@@" lines each L2 boot and
each L3 guest printed (bench/workloads.sh --ksyms: where its kernel text
and its modules' functions lie), the "@@UMAP PID COMM MAPPING@@" lines L2
printed once each L3 guest was up (bench/l2-bench.sh: the executable
mappings of L2's processes, so that L2's user space is told apart by
file), the "@@KSYM ADDRESS NAME@@" dump of the
kernel's functions an L2 boot printed (an L3 guest runs the same kernel:
moved by the difference of the two _text; a real System.map in
build/kernels does too; --ksyms FILE takes the dump from another log),
and the I/Os of each run (runs.tsv,
runs-base.tsv of the report). Only the windows cost.tsv uses count
(windows.txt). Each run is netted against the base run of its row,
workload and boot with the median count (cost.tsv takes the median of each
figure). Writes, per row and
workload, the instructions per I/O of each level, by area (user space, the
kernel, each module) and by function; with --diff, ROW_B minus ROW_A by
function, both levels, per workload. Output on stdout (make bench
PROFILE=1 writes it to RESULTS/profile.md).
"""
import argparse
import bisect
import collections
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
USER_TOP = 0x8000000000000000


class UserMaps:
    """The executable mappings of L2's processes, from the dumps of one L2
    boot up to a time: an address in L2's user space -> "[user: FILE]".
    The file, not the process: TCG shares a translated block among the
    address spaces that map its page, and the plugin names it by the
    address it was first translated at, perhaps in another process (a
    shell's libc.so.6 for QEMU's calls into it) or in one that has exited
    since (the QEMU of an earlier L3 guest). So older dumps count too; the
    newest that holds an address names it."""

    def __init__(self, dumps):
        self.dumps = []
        for maps in reversed(dumps):
            maps = sorted(maps)
            self.dumps.append(([m[0] for m in maps], maps))

    def name(self, addr):
        for starts, maps in self.dumps:
            i = bisect.bisect_right(starts, addr) - 1
            if i >= 0 and addr < maps[i][1]:
                return maps[i][2]
        return "[user]"


def umap_entry(line):
    """(start, end, name) of an "@@UMAP PID COMM START-END PERMS OFFSET DEV
    INODE [PATH]@@" line, or None."""
    x = line.strip().strip("@").split()
    if len(x) < 8 or x[0] != "UMAP" or "-" not in x[3]:
        return None
    lo, _, hi = x[3].partition("-")
    path = x[8].strip("[]") if len(x) > 8 else "anonymous"
    try:
        return (int(lo, 16), int(hi, 16),
                "[user: %s]" % os.path.basename(path))
    except ValueError:
        return None


class Symbols:
    """One kernel's functions at the addresses one boot put them: the
    kernel's own from a dump of another boot of that release (or its
    System.map), moved by the difference of the two _text addresses
    (KASLR), a module's as printed."""

    def __init__(self, kernel, text, mods):
        self.addrs, self.names = [], []
        if kernel and text is not None:
            off = text - kernel[0]
            self.lo, self.hi = kernel[1] + off, kernel[2] + off
            for a, n in kernel[3]:
                self.addrs.append(a + off)
                self.names.append(n)
        else:
            self.lo = self.hi = 0
        for a, n, m in sorted(mods):
            self.addrs.append(a)
            self.names.append("%s [%s]" % (n, m))
        order = sorted(range(len(self.addrs)), key=self.addrs.__getitem__)
        self.addrs = [self.addrs[i] for i in order]
        self.names = [self.names[i] for i in order]


    def name(self, addr):
        if addr < USER_TOP:
            return "[user]", "user"
        i = bisect.bisect_right(self.addrs, addr) - 1
        if i < 0:
            return "[kernel, unknown]", "?"
        n = self.names[i]
        if n.endswith("]"):
            # a module's function, unless far past the module's last one
            if addr - self.addrs[i] > 0x10000:
                return "[kernel, unknown]", "?"
            return n, n[n.rindex("[") + 1:-1]
        if self.lo <= addr <= self.hi:
            return n, "kernel"
        return "[kernel, unknown]", "?"


def kernel_table(text, syms):
    """(_text, lowest, highest, [(address, name)]) of a kernel's functions."""
    if text is None or not syms:
        return None
    syms.sort()
    return (text, syms[0][0], syms[-1][0] + 0x10000, syms)


def system_map(rel):
    """The kernel table of rel's System.map (build/kernels), if it is the
    real one (Debian's is a stub pointing at its -dbg package)."""
    kdir = os.environ.get("TEST_KERNELS_DIR",
                          os.path.join(TOP, "build", "kernels"))
    path = os.path.join(kdir, rel, "root", "boot", "System.map-" + rel)
    syms, text = [], None
    try:
        with open(path) as f:
            for line in f:
                x = line.split()
                if len(x) < 3:
                    continue
                if x[2] == "_text":
                    text = int(x[0], 16)
                if x[1] in ("T", "t"):
                    syms.append((int(x[0], 16), x[2]))
    except OSError:
        return None
    return kernel_table(text, syms)


def read_dump(path, kernels):
    """Kernel tables from the "@@KSYM" lines of a log, each closed by its
    "@@KSYMS 2 REL TEXT@@" line, by release, into kernels."""
    syms = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("@@KSYM "):
                x = line[2:-3].split() if line.rstrip().endswith("@@") else []
                if len(x) == 3:
                    syms.append((int(x[1], 16), x[2]))
            elif line.startswith("@@KSYMS 2 ") and syms:
                x = line.strip().strip("@").split()
                t = kernel_table(int(x[3], 16), syms)
                if t:
                    kernels.setdefault(x[2], t)
                syms = []


def split_row(r):
    b, _, row = r.partition("/")
    return b, row


def is_base(rep):
    return rep.startswith("base")


def read_runs(d):
    """I/Os of each run: (backend, row, workload, rep) -> ios."""
    ios = {}
    for name in ("runs.tsv", "runs-base.tsv"):
        try:
            with open(os.path.join(d, name)) as f:
                for line in f:
                    x = line.rstrip("\n").split("\t")
                    if len(x) >= 9 and x[0] != "backend":
                        try:
                            ios[tuple(x[:4])] = int(float(x[8]))
                        except ValueError:
                            pass
        except OSError:
            pass
    return ios


def counted_windows(d):
    """(boot, id) of the windows cost.tsv uses: windows.txt (make bench's
    join; a window the plugin dropped is not there)."""
    ok = set()
    try:
        with open(os.path.join(d, "windows.txt")) as f:
            for line in f:
                x = line.split("\t")
                if len(x) >= 5:
                    ok.add((x[3], x[4]))
    except OSError:
        pass
    return ok


def read_pass(d, kernels):
    """The windows of one pass directory: key (backend, row, wl, rep) ->
    (boot, {level: {addr: insns}}, {level: Symbols}, UserMaps of L2 or
    None). kernels: the kernel tables by release, added to from the logs'
    dumps."""
    runs = {}
    counted = counted_windows(d)
    boot = 1
    while os.path.exists(os.path.join(d, "attempt-%d.log" % boot)):
        read_dump(os.path.join(d, "attempt-%d.log" % boot), kernels)
        boot += 1
    boot = 1
    while os.path.exists(os.path.join(d, "attempt-%d.log" % boot)):
        prof = collections.defaultdict(
            lambda: collections.defaultdict(collections.Counter))
        try:
            with open(os.path.join(d, "profile-%d.tsv" % boot)) as f:
                for line in f:
                    x = line.split("\t")
                    if len(x) == 5 and x[0] == "P":
                        prof[x[1]][int(x[2])][int(x[3], 16)] += int(x[4])
        except OSError:
            boot += 1
            continue
        syms = {}
        mods = {2: [], 3: []}
        umaps, dumps, last_pid = None, [], None
        with open(os.path.join(d, "attempt-%d.log" % boot),
                  errors="replace") as f:
            for line in f:
                if not line.startswith("@@"):
                    continue
                if line.startswith("@@UMAP "):
                    # a dump goes through /proc in order: init's lines
                    # begin it (other lines may come between its own)
                    pid = line.split()[1]
                    if not dumps or pid == "1" and last_pid != "1":
                        dumps.append([])
                    last_pid = pid
                    umaps = None
                    e = umap_entry(line)
                    if e:
                        dumps[-1].append(e)
                    continue
                m = re.match(r"@@KMOD ([23]) ([0-9a-f]+) (\S+) \[(\S+)\]@@",
                             line)
                if m:
                    mods[int(m.group(1))].append(
                        (int(m.group(2), 16), m.group(3), m.group(4)))
                    continue
                m = re.match(r"@@KSYMS ([23]) (\S+) (\S+)@@", line)
                if m:
                    lv = int(m.group(1))
                    text = None if m.group(3) == "-" else int(m.group(3), 16)
                    rel = m.group(2)
                    if rel not in kernels:
                        kernels[rel] = system_map(rel)
                    syms[lv] = Symbols(kernels[rel], text, mods[lv])
                    mods[lv] = []
                    continue
                m = re.match(r"@@WIN (\S+) (\S+) (\S+) (\S+)@@", line)
                if m and dumps and umaps is None:
                    umaps = UserMaps(dumps)
                if m and m.group(1) in prof and \
                        (str(boot), m.group(1)) in counted:
                    b, row = split_row(m.group(2))
                    runs[(b, row, m.group(3), m.group(4))] = (
                        boot, prof[m.group(1)], dict(syms), umaps)
        boot += 1
    return runs


def profile(d, rows, wls, kernels):
    """Per (backend, row, workload): {level: Counter(function -> insns per
    I/O)}, {level: Counter(area -> insns per I/O)}, runs."""
    ios = read_runs(d)
    runs = read_pass(d, kernels)
    named = {}

    def by_name(key):
        if key not in named:
            boot, prof, syms, umaps = runs[key]
            out = {}
            for lv, counts in prof.items():
                c = collections.Counter()
                s = syms.get(lv)
                for a, n in counts.items():
                    if lv == 2 and umaps and a < USER_TOP:
                        c[(umaps.name(a), "user")] += n
                    else:
                        c[s.name(a) if s else ("[no symbols]", "?")] += n
                out[lv] = c
            named[key] = out
        return named[key]

    result = {}
    groups = collections.defaultdict(list)
    for k in runs:
        if is_base(k[3]) or k not in ios:
            continue
        if rows and k[1] not in rows or wls and k[2] not in wls:
            continue
        groups[k[:3]].append(k)
    for g, keys in sorted(groups.items()):
        total = {}
        net_ios = 0
        for k in keys:
            boot = runs[k][0]
            bases = [b for b in runs if b[:3] == g and is_base(b[3]) and
                     runs[b][0] == boot and ios.get(b, ios[k]) < ios[k]]
            base = None
            if bases:
                # the median base run by its total count
                bases.sort(key=lambda b: sum(sum(c.values())
                                             for c in runs[b][1].values()))
                base = bases[(len(bases) - 1) // 2]
            net_ios += ios[k] - (ios[base] if base else 0)
            for lv, c in by_name(k).items():
                total.setdefault(lv, collections.Counter()).update(c)
            if base:
                for lv, c in by_name(base).items():
                    total.setdefault(lv, collections.Counter()).subtract(c)
        if net_ios <= 0:
            continue
        funcs, areas = {}, {}
        for lv, c in total.items():
            funcs[lv] = collections.Counter()
            areas[lv] = collections.Counter()
            for (name, area), n in c.items():
                funcs[lv][name] += n / net_ios
                areas[lv][area] += n / net_ios
        result[g] = (funcs, areas, len(keys))
    return result


def level_name(lv):
    return "L3 guest" if lv == 3 else "L2"


def write_profile(res, top, out):
    w = out.write
    w("# Where the instructions of an I/O went\n\n")
    w("Per I/O, net of the base runs (as cost.tsv). Level L3: the guest; "
      "L2: the host, with its KVM, the backend and L2's own fio for the "
      "native row. A profile run is slower than a bench run: its "
      "instruction counts compare, its exits do not.\n")
    for (b, row, wl), (funcs, areas, n) in res.items():
        w("\n## %s/%s, %s (%d runs)\n\n" % (b, row, wl, n))
        for lv in sorted(funcs, reverse=True):
            tot = sum(funcs[lv].values())
            w("%s: %.0f instructions per I/O; by area: %s\n\n" % (
                level_name(lv), tot, ", ".join(
                    "%s %.0f" % (a, v) for a, v in areas[lv].most_common()
                    if abs(v) >= 0.5)))
            w("| insns/IO | share | function |\n|---:|---:|---|\n")
            for name, v in funcs[lv].most_common(top):
                w("| %.0f | %.1f %% | %s |\n" % (
                    v, 100 * v / tot if tot else 0, name))
            w("\n")


def write_diff(res, a, b, top, out):
    w = out.write
    w("# %s minus %s, instructions per I/O by function\n" % (b, a))
    for (be, row, wl) in sorted(res):
        if row != b or (be, a, wl) not in res:
            continue
        fa, fb = res[(be, a, wl)][0], res[(be, b, wl)][0]
        w("\n## %s, %s\n\n" % (be, wl))
        for lv in (3, 2):
            ca, cb = fa.get(lv, collections.Counter()), fb.get(lv, collections.Counter())
            d = collections.Counter()
            for k in set(ca) | set(cb):
                d[k] = cb[k] - ca[k]
            w("%s: %.0f against %.0f (%+.0f)\n\n" % (
                level_name(lv), sum(cb.values()), sum(ca.values()),
                sum(d.values())))
            w("| %s | %s | difference | function |\n|---:|---:|---:|---|\n" % (a, b))
            for k in sorted(d, key=lambda k: -abs(d[k]))[:top]:
                w("| %.0f | %.0f | %+.0f | %s |\n" % (ca[k], cb[k], d[k], k))
            w("\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results")
    p.add_argument("--rows", default="")
    p.add_argument("--workloads", default="")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--diff", nargs=2, metavar=("ROW_A", "ROW_B"))
    p.add_argument("--ksyms", action="append", default=[],
                   help="a log with another L2 boot's @@KSYM dump of the "
                   "same kernel, for a run without one")
    o = p.parse_args()
    rows = set(filter(None, o.rows.split(",")))
    wls = set(filter(None, o.workloads.split(",")))
    if o.diff:
        rows |= set(o.diff) if rows else set()
    kernels = {}
    for f in o.ksyms:
        read_dump(f, kernels)
    res = profile(o.results, rows, wls, kernels)
    if not res:
        print("bench-profile: no profiled run in %s (make bench PROFILE=1)"
              % o.results, file=sys.stderr)
        return 1
    if o.diff:
        write_diff(res, o.diff[0], o.diff[1], o.top, sys.stdout)
    else:
        write_profile(res, o.top, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
