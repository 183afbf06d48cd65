#!/usr/bin/env python3
"""Summarizes scripts/generality-bench.sh's runs into its BENCHMARKS.md
section (bench:generality or bench:generality-gpu): one row per spec, arm
and seed, and the median per spec and arm."""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, "scripts/lib")
from tables import COMPILE_WORKER_PHASES, host, write_section  # noqa: E402


def summarize(r):
    """One run's row: what the timeline and the promotion failures say."""
    timeline = r.get("timeline") or []
    end = timeline[-1]["seconds"] if timeline else 0.0
    seconds_of = {m["generation"]: m["seconds"] for m in timeline}
    quarter = end / 4
    best = r.get("best") or {}
    found = best.get("generation")
    found_s = seconds_of.get(found)
    # Promotion attempts after the first quarter: failures, and the
    # validations of that span (each best found then).
    late_failures = [f for f in r.get("promotion_failures", [])
                     if seconds_of.get(f["generation"], 0.0) > quarter]
    late_generated = sum(1 for f in late_failures if f.get("kind") == "generated")
    changes = [m["seconds"] for prev, m in zip(timeline, timeline[1:])
               if m.get("best_speedup") != prev.get("best_speedup")]
    # A best validated in the run's last promotion may come after the
    # timeline's last generation: its generation's seconds say when.
    late_best = any(s > 0.75 * end for s in changes) or (found_s or 0.0) > 0.75 * end
    spent = ((r.get("utilization") or {}).get("spent")) or {}
    worker = sum(spent.get(k, 0.0) for k in COMPILE_WORKER_PHASES)
    counters = r.get("counters") or {}
    return {
        "speedup": best.get("speedup"),
        "found": found,
        "found_s": found_s,
        "generations": r.get("generations"),
        "train": r.get("best_cost"),
        "late_attempts": len(late_failures),
        "late_generated": late_generated,
        "late_best": late_best,
        "checks": counters.get("generality_checks", 0),
        "rejected": (counters.get("rejections") or {}).get("generated", 0),
        "generated_share": spent.get("generated_s", 0.0) / worker if worker > 0 else None,
        "seconds": end,
        "restarts": len(r.get("restarts") or []),
    }


def fmt(v, spec="{:.3f}"):
    return "-" if v is None else spec.format(v)


def main():
    ap = argparse.ArgumentParser()
    for a in ["mode", "runs", "specs", "seeds", "arms", "out", "command", "commit", "host", "section", "stall"]:
        ap.add_argument("--" + a, default="")
    a = ap.parse_args()
    gpu = a.mode == "gpu"
    date = subprocess.run(["date", "-u", "+%Y-%m-%d"], capture_output=True, text=True).stdout.strip()
    # A report written later from a KEEP directory names the runs' commit and
    # host with --commit and --host.
    commit = a.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip() or "unknown"
    machine = a.host or (host() if gpu else "Simulator, this machine.")
    lines = [f"Date: {date}. Commit: {commit}. {machine}",
             f"Command: `{a.command}`. `on`: generated tests in selection; `off`:",
             "at promotion only (the search before); neither restarts on a stalled validated best"
             + (f"; `stall`: `on` with restarts after {a.stall or 8} generations without a new validated best "
                "(gevod's default)"
                if "stall" in a.arms.split() else "")
             + ". Late: after the first quarter of the run's seconds; restarts: generations that restarted part"
             " of the population.",
             "",
             "| spec | arm | seed | validated | found in generation (s) | generations | train best | "
             "late promotion failures (generated) | late new best | checks | rejected in selection | "
             "generated tests' share of compile-worker time | restarts |",
             "|" + "---|" * 13]
    medians = []
    for spec in a.specs.split():
        name = os.path.basename(spec).removesuffix(".gevo.toml")
        for arm in a.arms.split():
            speedups = []
            for seed in a.seeds.split():
                path = os.path.join(a.runs, f"{name}-{arm}-{seed}.json")
                if not os.path.exists(path):
                    continue
                s = summarize(json.load(open(path)))
                speedups.append(s["speedup"] or 1.0)
                lines.append(
                    f"| {name} | {arm} | {seed} | {fmt(s['speedup'])}x | {fmt(s['found'], '{}')} "
                    f"({fmt(s['found_s'], '{:.0f}')}) | {s['generations']} | {fmt(s['train'], '{:.4f}')} | "
                    f"{s['late_attempts']} ({s['late_generated']}) | {'yes' if s['late_best'] else 'no'} | "
                    f"{s['checks']} | {s['rejected']} | {fmt(s['generated_share'], '{:.1%}')} | {s['restarts']} |")
            if speedups:
                medians.append(f"{name} `{arm}`: median validated {statistics.median(speedups):.3f}x "
                               f"over {len(speedups)} seeds")
    lines += ["", "; ".join(medians) + ".", ""]
    section = a.section or ("generality-gpu" if gpu else "generality")
    write_section(a.out, section, "\n".join(lines))


if __name__ == "__main__":
    main()
