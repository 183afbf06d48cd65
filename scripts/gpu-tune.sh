#!/usr/bin/env bash
# The [tune] part of the GPU suite (called by scripts/gpu-suite.sh):
#   scripts/gpu-tune.sh GEVOD GEVO_CLIENT.gz WORKDIR
# On the tunable fixture tests/fixtures/tune/tile2d (20 block shapes, the
# source's 8 x 8), printing "ok NAME" or "FAIL NAME" per check:
#  - `gevod tune --backend cuda`: every configuration measured on the GPU
#    (each checked against the source's outputs on the simulator first), the
#    fastest not the source's and faster with confidence;
#  - `gevod evolve` on the tuned spec (TUNE_TIME, default 90s): the sweep
#    first, the search on the fastest configuration, its best variant's edits
#    carried to three other configurations and measured there;
#  - the daemon (cuda backend) watching a build directory with the spec:
#    version 1 (the source's configuration) is swept on the GPU, the fastest
#    configuration becomes version 2, and `gevo-client best` answers its PTX
#    with its constants and the spec file's hash (within TUNE_DAEMON_WAIT,
#    default 240 s).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
gevod=$1 client_package=$2 work=$3
mkdir -p "$work"
client=$work/gevo-client
gunzip -c "$client_package" > "$client" && chmod +x "$client" || { echo "FAIL unpack $client_package"; exit 1; }
spec=tests/fixtures/tune/tile2d.gevo.toml
json() { python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

# The sweep alone.
if "$gevod" tune "$spec" --backend cuda --json > "$work/tune.json" 2> "$work/tune.log"; then
    measured=$(json "$work/tune.json" 'sum(c["status"] == "measured" for c in d["configurations"])')
    best=$(json "$work/tune.json" '" ".join(f"{k}={v}" for k, v in d["best"]["configuration"].items())')
    lo=$(json "$work/tune.json" 'd["best"]["interval"][0]')
    echo "    fastest: $best, $(json "$work/tune.json" 'round(d["best"]["speedup"], 3)')x [$lo, $(json "$work/tune.json" 'd["best"]["interval"][1]')]"
    [ "$measured" = 20 ] && ok "tune: 20 of 20 configurations measured on the GPU" ||
        fail "tune: 20 of 20 configurations measured ($measured)" "$work/tune.json"
    python3 -c "import sys; sys.exit(not float(sys.argv[1]) > 1)" "$lo" &&
        ok "tune: the fastest ($best) is faster than the source's with confidence" ||
        fail "tune: the fastest is faster with confidence (interval from $lo)" "$work/tune.json"
else
    fail "gevod tune --backend cuda" "$work/tune.log"
fi

# Sweep, search, and the edits carried to other configurations.
timeout -s INT 600 "$gevod" evolve "$spec" --backend cuda --devices 0 --time "${TUNE_TIME:-90s}" \
    --state "$work/evolve" --json > "$work/evolve.json" 2> "$work/evolve.log"
search_result "evolve on the tuned spec: sweep and search (${TUNE_TIME:-90s})" $? "$work/evolve.json" "$work/evolve.log"
if [ -s "$work/evolve.json" ]; then
    python3 - "$work/evolve.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
shown = lambda c: " ".join("%s=%s" % kv for kv in c.items())
best = d["best"]
print("    searched on %s, %s" % (shown(d["tune"]["best"]["configuration"]),
      "validated %.3fx over its original" % best["speedup"] if best else "nothing validated"))
for c in d["carried"]:
    how = "cost over the source %.3f" % c["of_source"] if c["of_source"] else "not measured: %s" % c["why"]
    print("    carried to %s: %d of %d edits, %s" % (shown(c["configuration"]), c["kept"], c["edits"], how))
PY
    if [ "$(json "$work/evolve.json" 'd["best"] is not None')" = True ]; then
        [ "$(json "$work/evolve.json" 'len(d["carried"]) == 3 and all(c["of_source"] or c["why"] for c in d["carried"])')" = True ] &&
            ok "evolve: the best variant's edits carried to 3 other configurations" ||
            fail "evolve: the best variant's edits carried to 3 other configurations" "$work/evolve.json"
    fi
fi

# The daemon: the sweep on its GPU, the chosen configuration served.
mkdir -p "$work/app/build/tile2d.tune"
cat > "$work/gevod.toml" <<TOML
[daemon]
settle = "500ms"
[schedule]
slice = "10s"
[gpu]
backend = "cuda"
[evolve]
population = 64
TOML
GEVOD_LOG=info "$gevod" serve --config "$work/gevod.toml" --state "$work/state" \
    --socket "$work/sock" --watch "$work/app" > "$work/gevod.log" 2>&1 &
daemon=$!
cp tests/fixtures/tune/tile2d.tune/*.ll "$work/app/build/tile2d.tune/"
cp tests/fixtures/tune/tile2d.ll tests/fixtures/tune/tile2d.cu "$work/app/build/"
grep -v "^project" "$spec" > "$work/app/build/tile2d.gevo.toml"
best() { "$client" --socket "$work/sock" --json best app/tile2d --spec "$work/app/build/tile2d.gevo.toml" 2> /dev/null; }
served() { best > "$work/best.json" && [ "$(json "$work/best.json" 'd["version"]')" = 2 ]; }
if wait_until "${TUNE_DAEMON_WAIT:-240}" served; then
    json "$work/best.json" '"    served: version %s, %s, %.3fx over that configuration original" % (d["version"], d["configuration"], d["speedup"])'
    file_hash=$(sha256sum "$work/app/build/tile2d.gevo.toml" | cut -d' ' -f1)
    [ "$(json "$work/best.json" 'd["spec_hash"]')" = "$file_hash" ] && [ "$(json "$work/best.json" 'bool(d.get("configuration"))')" = True ] &&
        ok "daemon: the swept configuration is version 2 and its answer carries its constants and the file's hash" ||
        fail "daemon: the answer carries the configuration and the file's hash" "$work/best.json"
    grep -q "configurations swept" "$work/gevod.log" && ok "daemon: the sweep ran on the GPU slot" ||
        fail "daemon: the sweep ran on the GPU slot" "$work/gevod.log"
else
    fail "daemon: a variant of the swept configuration served within ${TUNE_DAEMON_WAIT:-240}s" "$work/gevod.log"
fi
kill -TERM $daemon; wait $daemon
