#!/usr/bin/env bash
# Edit contributions measured by the daemon on its GPU (called by
# scripts/gpu-suite.sh, section daemon-explain):
#   scripts/gpu-daemon-explain.sh GEVOD GEVO_CLIENT.gz WORKDIR
# Starts `gevod serve` (cuda backend, the default 60 s slice) watching the
# stencil fixture and a pipeline (EXPLAIN_FIXTURES, default "stencil
# pyramid") for EXPLAIN_TIME seconds (default 330), polling `gevo-client
# --json best` and `explain` every 2 s, then checks, printing "ok NAME" or
# "FAIL NAME" per check and a Markdown table:
#  - every validated variant still served 120 s after its first service has
#    contributions measured on the GPU (`cuda`) by then (a variant a better
#    one replaced sooner is counted, not checked: it is no longer served);
#  - where such a patch is faster by more than 1% (full cost ratio), at
#    least one edit carries speed;
#  - what it cost the search: the seconds each measurement held the slot
#    (the search measures nothing meanwhile), as a share of the slice.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
gevod=$1 client_package=$2 work=$3
fixtures=${EXPLAIN_FIXTURES:-stencil pyramid}
run_time=${EXPLAIN_TIME:-330}
mkdir -p "$work/app/build"
client=$work/gevo-client
gunzip -c "$client_package" > "$client" && chmod +x "$client" || { echo "FAIL unpack $client_package"; exit 1; }

cat > "$work/gevod.toml" <<TOML
[daemon]
settle = "500ms"
[gpu]
backend = "cuda"
TOML
GEVOD_LOG=info "$gevod" serve --config "$work/gevod.toml" --state "$work/state" \
    --socket "$work/sock" --watch "$work/app" > "$work/gevod.log" 2>&1 &
daemon=$!
wait_until 30 bash -c "[ -S '$work/sock' ] && [[ \$('$client' --socket '$work/sock' --json status 2>/dev/null) == *slots* ]]" ||
    { fail "daemon-explain: answers on its socket" "$work/gevod.log"; kill -9 $daemon; exit 1; }
for f in $fixtures; do
    spec=$(fixture_spec "$f")
    cp "$(dirname "$spec")/$f.ll" "$work/app/build/"
    grep -v '^project' "$spec" > "$work/app/build/$f.gevo.toml"
done

# One line per poll: time, then per fixture its served PTX hash and the
# explain reply's contributions (backend, full ratio, classes); and the
# status's evaluations summed over the jobs.
poll() {
    local t; t=$(date +%s.%N)
    local evals
    evals=$("$client" --socket "$work/sock" --json status 2>/dev/null |
        python3 -c 'import json,sys; print(sum(j["evaluations"] for j in json.load(sys.stdin)["jobs"]))' 2>/dev/null)
    echo "status $t ${evals:-}" >> "$work/polls"
    for f in $fixtures; do
        local best explain
        best=$("$client" --socket "$work/sock" --json best "$f" 2>/dev/null) || continue
        explain=$("$client" --socket "$work/sock" --json explain "$f" 2>/dev/null) || continue
        python3 - "$t" "$f" "$best" "$explain" >> "$work/polls" <<'PY'
import json, sys
t, f, best, explain = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
c = explain.get("contributions") or {}
classes = [e["class"] for e in c.get("edits", [])]
# The explanation is of the best served when it was asked: same speedup.
same = abs(explain.get("speedup", 0) - best.get("speedup", -1)) < 1e-9
print("best", t, f, best["ptx_hash"], best.get("speedup"), c.get("backend", "-") if same else "-",
      c.get("full", "-"), c.get("target", "-").replace(" ", "_"), ",".join(x.replace(" ", "_") for x in classes) or "-")
PY
    done
}
started=$(date +%s)
while [ $(( $(date +%s) - started )) -lt "$run_time" ]; do
    poll
    sleep 2
done
kill -TERM $daemon
wait $daemon

