#!/usr/bin/env python3
"""Summarizes scripts/tune-bench.sh's runs (its KEEP directory) into its
BENCHMARKS.md section (bench:tune-gpu): per held-out test, Kernel Tuner's
best configuration and time, gevo's configuration and its original's time,
the served variant's time, and the two targets (gevo's configuration's
original within 2% of Kernel Tuner's best; the served variant at least 5%
faster than Kernel Tuner's best). Every time compared is gevod's
measurement (`gevod run --backend cuda`: lower quartile of its rounds, L2
flushed); Kernel Tuner's own times (mean of its launches, NVRTC build, no
flush) are shown beside them."""
import argparse
import json
import math
import os
import subprocess
import sys
import tomllib

sys.path.insert(0, "scripts/lib")
from tables import host, write_section  # noqa: E402

CONFIG_WITHIN = 1.02   # gevo's configuration's original / Kernel Tuner's best's
SERVED_SPEEDUP = 1.05  # Kernel Tuner's best / the served variant


def load(runs, name):
    path = os.path.join(runs, name)
    return json.load(open(path)) if os.path.exists(path) else None


def shape(config):
    """A configuration as `32x4` (values in the spec's order)."""
    return "x".join(str(v) for v in config.values()) if config else "-"


def by_test(run):
    """`gevod run --json`'s first variant: (its label, {test: row})."""
    if not run:
        return None, {}
    v = run[0]
    return v.get("variant"), {t["test"]: t for t in v.get("tests", [])}


def us(ns):
    return "-" if ns is None else f"{ns / 1e3:.2f}"


X = "{:.3f}x"


def fmt(v, spec="{:.3f}"):
    return "-" if v is None else spec.format(v)


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def ordered(config, names):
    return {n: config[n] for n in names if n in config} if config else None


def tuned_alone(spec, kt):
    """What Kernel Tuner timed, where it is not the whole spec: a pipeline's
    tuned kernel alone."""
    if isinstance(spec.get("kernel"), str):
        return ""
    return f"; the pipeline's {kt.get('kernel', 'tuned')} alone, its first step"


def rows(a, spec):
    """One dict per held-out test with every number the tables show."""
    runs = a.runs
    names = [k for k in spec["tune"] if k not in ("ir", "source", "chosen")]
    kt = load(runs, "kt.json") or {"sizes": []}
    tune = load(runs, "tune.json") or {}
    gevo_config = ordered(((tune.get("best") or {}).get("configuration")), names)
    label, gevo_tests = by_test(load(runs, "run-gevo.json"))
    served_is_variant = label not in (None, "original")
    out = []
    for size in kt["sizes"]:
        if size["set"] != "heldout":
            continue
        best = size.get("best") or {}
        kt_config = ordered(best.get("configuration"), names)
        kt_label, kt_tests = by_test(load(runs, f"run-kt-{shape(kt_config)}.json"))
        t = size["test"]
        kt_row, gevo_row = kt_tests.get(t, {}), gevo_tests.get(t, {})
        kt_orig = kt_row.get("original_cost")
        kt_nvrtc = kt_row.get("cost") if kt_label not in (None, "original") and not kt_row.get("failure") else None
        gevo_orig = gevo_row.get("original_cost")
        served = (gevo_row.get("cost") if served_is_variant else gevo_orig) if not gevo_row.get("failure") else None
        same = kt_config is not None and kt_config == gevo_config
        ratio = 1.0 if same and kt_orig and gevo_orig else (gevo_orig / kt_orig if kt_orig and gevo_orig else None)
        out.append({
            "test": t,
            "size": ", ".join(f"{k} = {v}" for k, v in size["params"].items()),
            "kt_config": kt_config, "kt_ms": best.get("time_ms"),
            "kt_source_ms": (size.get("source") or {}).get("time_ms"),
            "kt_orig": kt_orig, "kt_nvrtc": kt_nvrtc,
            "gevo_config": gevo_config, "gevo_orig": gevo_orig, "served": served,
            "same": same, "config_ratio": ratio,
            "served_speedup": kt_orig / served if kt_orig and served else None,
            "served_vs_nvrtc": kt_nvrtc / served if kt_nvrtc and served else None,
        })
    return out


