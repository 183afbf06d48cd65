#!/usr/bin/env python3
"""Summarizes scripts/search-bench.sh's runs into its BENCHMARKS.md section.

Reads each run's `gevod evolve --json` report (<fixture>-<budget>-<seed>-<search>.json)
and its progress log (one line per generation on stderr), and writes every
seed, the median and the spread, before and after, per fixture.
"""
import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys

sys.path.insert(0, "scripts/lib")
from tables import write_section  # noqa: E402

# The best seed of 3 of the search before distinct selection, restarts,
# islands and the promotion pool (BENCHMARKS.md, bench:evolve, 2026-11-21):
# the simulator target for the median seed.
TARGETS = {"stencil": 1.1021, "nw": 1.2176, "reduce": 1.0068}

LINE = re.compile(
    r"generation\s+(\d+) \| evaluations\s+(\d+) \| valid\s+[\d.]+% \| best cost (\S+) \| "
    r"cache hits\s+([\d.]+)%"
)


def machine():
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = ""
    try:
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, check=False,
        ).stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        pass
    return f"{cpu}, {os.cpu_count()} cores" + (f", {gpu}" if gpu else "")


def progress(path):
    """(generation, cumulative evaluations, best cost, cumulative hit %) per line."""
    rows = []
    for line in open(path, errors="replace"):
        # A terminal redraws in place: take each segment.
        for seg in line.split("\r"):
            m = LINE.search(seg)
            if m:
                best = None if m.group(3) == "-" else float(m.group(3))
                rows.append((int(m.group(1)), int(m.group(2)), best, float(m.group(4))))
    return rows


def steady_hits(rows):
    """Cache-hit share over the second half of the generations."""
    if len(rows) < 2:
        return None
    mid, end = rows[len(rows) // 2 - 1], rows[-1]
    evals = end[1] - mid[1]
    if evals <= 0:
        return None
    return (end[1] * end[3] - mid[1] * mid[3]) / 100.0 / evals


def last_improvement(rows):
    """The last generation whose best cost went down."""
    best, gen = None, None
    for g, _, b, _ in rows:
        if b is not None and (best is None or b < best - 1e-12):
            best, gen = b, g
    return gen


def load(runs, fixture, budget, seed, search):
    tag = f"{fixture}-{budget}-{seed}-{search}"
    r = json.load(open(os.path.join(runs, tag + ".json")))
    rows = progress(os.path.join(runs, tag + ".log"))
    best = r.get("best") or {}
    return {
        "speedup": best.get("speedup") or 1.0,
        "validated": bool(best),
        "cost": r.get("best_cost"),
        "hits": r.get("cache_hit_rate", 0.0),
        "steady": steady_hits(rows),
        "distinct": r.get("distinct_ptx"),
        "restarts": r.get("restarts") or [],
        "generations": r.get("generations"),
        "evaluations": r.get("evaluations"),
        "last": last_improvement(rows),
        "rate": r.get("evaluations_per_second", 0.0),
    }


def pct(v):
    return "-" if v is None else f"{100 * v:.1f}%"


def main():
    ap = argparse.ArgumentParser()
    for a in ["mode", "runs", "fixtures", "seeds", "budget", "long", "out",
              "section", "command", "gevod-version"]:
        ap.add_argument("--" + a, default="")
    a = ap.parse_args()
    fixtures, seeds = a.fixtures.split(), [int(s) for s in a.seeds.split()]
    gpu = a.mode == "gpu"
    date = subprocess.run(["date", "-u", "+%Y-%m-%d"], capture_output=True, text=True).stdout.strip()
    title = "GPU" if gpu else "simulator"
    # Wall time: the runs' own, summed (a benchmark split over several
    # commands reports the same).
    wall = 0
    for name in os.listdir(a.runs):
        if name.endswith(".seconds"):
            wall += int(open(os.path.join(a.runs, name)).read().strip() or 0)
    body = (
        f"## Search: before and after distinct selection, restarts, islands and the promotion pool ({title})\n\n"
        f"Command: `{a.command}`. Machine: {machine()}. {platform.system()}. Date: {date}. "
        f"{a.gevod_version}. Wall time of the runs: {wall // 60} min {wall % 60} s.\n\n"
        f"`gevod evolve --backend {'cuda' if gpu else 'sim'} {a.budget}` per fixture and seed. "
        "*before*: `tournament_size = 2`, `distinct_ptx = false`, `stagnation_generations = 0`, `islands = 1`, "
        "`promotion_pool = 0` (GEVO's search as it was); *after*: gevod's defaults (docs/evolve.md). "
        "*speedup*: the best validated variant's on the held-out tests (1.0: none validated). "
        "*hits*: cache-hit share of all evaluations; *steady hits*: over the second half of the "
        "generations. *last gain*: the last generation whose best train cost went down.\n\n"
        "| fixture | seed | search | speedup | best train cost | hits | steady hits | distinct PTX (last) | restarts | generations | last gain |\n"
        "|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|\n"
    )
    summary = []
    for f in fixtures:
        got = {}
        for search in ["before", "after"]:
            got[search] = [load(a.runs, f, "short", s, search) for s in seeds]
        for i, s in enumerate(seeds):
            for search in ["before", "after"]:
                r = got[search][i]
                body += (
                    f"| {f} | {s} | {search} | {r['speedup']:.4f}x | "
                    f"{'-' if r['cost'] is None else format(r['cost'], '.4f')} | {pct(r['hits'])} | "
                    f"{pct(r['steady'])} | {r['distinct']} | {r['restarts'] or '-'} | "
                    f"{r['generations']} | {'-' if r['last'] is None else r['last']} |\n"
                )
        summary.append((f, got))
    target_head = "" if gpu else " target (best seed before) | met |"
    body += (
        "\nPer fixture, over the seeds: median, lowest and highest validated speedup.\n\n"
        f"| fixture | before: median | before: range | after: median | after: range | after: steady hits (median) |{target_head}\n"
        f"|---|---:|---|---:|---|---:|{'' if gpu else '---:|---|'}\n"
    )
    for f, got in summary:
        def stats(rs):
            sp = [r["speedup"] for r in rs]
            return statistics.median(sp), min(sp), max(sp)
        bm, blo, bhi = stats(got["before"])
        am, alo, ahi = stats(got["after"])
        steady = [r["steady"] for r in got["after"] if r["steady"] is not None]
        row = (
            f"| {f} | {bm:.4f}x | {blo:.4f}-{bhi:.4f}x | {am:.4f}x | {alo:.4f}-{ahi:.4f}x | "
            f"{pct(statistics.median(steady) if steady else None)} |"
        )
        if not gpu:
            t = TARGETS.get(f)
            row += f" {t:.4f}x | {'yes' if t and am >= t else 'no'} |" if t else " - | - |"
        body += row + "\n"
    if gpu and a.long:
        body += (
            f"\nOne long run per fixture (seed 1, `--time {a.long}`): is the search still finding "
            "after generation 40?\n\n"
            "| fixture | search | speedup | generations | last gain | steady hits | restarts |\n"
            "|---|---|---:|---:|---:|---:|---|\n"
        )
        for f in fixtures:
            for search in ["before", "after"]:
                r = load(a.runs, f, "long", 1, search)
                body += (
                    f"| {f} | {search} | {r['speedup']:.4f}x | {r['generations']} | {r['last']} | "
                    f"{pct(r['steady'])} | {r['restarts'] or '-'} |\n"
                )
    write_section(a.out, a.section, body)


if __name__ == "__main__":
    main()
