#!/usr/bin/env python3
"""Generated held-out tests per fixture: kept, dropped, their simulator cost
per validation against the user's held-out tests, and, in one search per
fixture, how many variants that passed the user's held-out tests the
generated tests rejected (and why). Then the same search with generation
off (`[tests] generate = 0`, as before generated tests existed): how many
variants it validated, and whether the generated tests reject its best
(`gevod run --tests generated --patch` on its minimized patch, and why).
Prints a Markdown section for BENCHMARKS.md.

Usage: scripts/generated-bench.py [--evaluations N] [--seed S] [SPEC...]
(needs target/debug/gevod; run from the repository root)."""
import argparse, json, os, platform, subprocess, sys, tempfile, datetime, collections

GEVOD = os.environ.get("GEVOD", "target/debug/gevod")
FIXTURES = [f"tests/fixtures/kernels/{k}.gevo.toml" for k in
            ["vecadd", "reduce", "stencil", "nw", "loops", "expf", "pairsum", "zeroskip"]]
FIXTURES += [f"tests/fixtures/pipelines/{k}.gevo.toml" for k in ["wavefront", "lu", "pyramid"]]
FIXTURES += [f"tests/fixtures/general/{k}.gevo.toml" for k in ["scale2", "tailsum", "nocheck", "gridonly", "inplace"]]


def without_generation(spec):
    """A copy of `spec` beside it (its relative paths still hold) with
    `[tests] generate = 0`."""
    text = open(spec).read()
    assert "\n[tests]\n" in text, spec
    copy = os.path.join(os.path.dirname(spec), "." + os.path.basename(spec).replace(".gevo.toml", "-nogen.gevo.toml"))
    with open(copy, "w") as f:
        f.write(text.replace("\n[tests]\n", "\n[tests]\ngenerate = 0\n", 1))
    return copy


def formerly_validated(spec, seed, evaluations):
    """The search without generated tests: validated count, best speedup,
    and the generated test its best fails (or "passes")."""
    copy = without_generation(spec)
    try:
        with tempfile.TemporaryDirectory() as state:
            ev = run_json(["evolve", copy, "--backend", "sim", "--state", state, "--seed", str(seed),
                           "--evaluations", str(evaluations), "--json"])
            best = ev.get("best")
            if not best:
                return ev.get("validated", 0), "none", "-"
            out = subprocess.run([GEVOD, "run", spec, "--backend", "sim", "--tests", "generated",
                                  "--patch", best["minimized_patch"], "--json"], capture_output=True, text=True)
            results = json.loads(out.stdout)["results"]
            failed = [r for r in results if not r.get("passed")]
            verdict = "passes"
            if failed:
                r = failed[0]
                test = r["test"].split("(", 1)[1].rsplit(")", 1)[0] if "(" in r["test"] else r["test"]
                verdict = f"rejected: {test}: {r.get('verdict')}"
            return ev.get("validated", 0), f"{best['speedup']:.4f}x", verdict
    finally:
        os.remove(copy)


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
    ap.add_argument("fixtures", nargs="*", help="spec files (default: every fixture)")
    a = ap.parse_args()
    rows = []
    for spec in a.fixtures or FIXTURES:
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
        before = formerly_validated(spec, a.seed, a.evaluations)
        rows.append((name, len(g["kept"]), len(g["dropped"]), g["cost_per_validation"], held_cost,
                     len(rej), "; ".join(f"{n}x {t}" for t, n in why.most_common(3)) or "-",
                     f"{best.get('speedup', 0):.4f}x" if best else "none",
                     "; ".join(sorted({d['reason'].split(':')[0].split(' (')[0] for d in g['dropped']})) or "-", before))
        print(name, rows[-1], file=sys.stderr)
    print(f"Command: `scripts/generated-bench.py --evaluations {a.evaluations} --seed {a.seed}`. "
          f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores (shared). "
          f"Date: {datetime.date.today()}.\n")
    print("| fixture | kept | dropped | why dropped | original's cost on kept (per validation) | on the user's held-out | ratio | search: rejected by generated tests | which | validated speedup | without generated tests: validated | its best | generated tests on its best |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---|")
    for (n, k, d, c, h, r, w, s, dw, (bv, bs, bw)) in rows:
        print(f"| {n} | {k} | {d} | {dw} | {c} | {h} | {c / max(h, 1):.2f} | {r} | {w} | {s} | {bv} | {bs} | {bw} |")


if __name__ == "__main__":
    main()