def configuration_table(a, spec):
    """Every configuration: Kernel Tuner's time per held-out size and gevod
    tune's ratio to the source configuration (both tools' rankings)."""
    names = [k for k in spec["tune"] if k not in ("ir", "source", "chosen")]
    kt = load(a.runs, "kt.json") or {"sizes": []}
    tune = load(a.runs, "tune.json") or {}
    sizes = [s for s in kt["sizes"] if s["set"] == "heldout"]
    kt_ms = {(s["test"], shape(ordered(c["configuration"], names))): c for s in sizes for c in s["configurations"]}
    gevo = {shape(ordered(c["configuration"], names)): c for c in tune.get("configurations", [])}
    shapes = list(dict.fromkeys([shape(ordered(c["configuration"], names)) for s in sizes
                                 for c in s["configurations"]] + list(gevo)))
    lines = ["| configuration | " + " | ".join(f"Kernel Tuner, {s['test']} (us)" for s in sizes)
             + " | gevod tune: status | gevod tune: mean ratio to the source's |",
             "|" + "---|" * (len(sizes) + 3)]
    for sh in shapes:
        cells = []
        for s in sizes:
            c = kt_ms.get((s["test"], sh))
            cells.append("-" if not c or c["time_ms"] is None else
                         f"{c['time_ms'] * 1e3:.2f}" + ("" if c["passed"] else " (mismatch)"))
        g = gevo.get(sh) or {}
        status = g.get("status", "-") + (f": {g['why']}" if g.get("why") else "")
        lines.append(f"| {sh} | " + " | ".join(cells) + f" | {status} | {fmt(g.get('mean_ratio'), '{:.4f}')} |")
    return lines


def steps(a):
    path = os.path.join(a.runs, "steps.tsv")
    if not os.path.exists(path):
        return {}
    return {k: float(v) for k, v in (l.rstrip("\n").split("\t") for l in open(path) if "\t" in l)}


