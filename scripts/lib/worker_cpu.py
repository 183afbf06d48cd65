"""Samples the CPU seconds of the compile workers (`gevod eval-worker`
processes) under one process, the way the kernel counts them, for any
commit's gevod: every 0.1 s each worker's user and system time with its
waited-for children's (ptxas, nvlink) from /proc/PID/stat, the last sample
of each kept. On SIGTERM or SIGINT it writes {"compile_cpu_s": total,
"workers": count} to OUT and exits.

    python3 scripts/lib/worker_cpu.py ROOT_PID OUT
"""
import json, os, signal, sys, time

root, out = int(sys.argv[1]), sys.argv[2]
tick = os.sysconf("SC_CLK_TCK")
seen = {}


def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        # The command name may hold spaces: the fields start after its ')'.
        fields = f.read().rsplit(")", 1)[1].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(v) for v in fields[11:15])
    return ppid, (utime + stime + cutime + cstime) / tick


def sample():
    parents, cpu = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            parents[int(name)], cpu[int(name)] = stat(name)
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if b"eval-worker" not in f.read().split(b"\0"):
                    del cpu[int(name)]
        except (OSError, ValueError, IndexError):
            cpu.pop(int(name), None)
    for pid, seconds in cpu.items():
        ancestor = parents.get(pid)
        while ancestor and ancestor != root:
            ancestor = parents.get(ancestor)
        if ancestor == root:
            seen[pid] = max(seen.get(pid, 0.0), seconds)


def finish(*_):
    with open(out, "w") as f:
        json.dump({"compile_cpu_s": round(sum(seen.values()), 2), "workers": len(seen)}, f)
    sys.exit(0)


signal.signal(signal.SIGTERM, finish)
signal.signal(signal.SIGINT, finish)
while True:
    sample()
    time.sleep(0.1)
