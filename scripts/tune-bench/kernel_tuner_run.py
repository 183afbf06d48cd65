#!/usr/bin/env python3
"""Kernel Tuner's brute force over a gevo spec's [tune] table, on the GPU
(scripts/tune-bench.sh runs it; docs in that script's header).

For each GPU-sized test of the spec (`[tests.gpu]` over `[tests]`; the sets
given with --sets), Kernel Tuner (`lang="cupy"`: NVRTC builds, CUDA-event
timing, `iterations` launches per configuration, its objective the mean)
compiles and times every configuration of the spec's [tune] values: the
kernel source is the spec's `ir` with `.cu` for `.ll`, the constants are
Kernel Tuner's tunable parameters (it prepends `#define NAME value`, which
the source's `#ifndef` guards give way to), `block_size_names` are the
spec's `launch.block` names, and `problem_size` the dimensions the spec's
grid divides by them (`grid = ["cdiv(nx, BLOCK_X)", ...]`), so Kernel Tuner
launches exactly the spec's grid. Inputs follow the spec's [[args]]
(uniform fills drawn with numpy from the test's seed, `out` buffers zeroed,
scalars from their expressions; not gevod's generator, the same
semantics). Every configuration's outputs are checked against the source
configuration's (Kernel Tuner's `answer` and a `verify` that records the
largest absolute difference instead of stopping the run), and for tile2d the
source configuration's against a numpy stencil.

A pipeline spec ([[launches]]): Kernel Tuner times one kernel, so the
kernel tuned is the one launched with a [tune] constant as its block
(pyramid's pyr_step), alone, with its launch's arguments; a loop's variable
is 0 (the first step) and an input the pipeline's earlier launches would
fill is filled as its [[args]] entry says. This is how a user tunes a
kernel of a pipeline with Kernel Tuner; gevo times the whole pipeline.

Writes JSON (--out): per test its configurations with their times (ms), the
error against the source's outputs, and the best configuration (the fastest
that passed); with --ptx-dir, also the best configuration's PTX as NVRTC
builds it, for measuring Kernel Tuner's build with `gevod run --ptx`.

  kernel_tuner_run.py --spec S.gevo.toml --out kt.json [--sets train,heldout]
                      [--iterations N] [--ptx-dir DIR] [--dry-run]

--dry-run needs neither a GPU nor CuPy: it builds Kernel Tuner's search
space for the [tune] values and prints the configurations, tests, problem
sizes and arguments that a run would use.
"""
import argparse
import itertools
import json
import math
import os
import re
import sys
import time
import tomllib

import numpy as np

NP_TYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "u32": np.uint32,
            "i64": np.int64, "u64": np.uint64, "i8": np.int8, "u8": np.uint8,
            "i16": np.int16, "u16": np.uint16}


