"""What the GPU scripts' Markdown tables share (scripts/gpu-*.sh, run from
the repository root: `sys.path.insert(0, "scripts/lib")`)."""
import os
import shutil
import subprocess


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
