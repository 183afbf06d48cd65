#!/usr/bin/env bash
# What `gevod explain-edits` costs on the simulator: a short search of each
# fixture (population 32, GENERATIONS generations, seed 1), then the edit
# contributions of its best validated variant: edits, variants measured,
# seconds, and what the relies-on lines cost (simulator test runs, seconds). Rewrites the bench:explain-edits section of BENCHMARKS.md (BENCH_FILE=
# another file). GEVOD=path/to/gevod (default target/release/gevod, built).
set -euo pipefail
cd "$(dirname "$0")/.."
GEVOD=${GEVOD:-target/release/gevod}
[ -x "$GEVOD" ] || cargo build --release -p gevod
GENERATIONS=${GENERATIONS:-8}
BENCH_FILE=${BENCH_FILE:-BENCHMARKS.md}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '[evolve]\npopulation = 32\n' >"$tmp/evolve.toml"
rows="$tmp/rows.jsonl"
: >"$rows"
# contrib and relies start from their planted patches (minimization then
# drops neutral edits; validation, the size-dependent one).
for f in vecadd reduce stencil nw loops contrib relies; do
    state="$tmp/$f"
    extra=()
    case $f in contrib | relies) extra=(--start-from "tests/fixtures/kernels/$f.planted.patch.json") ;; esac
    "$GEVOD" evolve "tests/fixtures/kernels/$f.gevo.toml" --state "$state" --backend sim \
        --config "$tmp/evolve.toml" --generations "$GENERATIONS" --seed 1 --workers 2 \
        "${extra[@]}" >/dev/null
    start=$(date +%s.%N)
    if "$GEVOD" explain-edits "$state" --json >"$tmp/$f.json" 2>"$tmp/$f.err"; then
        end=$(date +%s.%N)
        python3 - "$f" "$tmp/$f.json" "$start" "$end" >>"$rows" <<'PY'
import json, sys
f, path, start, end = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
c = json.load(open(path))
classes = {}
for e in c["edits"]:
    classes[e["class"]] = classes.get(e["class"], 0) + 1
print(json.dumps({"fixture": f, "edits": len(c["edits"]), "measured": c["variants_measured"],
                  "not_replayed": c["not_replayed"], "pairs": len(c["pairs"]),
                  "seconds": c["seconds"], "wall": end - start, "full": c["full"]["estimate"],
                  "classes": classes, "relies": c.get("relies_cost"),
                  "relies_lines": sum(len(e.get("relies_on", [])) for e in c["edits"])}))
PY
    else
        python3 -c 'import json,sys; print(json.dumps({"fixture": sys.argv[1], "error": open(sys.argv[2]).read().strip()}))' \
            "$f" "$tmp/$f.err" >>"$rows"
    fi
done
python3 - "$rows" "$BENCH_FILE" "$GENERATIONS" "$(git rev-parse --short HEAD)" "$GEVOD" <<'PY'
import datetime, json, os, platform, sys
rows, out, generations, commit, gevod = sys.argv[1:6]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.machine())
body = [f"## Edit contributions on the simulator (`gevod explain-edits`)\n",
        f"{datetime.date.today()}, {cpu}, {os.cpu_count()} cores (shared), commit {commit}, `{gevod}`; "
        f"`GENERATIONS={generations} scripts/explain-bench.sh` (searches of population 32, {generations} generations, seed 1; "
        "contrib and relies from their planted patches). The analysis runs each edit alone, the patch without each, "
        "and every pair for up to 6 edits, on the held-out tests, in one process (one simulator thread); "
        "then the relies-on lines (the patch on every test and every generated size, each removed store "
        "with its value varied, and the patch without each edit at a failing size).\n",
        "| fixture | edits (minimized) | variants measured | did not replay | pairs | seconds measuring | seconds in all | full cost ratio | classes | relies-on: test runs | relies-on: seconds | relies-on: lines |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
for line in open(rows):
    r = json.loads(line)
    if "error" in r:
        body.append(f"| {r['fixture']} | - | - | - | - | - | - | - | {r['error'].removeprefix('gevod: ')} | - | - | - |")
        continue
    classes = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in sorted(r["classes"].items()))
    body.append(f"| {r['fixture']} | {r['edits']} | {r['measured']} | {r['not_replayed']} | {r['pairs']} | "
                f"{r['seconds']:.2f} | {r['wall']:.2f} | {r['full']:.4f} | {classes} | "
                f"{r['relies']['runs']} | {r['relies']['seconds']:.2f} | {r['relies_lines']} |")
rel = [json.loads(l) for l in open(rows)]
rel = [r for r in rel if r.get("relies")]
if rel:
    runs = [r["relies"]["runs"] for r in rel]
    secs = [r["relies"]["seconds"] for r in rel]
    body.append(f"\nThe relies-on lines cost {min(runs)}-{max(runs)} simulator test runs and "
                f"{min(secs):.2f}-{max(secs):.2f} s per fixture here (the `relies-on` columns; "
                "`gevod explain-edits --json` reports them as `relies_cost`).")
body.append("\nA variant whose whole speedup is under the threshold (1%) has only neutral edits: "
            "minimization keeps such an improvement rather than drop it to nothing.\n")
body.append("\"seconds in all\" includes loading the store, LLVM code generation of the original and "
            "the simulator's references. On a GPU each variant also costs its timing rounds "
            "(40 per held-out test): not measured yet.\n")
text = "\n".join(body) + "\n"
name = "explain-edits"
begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
section = f"{begin}\n{text}{end}"
old = open(out).read()
b, e = old.find(begin), old.find(end)
new = old[:b] + section + old[e + len(end):] if b >= 0 and e > b else old.rstrip() + "\n\n" + section + "\n"
open(out, "w").write(new)
print(text)
PY