def evaluate(expr, params):
    """A spec expression (docs/spec.md, "Expressions") with the test's
    parameters: numbers, names, + - * / %, cdiv, ceil, floor, min, max."""
    if isinstance(expr, (int, float)):
        return expr
    if not re.fullmatch(r"[\w\s.+\-*/%(),]*", expr):
        raise ValueError(f"not a spec expression: {expr!r}")
    names = {"cdiv": lambda a, b: -(-a // b) if float(a).is_integer() and float(b).is_integer()
             else math.ceil(a / b),
             "ceil": math.ceil, "floor": math.floor, "min": min, "max": max}
    for name in re.findall(r"[A-Za-z_]\w*", expr):
        if name not in names and name not in params:
            raise ValueError(f"{expr!r}: unknown parameter {name!r} (parameters: {sorted(params)})")
    return eval(expr, {"__builtins__": {}}, {**names, **params})  # noqa: S307 (checked above)


class Bench:
    """What the spec says a tuning run needs."""

    def __init__(self, spec_path, sets):
        self.spec_path = spec_path
        with open(spec_path, "rb") as f:
            self.spec = spec = tomllib.load(f)
        tune = spec.get("tune")
        if not tune:
            sys.exit(f"{spec_path}: no [tune] table")
        self.constants = {k: v for k, v in tune.items() if k not in ("ir", "source", "chosen")}
        self.source_config = dict(tune["source"])
        self.source_path = os.path.join(os.path.dirname(spec_path),
                                        re.sub(r"\.(ll|bc)$", "", spec["ir"]) + ".cu")
        with open(self.source_path) as f:
            self.source = f.read()
        launch, self.loop_vars = self.tuned_launch()
        self.kernel = launch["kernel"]
        self.launch_args = launch["args"]
        blocks = launch["block"] if isinstance(launch["block"], list) else [launch["block"]]
        grids = launch["grid"] if isinstance(launch["grid"], list) else [launch["grid"]]
        if launch.get("shared_bytes", 0) not in (0, "0"):
            sys.exit(f"{spec_path}: dynamic shared memory is not handled here")
        # Kernel Tuner's grid: ceil(problem_size[i] / block[i]); the spec's
        # must say the same (cdiv(<parameter>, <block constant>)).
        self.block_names = []
        self.problem_names = []
        for i, (b, g) in enumerate(zip(blocks, grids)):
            m = re.fullmatch(r"\s*cdiv\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*", str(g))
            if not (isinstance(b, str) and b in self.constants and m and m.group(2) == b):
                sys.exit(f"{spec_path}: launch dimension {i}: expected block = \"NAME\" of [tune] and "
                         f"grid = \"cdiv(size, NAME)\", found block {b!r}, grid {g!r}")
            self.block_names.append(b)
            self.problem_names.append(m.group(1))
        tests = spec["tests"]
        gpu = tests.get("gpu", {})
        self.tests = []
        for s in sets:
            for i, t in enumerate(gpu.get(s, tests[s])):
                params = {k: v for k, v in t.items() if k != "seed"}
                self.tests.append({"test": f"{s}[{i}]", "set": s, "seed": t["seed"], "params": params})
        self.tolerance = spec["acceptance"].get("tolerance", 0.0)

    def tuned_launch(self):
        """The launch Kernel Tuner times, with its arguments (names of
        [[args]] or inline scalars), and the loop variables around it: a
        [launch] spec's one launch, or the one launch of a pipeline whose
        block is a [tune] constant."""
        spec = self.spec
        if isinstance(spec["kernel"], str) and "launch" in spec:
            return {**spec["launch"], "kernel": spec["kernel"],
                    "args": [a["name"] for a in spec["args"]]}, []
        found = []

        def visit(launches, loops):
            for launch in launches:
                if "body" in launch:
                    visit(launch["body"], loops + [launch["for"]])
                    continue
                blocks = launch["block"] if isinstance(launch["block"], list) else [launch["block"]]
                if any(isinstance(b, str) and b in self.constants for b in blocks):
                    found.append((launch, loops))
        visit(spec.get("launches", []), [])
        kernels = {launch["kernel"] for launch, _ in found}
        if len(kernels) != 1:
            sys.exit(f"{self.spec_path}: expected one kernel launched with a [tune] constant as its block, "
                     f"found {sorted(kernels) or 'none'}")
        return found[0]

    def configurations(self):
        names = list(self.constants)
        return [dict(zip(names, vs)) for vs in itertools.product(*self.constants.values())]

    def problem_size(self, test):
        return tuple(int(evaluate(n, test["params"])) for n in self.problem_names)

    def arguments(self, test, allocate=True):
        """The kernel's arguments for `test` (numpy arrays and scalars), and
        the indices of the out buffers."""
        rng = np.random.default_rng(test["seed"])
        params = {**test["params"], **{v: 0 for v in self.loop_vars}}
        declared = {a["name"]: a for a in self.spec["args"]}
        args, outputs = [], []
        for i, name in enumerate(self.launch_args):
            if isinstance(name, dict):  # an inline scalar of the launch
                args.append(NP_TYPES[name["type"]](evaluate(name["value"], params)))
                continue
            a = declared[name]
            dtype = NP_TYPES[a["type"]]
            if a["kind"] == "scalar":
                args.append(dtype(evaluate(a["value"], params)))
                continue
            n = int(evaluate(a["len"], params))
            if a["role"] in ("out", "inout"):
                outputs.append(i)
            if not allocate:
                args.append((a["name"], n, a["type"]))
                continue
            fill = a.get("fill")
            if a["role"] == "out" or fill is None:
                args.append(np.zeros(n, dtype=dtype))
            elif "uniform" in fill:
                lo, hi = fill["uniform"]
                args.append(rng.uniform(lo, hi, n).astype(dtype))
            elif "normal" in fill:
                mean, std = fill["normal"]
                args.append(rng.normal(mean, std, n).astype(dtype))
            elif "int_range" in fill:
                lo, hi = fill["int_range"]
                args.append(rng.integers(lo, hi, n, endpoint=True).astype(dtype))
            elif "constant" in fill:
                args.append(np.full(n, fill["constant"], dtype=dtype))
            else:
                sys.exit(f"{self.spec_path}: args[{i}].fill {fill}: not handled here")
        return args, outputs


def numpy_reference(kernel, args):
    """The source's outputs computed with numpy, for the kernels we know
    (tile2d: the 5-point Jacobi sweep, in the kernel's order of additions;
    pyr_step: one smoothing step)."""
    if kernel == "pyr_step":
        cur, n, s = args[0], int(args[2]), int(args[3])
        out = cur.copy()
        lo, hi = s + 1, n - 1 - s
        if hi > lo:
            out[lo:hi] = (cur[lo - 1:hi - 1] + 2 * cur[lo:hi] + cur[lo + 1:hi + 1]) >> 2
        return {1: out}
    if kernel != "tile2d":
        return None
    inp, nx, ny = args[0], int(args[2]), int(args[3])
    a = inp.reshape(ny, nx)
    out = a.copy()
    if nx > 2 and ny > 2:
        c, n, s = a[1:-1, 1:-1], a[:-2, 1:-1], a[2:, 1:-1]
        w, e = a[1:-1, :-2], a[1:-1, 2:]
        out[1:-1, 1:-1] = np.float32(0.2) * ((((c + n) + s) + w) + e)
    return {1: out.reshape(-1)}


def nvrtc_ptx(source, config, kernel):
    """PTX of `source` with the configuration's constants, as NVRTC builds
    it for this GPU (the compiler behind Kernel Tuner's CuPy backend)."""
    import cupy as cp
    from cupy_backends.cuda.libs import nvrtc
    options = [f"--gpu-architecture=compute_{cp.cuda.Device().compute_capability}", "--std=c++11"]
    options += [f"-D{k}={v}" for k, v in config.items()]
    prog = nvrtc.createProgram(source, f"{kernel}.cu", [], [])
    try:
        nvrtc.compileProgram(prog, options)
        ptx = nvrtc.getPTX(prog)
    finally:
        nvrtc.destroyProgram(prog)
    if isinstance(ptx, bytes):
        ptx = ptx.decode()
    return ptx.rstrip("\x00"), options


def tune_one(bench, test, iterations, ptx_dir):
    import kernel_tuner

    args, outputs = bench.arguments(test)
    problem_size = bench.problem_size(test)
    common = dict(lang="cupy", block_size_names=list(bench.block_names), quiet=True)
    # The source configuration's outputs: the answer every other is held to.
    t0 = time.perf_counter()
    ran = kernel_tuner.run_kernel(bench.kernel, bench.source, problem_size, args,
                                  bench.source_config, **common)
    answer = [ran[i] if i in outputs else None for i in range(len(args))]
    reference = numpy_reference(bench.kernel, args)
    reference_check = None
    if reference is not None:
        err = max(float(np.max(np.abs(reference[i].astype(np.float64) - answer[i]))) for i in reference)
        reference_check = {"max_abs": err, "passed": err <= bench.tolerance}
        print(f"kernel_tuner_run: {test['test']}: source configuration against numpy: max_abs {err:.3g}",
              file=sys.stderr)

    # verify records the largest difference and lets the run go on (a False
    # would stop Kernel Tuner); the metric reads it for the configuration
    # just verified (verification, benchmark and metrics run in that order
    # for each configuration).
    last = {}

    def verify(expected, result, atol=None):
        err = 0.0
        for e, r in zip(expected, result):
            if e is not None:
                d = np.abs(np.asarray(e, dtype=np.float64).ravel() - np.asarray(r, dtype=np.float64).ravel())
                err = max(err, float(np.nanmax(d)) if d.size else 0.0)
                if np.isnan(d).any():
                    err = math.inf
        last["error"] = err
        return True

    metrics = {"max_abs_error": lambda p: last.pop("error", math.nan)}
    results, env = kernel_tuner.tune_kernel(
        bench.kernel, bench.source, problem_size, args, dict(bench.constants),
        answer=answer, verify=verify, atol=bench.tolerance, metrics=metrics,
        strategy="brute_force", iterations=iterations, **common)
    seconds = time.perf_counter() - t0
    rows = []
    for r in results:
        config = {k: int(r[k]) for k in bench.constants}
        error = r.get("__error__")
        time_ms = r.get("time")
        ok = error is None and isinstance(time_ms, float)
        max_abs = r.get("max_abs_error")
        rows.append({
            "configuration": config,
            "time_ms": time_ms if ok else None,
            "times_ms": [float(x) for x in r.get("times", [])] if ok else [],
            "max_abs_error": max_abs if ok else None,
            "passed": bool(ok and max_abs is not None and max_abs <= bench.tolerance),
            "error": None if error is None else f"{type(error).__name__}: {error}",
        })
    passed = [r for r in rows if r["passed"]]
    best = min(passed, key=lambda r: r["time_ms"]) if passed else None
    source_row = next((r for r in rows if r["configuration"] == bench.source_config), None)
    out = {
        "test": test["test"], "set": test["set"], "seed": test["seed"], "params": test["params"],
        "problem_size": list(problem_size), "reference_check": reference_check,
        "configurations": rows, "tuning_seconds": seconds,
        "source": {"configuration": bench.source_config,
                   "time_ms": source_row["time_ms"] if source_row else None},
        "best": None,
    }
    if best:
        out["best"] = {"configuration": best["configuration"], "time_ms": best["time_ms"],
                       "ptx": None, "nvrtc_options": None}
        if ptx_dir:
            name = "x".join(str(v) for v in best["configuration"].values())
            try:
                ptx, options = nvrtc_ptx(bench.source, best["configuration"], bench.kernel)
                path = os.path.join(ptx_dir, f"{bench.kernel}.kt.{name}.ptx")
                with open(path, "w") as f:
                    f.write(ptx)
                out["best"]["ptx"], out["best"]["nvrtc_options"] = path, options
            except Exception as e:  # the measurement goes on without it
                print(f"kernel_tuner_run: no NVRTC PTX for {name}: {e}", file=sys.stderr)
    return out, env


def dry_run(bench):
    from kernel_tuner.searchspace import Searchspace
    import kernel_tuner

    space = Searchspace(dict(bench.constants), None, 1024, block_size_names=list(bench.block_names))
    mine = bench.configurations()
    theirs = [dict(zip(bench.constants, c)) for c in space.list]
    print(f"kernel_tuner {kernel_tuner.__version__}: {space.size} configurations in its search space "
          f"(the spec's [tune]: {len(mine)})")
    for c in theirs:
        print("  " + " ".join(f"{k}={v}" for k, v in c.items()))
    if sorted(map(str, theirs)) != sorted(map(str, mine)):
        sys.exit("kernel_tuner_run: Kernel Tuner's search space is not the spec's configurations")
    print(f"source configuration: {bench.source_config}; kernel {bench.kernel} from {bench.source_path}")
    print(f"block_size_names = {bench.block_names}; problem_size = {bench.problem_names}")
    for t in bench.tests:
        args, outputs = bench.arguments(t, allocate=False)
        print(f"{t['test']} {t['params']} seed {t['seed']}: problem_size {bench.problem_size(t)}, "
              f"arguments {args}, outputs {outputs}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default="tests/fixtures/tune/tile2d.gevo.toml")
    ap.add_argument("--out")
    ap.add_argument("--sets", default="train,heldout")
    ap.add_argument("--iterations", type=int, default=32)
    ap.add_argument("--ptx-dir")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    bench = Bench(a.spec, a.sets.split(","))
    if a.dry_run:
        dry_run(bench)
        return
    if not a.out:
        sys.exit("kernel_tuner_run: --out is needed (or --dry-run)")
    import kernel_tuner

    sizes, env = [], {}
    for t in bench.tests:
        print(f"kernel_tuner_run: {t['test']} {t['params']}: {len(bench.configurations())} configurations",
              file=sys.stderr)
        size, env = tune_one(bench, t, a.iterations, a.ptx_dir)
        best = size["best"]
        said = f"best {best['configuration']}, {best['time_ms']:.4f} ms" if best else "no configuration passed"
        print(f"kernel_tuner_run: {t['test']}: {said} ({size['tuning_seconds']:.1f} s)", file=sys.stderr)
        sizes.append(size)
    result = {
        "tool": "kernel_tuner", "version": kernel_tuner.__version__, "lang": "cupy",
        "strategy": "brute_force", "iterations": a.iterations, "objective": "time (mean, ms)",
        "spec": a.spec, "kernel": bench.kernel, "source": bench.source_path,
        "tune_params": bench.constants, "source_configuration": bench.source_config,
        "block_size_names": bench.block_names, "device": env.get("device_name"),
        "cuda_version": env.get("cuda_version"), "tolerance": bench.tolerance,
        "sizes": sizes,
    }
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1, default=str)


if __name__ == "__main__":
    main()
