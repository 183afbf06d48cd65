"""What the GPU scripts' Markdown tables share (scripts/gpu-*.sh, run from
the repository root: `sys.path.insert(0, "scripts/lib")`)."""
import os
import shutil
import subprocess

# The utilization's compile-worker phases (`spent`, seconds), in the order
# the tables print them: what `Spent::compile_worker_s` sums. ptxas is two,
# on the guarded builds (outputs checked) and on the timed ones; results
# from before 2026-11-30 have no `assemble_guarded_s` (read as 0).
COMPILE_WORKER_PHASES = ("prescreen_s", "assemble_guarded_s", "assemble_s", "compile_s", "generated_s")
GPU_WORKER_PHASES = ("jit_load_s", "check_s", "timing_s", "profile_s")


def compile_cpu(u):
    """The compile workers' CPU seconds (getrusage, their ptxas runs
    included) per variant measured, "-" where the build did not count them."""
    spent, measured = u.get("spent") or {}, u.get("measured", 0)
    if "compile_cpu_s" not in spent or not measured:
        return "-"
    return f"{spent['compile_cpu_s'] / measured:.3f}"


def promotion_share(u):
    """Promotion's part of a search's utilization: its compile workers' CPU
    seconds and its GPU seconds, each as a share of the whole, and the
    variants it measured ("-" where the build did not split it out)."""
    if "promotion" not in u:
        return "-"
    spent, promotion = u.get("spent") or {}, u["promotion"]
    def share(phases):
        whole = sum(spent.get(k, 0.0) for k in phases)
        return 100 * sum(promotion.get(k, 0.0) for k in phases) / whole if whole else 0.0
    return (f"{share(COMPILE_WORKER_PHASES):.0f}% / {share(GPU_WORKER_PHASES):.0f}% / "
            f"{u.get('promotion_measured', 0)}")


def gpus():
    """This host's GPUs as nvidia-smi names them ("name, driver"), one a
    line; none where there is no nvidia-smi."""
    if not shutil.which("nvidia-smi"):
        return []
    return subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
        capture_output=True, text=True).stdout.strip().splitlines()


def host():
    """The host's GPUs and CPUs, in one line."""
    gpu = gpus()
    return f"GPUs: {len(gpu)} x {gpu[0] if gpu else 'unknown'}. CPUs: {os.cpu_count()}."


def header(columns):
    """A Markdown table's header row and its separator."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))


def write_section(path, name, body):
    """Replaces the text between `<!-- bench:NAME -->` and its end marker in
    the Markdown file `path` with `body` (appends the section where there is
    none)."""
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    section = f"{begin}\n{body}{end}"
    old = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    b, e = old.find(begin), old.find(end)
    if b >= 0 and e > b:
        new = old[:b] + section + old[e + len(end):]
    else:
        new = old.rstrip() + "\n\n" + section + "\n"
    open(path, "w").write(new)
