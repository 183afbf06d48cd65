# Sourced by the GPU scripts (run from the repository root).

# fixture_spec NAME: the team's fixture spec of that name, a kernel's
# (tests/fixtures/kernels) or else a pipeline's (tests/fixtures/pipelines).
fixture_spec() {
    local spec=tests/fixtures/kernels/$1.gevo.toml
    [ -f "$spec" ] || spec=tests/fixtures/pipelines/$1.gevo.toml
    echo "$spec"
}

# wait_until SECONDS COMMAND...: polls every 0.1 s; true once COMMAND is.
wait_until() {
    local limit=$1; shift
    local end=$(( $(date +%s) + limit ))
    until "$@"; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.1
    done
}

# A check's line: "ok   NAME", or "FAIL NAME" and the last lines of FILE.
ok() { echo "ok   $1"; }
fail() { echo "FAIL $1"; [ -n "${2:-}" ] && tail -15 "$2" | sed 's/^/    /'; }

# search_result NAME STATUS JSON ERR: a timed search's line. A search that
# the script's limit stopped (timeout's status 124, after SIGINT) and that
# wrote its --json answer still counts: the answer holds the generations
# committed before the stop (a search overruns its --time by up to two
# promotions, docs/evolve.md). Anything else is a FAIL with ERR's tail.
search_result() {
    local name=$1 status=$2 json=$3 err=$4
    if [ "$status" = 0 ]; then
        ok "$name"
    elif [ "$status" = 124 ] && python3 -c 'import json, sys; json.load(open(sys.argv[1]))["generations"]' "$json" 2> /dev/null; then
        ok "$name (stopped by the limit; the generations committed count)"
    else
        fail "$name (exit status $status)" "$err"
    fi
}