def main():
    ap = argparse.ArgumentParser()
    for name in ["runs", "spec", "out", "command", "commit", "host", "time", "date"]:
        ap.add_argument("--" + name, default="")
    ap.add_argument("--section", default="tune-gpu", help="the BENCHMARKS.md section (bench:NAME)")
    a = ap.parse_args()
    spec = tomllib.load(open(a.spec, "rb"))
    date = a.date or subprocess.run(["date", "-u", "+%Y-%m-%d"], capture_output=True, text=True).stdout.strip()
    commit = a.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                        text=True).stdout.strip() or "unknown"
    kt = load(a.runs, "kt.json") or {}
    tune = load(a.runs, "tune.json") or {}
    evolve = load(a.runs, "evolve.json") or {}
    machine = a.host or host()
    spent = steps(a)
    source = spec["tune"]["source"]
    n_configs = len(tune.get("configurations") or []) or None
    lines = [
        f"Date: {date}. Commit: {commit}. {machine}",
        f"Command: `{a.command}`. Kernel: `{a.spec}` (source configuration {shape(source)}, "
        f"{n_configs or '-'} configurations). Kernel Tuner {kt.get('version', '-')} "
        f"(`lang=\"cupy\"`, brute force, {kt.get('iterations', '-')} launches a configuration, NVRTC builds"
        f"{tuned_alone(spec, kt)}) "
        f"on {kt.get('device') or 'the same GPU'}; `gevod tune --backend cuda --tests heldout`, then "
        f"`gevod evolve` on its configuration ({a.time or '-'}).",
        "All times compared are gevod's (`gevod run --backend cuda --tests heldout`: lower quartile of its "
        "rounds, L2 flushed, clang-built IR unless said); Kernel Tuner's own (mean of its launches, NVRTC "
        "build, no flush) are beside them.",
        "",
        "| held-out test | size | Kernel Tuner's best | its time, Kernel Tuner (us) | its original, gevod (us) | "
        "its NVRTC build, gevod (us) | gevo's configuration | its original (us) | served variant (us) | "
        "gevo's original / Kernel Tuner's best | served speedup over Kernel Tuner's best | "
        "over its NVRTC build |",
        "|" + "---|" * 12,
    ]
    table = rows(a, spec)
    for r in table:
        ratio = fmt(r["config_ratio"], "{:.4f}") + (" (same configuration)" if r["same"] else "")
        lines.append(
            f"| {r['test']} | {r['size']} | {shape(r['kt_config'])} | {fmt(r['kt_ms'] and r['kt_ms'] * 1e3, '{:.2f}')} | "
            f"{us(r['kt_orig'])} | {us(r['kt_nvrtc'])} | {shape(r['gevo_config'])} | {us(r['gevo_orig'])} | "
            f"{us(r['served'])} | {ratio} | {fmt(r['served_speedup'], X)} | {fmt(r['served_vs_nvrtc'], X)} |")
    ratio = geomean([r["config_ratio"] for r in table])
    speedup = geomean([r["served_speedup"] for r in table])
    met = lambda ok: "met" if ok else "not met"  # noqa: E731
    lines.append("")
    if table:
        within = sum(1 for r in table if r["config_ratio"] is not None and r["config_ratio"] <= CONFIG_WITHIN)
        faster = sum(1 for r in table if r["served_speedup"] is not None and r["served_speedup"] >= SERVED_SPEEDUP)
        lines.append(
            f"Targets: gevo's configuration's original within 2% of Kernel Tuner's best: geometric mean "
            f"{fmt(ratio, '{:.4f}')}, {within} of {len(table)} held-out tests at most {CONFIG_WITHIN} "
            f"({met(ratio is not None and within == len(table))}); served variant at least 5% faster than "
            f"Kernel Tuner's best: geometric mean {fmt(speedup, X)}, {faster} of {len(table)} at least "
            f"{SERVED_SPEEDUP}x ({met(speedup is not None and faster == len(table))}).")
    best = tune.get("best") or {}
    interval = best.get("interval") or [None, None]
    kt_source = [r["kt_source_ms"] / r["kt_ms"] for r in table if r["kt_source_ms"] and r["kt_ms"]]
    lines.append(
        f"Tuning: gevod tune chose {shape(ordered(best.get('configuration'), list(source)))}, "
        f"{fmt(best.get('speedup'), X)} over the source configuration [{fmt(interval[0])}, {fmt(interval[1])}], "
        f"in {fmt(spent.get('tune'), '{:.0f}')} s; Kernel Tuner's best per held-out size was "
        f"{fmt(geomean(kt_source), X)} over the source configuration (geometric mean, its timing), all its "
        f"sizes (train too) in {fmt(spent.get('kt'), '{:.0f}')} s.")
    eb = evolve.get("best")
    if eb:
        lines.append(
            f"Search on gevo's configuration: validated {eb['speedup']:.3f}x "
            f"[{eb['interval'][0]:.3f}, {eb['interval'][1]:.3f}] over its original with "
            f"{eb['edits_after']} edits, {evolve.get('generations', '-')} generations, "
            f"{evolve.get('evaluations', '-')} evaluations.")
    elif evolve:
        lines.append(f"Search on gevo's configuration: nothing validated in {evolve.get('generations', '-')} "
                     f"generations; the served kernel is the configured original.")
    edits_path = os.path.join(a.runs, "served.edits.txt")
    if os.path.exists(edits_path):
        edits = [l.strip() for l in open(edits_path) if l.startswith("edit ")]
        if edits:
            lines.append("Served variant's edits: " + "; ".join(f"`{e}`" for e in edits) + ".")
    lines += ["", "Every configuration (Kernel Tuner's time on each held-out size; gevod tune's geometric mean "
              "of its cost over the source configuration's, per held-out test):", ""]
    lines += configuration_table(a, spec)
    lines.append("")
    write_section(a.out, a.section, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
