#!/usr/bin/env bash
# A single-node Slurm cluster for tests: munge, slurmctld and slurmd run from
# Debian's packages with every file under DIR, on free ports, as the current
# user (root in CI). `start DIR` prints the SLURM_CONF to export; `stop DIR`
# ends the daemons. Needs slurm-wlm and munge (scripts/install-deps.sh).
# SLURM_GPUS=N gives the node N GPUs as generic resources (/dev/nvidia0
# ...), for `srun --gres=gpu:1` steps (scripts/gpu-slurm.sh).
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
dir=$(realpath -m "$2")

# A port nothing listens on now (a connection to it is refused).
free_port() {
    local port
    while :; do
        port=$((20000 + RANDOM % 30000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return
        fi
    done
}

stop() {
    for pidfile in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
}

start() {
    for tool in munged slurmctld slurmd srun sinfo; do
        command -v "$tool" >/dev/null || { echo "$0: $tool not found (install slurm-wlm and munge)" >&2; exit 3; }
    done
    mkdir -p "$dir"/ctld "$dir"/spool "$dir"/munge
    chmod 700 "$dir"/munge
    local host user cpus
    host=$(hostname -s)
    user=$(id -un)
    cpus=$(nproc)
    dd if=/dev/urandom of="$dir"/munge/munge.key bs=1024 count=1 status=none
    chmod 400 "$dir"/munge/munge.key
    munged --force --key-file="$dir"/munge/munge.key --socket="$dir"/munge/socket \
        --pid-file="$dir"/munged.pid --log-file="$dir"/munged.log --seed-file="$dir"/munge/seed
    local gpus=${SLURM_GPUS:-0} gres="" gres_types=""
    if [ "$gpus" -gt 0 ]; then
        gres=" Gres=gpu:$gpus"
        gres_types="GresTypes=gpu"
    fi
    cat > "$dir"/slurm.conf <<CONF
$gres_types
ClusterName=gevotest
SlurmctldHost=$host
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
InactiveLimit=0
KillWait=5
NodeName=$host CPUs=$cpus State=UNKNOWN$gres
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
    # No systemd (containers, CI): slurmd makes its cgroup directories itself.
    echo "IgnoreSystemd=yes" > "$dir"/cgroup.conf
    if [ -n "$gres" ]; then
        echo "Name=gpu File=/dev/nvidia[0-$((gpus - 1))]" > "$dir"/gres.conf
    fi
    export SLURM_CONF=$dir/slurm.conf
    slurmctld -f "$SLURM_CONF"
    slurmd -f "$SLURM_CONF"
    for _ in $(seq 100); do
        if sinfo -h -o %T 2>/dev/null | grep -qx idle; then
            echo "SLURM_CONF=$SLURM_CONF"
            return 0
        fi
        sleep 0.2
    done
    echo "$0: the node did not become idle within 20 s; slurmctld.log:" >&2
    tail -5 "$dir"/slurmctld.log "$dir"/slurmd.log >&2 || true
    stop
    exit 1
}

case $action in
    start) start ;;
    stop) stop ;;
    *) usage ;;
esac