python3 - "$work/polls" "$work/gevod.log" "$run_time" <<'PY'
import datetime, re, sys
polls, log, run_time = sys.argv[1], sys.argv[2], float(sys.argv[3])
served, status = {}, []
for line in open(polls):
    p = line.split()
    if p[0] == "status" and len(p) == 3:
        status.append((float(p[1]), int(p[2])))
    elif p[0] == "best":
        t, f, h, speedup, backend, full, target, classes = float(p[1]), p[2], p[3], p[4], p[5], p[6], p[7], p[8]
        s = served.setdefault((f, h), {"first": t, "gpu": None, "speedup": speedup})
        if backend == "cuda" and s["gpu"] is None:
            s.update(gpu=t, full=float(full), target=target.replace("_", " "), classes=classes.replace("_", " ").split(","))
start = status[0][0] if status else 0
end = start + run_time
firsts = {}
for (f, h), s in served.items():
    firsts.setdefault(f, []).append(s["first"])
bad = replaced = 0
for (f, h), s in sorted(served.items(), key=lambda x: x[1]["first"]):
    at = s["first"] - start
    # Served until the next best of the same kernel, or the end.
    until = min([t for t in firsts[f] if t > s["first"]] + [end])
    what = f"{f} variant {h[:12]} ({float(s['speedup']):.3f}x) served at {at:.0f}s"
    if s["gpu"] is None:
        if until - s["first"] >= 120:
            bad += 1
            print(f"FAIL daemon-explain: {what}: no GPU contributions in its {until - s['first']:.0f}s of service")
        elif until < end:
            replaced += 1
        else:
            print(f"     {what}: no GPU contributions yet, served {until - s['first']:.0f}s before the end (not due)")
        continue
    took = s["gpu"] - s["first"]
    what += f": contributions on the GPU ({s['target']}) {took:.0f}s after its first service, full {s['full']:.4f}, classes {', '.join(s['classes'])}"
    if took <= 120:
        print(f"ok   daemon-explain: {what}")
    else:
        bad += 1
        print(f"FAIL daemon-explain: {what} (more than 120 s)")
    if s["full"] < 0.99:
        if "carries speed" in s["classes"]:
            print(f"ok   daemon-explain: {f} {h[:12]}: an edit carries the speed")
        else:
            bad += 1
            print(f"FAIL daemon-explain: {f} {h[:12]}: full {s['full']:.4f} and no edit carries speed")
if not served:
    bad += 1
    print("FAIL daemon-explain: nothing validated to explain")
print(f"     {replaced} served variants replaced by a better one within 120 s (not measured unless a slice ended on them)")

# What the measurements cost: the slot time each held, in its slice.
stamp = re.compile(r"^(\S+Z)\s")
measures, edits = [], "?"
for line in open(log):
    if "measuring edit contributions" in line:
        n = re.search(r"edits=([0-9]+)", line)
        edits = n.group(1) if n else "?"
    if "edit contributions measured on the GPU" in line:
        secs = re.search(r"seconds=([0-9.]+)", line)
        subsets = re.search(r"variants=([0-9]+)", line)
        if secs:
            measures.append((float(secs.group(1)), f"{subsets.group(1) if subsets else '?'} of {edits} edits"))
slice_s = 60
held = sum(c for c, _ in measures)
print()
print("| daemon: edit contributions on the GPU | value |")
print("|---|---|")
print(f"| measurements: seconds (subsets measured of the patch's edits) | {', '.join(f'{c:.1f} ({n})' for c, n in measures) or '-'} |")
print(f"| share of its {slice_s} s slice each held the slot (the search's loss in that minute) | {', '.join(f'{100 * c / slice_s:.1f}%' for c, _ in measures) or '-'} |")
print(f"| slot time they took, share of the {run_time:.0f} s run | {held:.1f} s, {100 * held / run_time:.1f}% |")
sys.exit(1 if bad else 0)
PY
