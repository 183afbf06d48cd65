#!/usr/bin/env bash
# Checks the systemd units with `systemd-analyze verify`: systemd/gevod.service
# as a system unit, systemd/user/gevod.service as a user unit. Fails on a
# non-zero exit status and on any message that names either unit, since
# verify leaves its status at 0 for some warnings. Needs no running systemd:
# CI runs it in plain Debian 12 and Ubuntu 24.04 containers.
#
#   scripts/verify-systemd.sh [GEVOD]     GEVOD defaults to target/debug/gevod
#
# verify insists that the first program of each Exec*= setting exists (gevod,
# in both units), so the units are checked from copies in which GEVOD stands
# in for the installed gevod (/usr/local/bin/gevod, ~/.cargo/bin/gevod).
# Nothing is run: without a built gevod, /bin/true stands in.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "verify-systemd: $*" >&2; exit 1; }

command -v systemd-analyze >/dev/null || die "systemd-analyze not found; run scripts/install-deps.sh"

if [ $# -gt 0 ]; then
    gevod=$1
    [ -x "$gevod" ] || die "$gevod: not an executable"
elif [ -x target/debug/gevod ]; then
    gevod=target/debug/gevod
else
    gevod=/bin/true
    echo "verify-systemd: no target/debug/gevod; /bin/true stands in for gevod (verify checks the path, it runs nothing)" >&2
fi
gevod=$(realpath "$gevod")

tmp=$(mktemp -d /tmp/gevod-verify.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# A path without spaces or % for the units to name.
mkdir -p "$tmp/bin" "$tmp/home/.cargo/bin" "$tmp/runtime" "$tmp/system" "$tmp/user"
chmod 700 "$tmp/runtime"
ln -s "$gevod" "$tmp/bin/gevod"
ln -s "$gevod" "$tmp/home/.cargo/bin/gevod"

# The units must say what the daemon and gevo-client assume (client/src/paths.rs).
system_const() { sed -n "s/^pub const SYSTEM_$1: &str = \"\(.*\)\";$/\1/p" client/src/paths.rs; }
for flag in config:CONFIG state:STATE socket:SOCKET; do
    path=$(system_const "${flag#*:}")
    [ -n "$path" ] || die "client/src/paths.rs: no SYSTEM_${flag#*:}"
    grep -qE "^ExecStart=/usr/local/bin/gevod serve .*--${flag%:*} $path( |$)" systemd/gevod.service ||
        die "systemd/gevod.service: ExecStart does not pass --${flag%:*} $path"
done
# Sandboxing that would take the GPUs away from gevod.
for unit in systemd/gevod.service systemd/user/gevod.service; do
    if grep -nE '^(PrivateDevices|MemoryDenyWriteExecute|ProcSubset)=' "$unit"; then
        die "$unit: PrivateDevices= hides the GPUs, MemoryDenyWriteExecute= and ProcSubset= may break the CUDA driver (docs/systemd.md)"
    fi
done

sed "s|/usr/local/bin/gevod|$tmp/bin/gevod|g" systemd/gevod.service >"$tmp/system/gevod.service"
grep -q "^ExecStart=$tmp/bin/gevod " "$tmp/system/gevod.service" ||
    die "systemd/gevod.service: ExecStart does not start /usr/local/bin/gevod"
cp systemd/user/gevod.service "$tmp/user/gevod.service"
grep -q '^ExecStart=%h/.cargo/bin/gevod ' "$tmp/user/gevod.service" ||
    die "systemd/user/gevod.service: ExecStart does not start %h/.cargo/bin/gevod"

# verify UNIT COPY CMD...: `CMD verify` on COPY; sets out (its messages, with
# COPY written as UNIT) and rc (its exit status).
verify() {
    local unit=$1 copy=$2
    shift 2
    rc=0
    out=$("$@" verify --man=no --recursive-errors=no "$copy" 2>&1) || rc=$?
    out=${out//"$copy"/$unit}
}
failed=0
report() {
    if [ "$rc" -ne 0 ] || grep -q 'gevod\.service' <<<"$out"; then
        echo "verify-systemd: $1: systemd-analyze verify exited $rc:" >&2
        printf '%s\n' "$out" >&2
        failed=1
    else
        echo "verify-systemd: $1: ok"
    fi
}

verify systemd/gevod.service "$tmp/system/gevod.service" systemd-analyze
report systemd/gevod.service

# No user manager is started: --user verify needs only a home (for %h) and a
# runtime directory. Where it cannot set itself up at all (non-zero status and
# no message about the unit), the unit is checked as a system unit with %h
# written out, which checks the same keys.
verify systemd/user/gevod.service "$tmp/user/gevod.service" \
    env -u XDG_CONFIG_HOME -u XDG_STATE_HOME -u XDG_DATA_HOME -u XDG_CONFIG_DIRS -u XDG_DATA_DIRS \
    HOME="$tmp/home" XDG_RUNTIME_DIR="$tmp/runtime" systemd-analyze --user
if [ "$rc" -ne 0 ] && ! grep -q 'gevod\.service' <<<"$out"; then
    echo "verify-systemd: systemd-analyze --user cannot run here (${out//$'\n'/; }); checking the user unit as a system unit" >&2
    sed "s|%h|$tmp/home|g" systemd/user/gevod.service >"$tmp/user/gevod.service"
    verify systemd/user/gevod.service "$tmp/user/gevod.service" systemd-analyze
fi
report systemd/user/gevod.service

exit "$failed"
