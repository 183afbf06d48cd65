#!/usr/bin/env python3
"""Generated held-out tests per fixture: kept, dropped, their simulator cost
per validation against the user's held-out tests, and, in one search per
fixture, how many variants that passed the user's held-out tests the
generated tests rejected (and why). Prints a Markdown section for
BENCHMARKS.md.

Usage: scripts/generated-bench.py [--evaluations N] [--seed S]
(needs target/debug/gevod; run from the repository root)."""
import argparse, json, os, platform, subprocess, sys, tempfile, datetime, collections

GEVOD = os.environ.get("GEVOD", "target/debug/gevod")
FIXTURES = [f"tests/fixtures/kernels/{k}.gevo.toml" for k in
            ["vecadd", "reduce", "stencil", "nw", "loops", "expf", "pairsum", "zeroskip"]]
FIXTURES += [f"tests/fixtures/general/{k}.gevo.toml" for k in ["scale2", "tailsum", "nocheck"]]


def run_json(args):
    out = subprocess.run([GEVOD] + args, capture_output=True, text=True)
    try:
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        sys.exit(f"{' '.join(args)}: {out.stderr.strip()}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--evaluations", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rows = []
    for spec in FIXTURES:
        name = os.path.basename(spec).split(".")[0]
        g = run_json(["run", spec, "--backend", "sim", "--tests", "generated", "--json"])
        held = run_json(["run", spec, "--backend", "sim", "--tests", "heldout", "--json"])
        held_cost = sum(r["original_cost"] for r in held)
        with tempfile.TemporaryDirectory() as state:
            ev = run_json(["evolve", spec, "--backend", "sim", "--state", state, "--seed", str(a.seed),
                           "--evaluations", str(a.evaluations), "--json"])
        rej = [r for r in ev.get("promotion_failures") or [] if r.get("kind") == "generated"]
        why = collections.Counter()
        for r in rej:
            reason = r.get("reason", "")
            test = reason.split("(")[1].split(")")[0] if "(" in reason else reason
            why[test] += 1
        best = ev.get("best") or {}
        if best:
            lo, hi = best["interval"]
            best = {"speedup": lo}
        rows.append((name, len(g["kept"]), len(g["dropped"]), g["cost_per_validation"], held_cost,
                     len(rej), "; ".join(f"{n}x {t}" for t, n in why.most_common(3)) or "-",
                     f"{best.get('speedup', 0):.4f}x" if best else "none",
                     "; ".join(sorted({d['reason'].split(':')[0] for d in g['dropped']})) or "-"))
    print(f"Command: `scripts/generated-bench.py --evaluations {a.evaluations} --seed {a.seed}`. "
          f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared). "
          f"Date: {datetime.date.today()}.\n")
    print("| fixture | kept | dropped | why dropped | original's cost on kept (per validation) | on the user's held-out | ratio | search: rejected by generated tests | which | validated speedup |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---|---:|")
    for (n, k, d, c, h, r, w, s, dw) in rows:
        print(f"| {n} | {k} | {d} | {dw} | {c} | {h} | {c / max(h, 1):.2f} | {r} | {w} | {s} |")


if __name__ == "__main__":
    main()
