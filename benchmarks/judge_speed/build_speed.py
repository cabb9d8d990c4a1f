"""How long a new KernelBench-style `load_inline` build takes: torch's own build against the split build.

Each case builds fresh sources (a nonce comment makes every build new) into a private cache, first once to
warm the precompiled headers and the bindings (reported apart as `first_s`), then `--runs` times. Reports the
median wall-clock seconds and the median CPU seconds of the compilers (children's user + system time: on a
shared, loaded machine the wall clock mostly measures the other tenants). Usage:

    python benchmarks/judge_speed/build_speed.py [--runs 3] [--modes torch_load_inline,torch,split]
        [--cases cpp,cpp_O3_openmp] [--out FILE.json] [--cache DIR]

Modes: `torch_load_inline` is torch's own `load_inline` in a fresh process with an empty extensions folder
(KernelBench's harness); `torch` is kernelgym's fallback (torch's build, its precompiled header warm);
`split` is kernelgym's build (the first build also runs `torch_ext_split.warm_up`, as a GPU pool does at
start, so the runs measure a new solution on a warm machine).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository root


def _inline_source(path: Path) -> str:
    return path.read_text().split('r"""')[1].split('"""')[0]


CPP_RELU = _inline_source(HERE.parent / "kernelbench_style" / "relu_cpp_load_inline.py")
CASES = {  # name: (cpp_sources, functions, extra_cflags, extra_ldflags)
    "cpp": (CPP_RELU, ("relu_forward",), (), ()),
    "cpp_O3_openmp": (CPP_RELU, ("relu_forward",), ("-O3", "-fopenmp"), ("-fopenmp",)),
}


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


TORCH_LOAD_INLINE = """
import sys, time
from torch.utils.cpp_extension import load_inline
source, functions, cflags, ldflags = eval(sys.stdin.read())
load_inline(name="kg_bench_torch", cpp_sources=[source], functions=list(functions), extra_cflags=list(cflags),
            extra_ldflags=list(ldflags))
"""


def torch_load_inline_once(case: str, nonce: str) -> dict:
    """torch's own `load_inline` as KernelBench's harness runs it: a fresh process, an empty extensions
    folder (wall and CPU seconds of the whole process, its compilers included)."""
    import subprocess

    source, functions, cflags, ldflags = CASES[case]
    spec = repr((f"{source}\n// {nonce}\n", functions, cflags, ldflags))
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=tempfile.mkdtemp(prefix="kg-torch-ext-"))
    cpu, wall = children_cpu_s(), time.perf_counter()
    subprocess.run([sys.executable, "-c", TORCH_LOAD_INLINE], input=spec, text=True, env=env, check=True,
                   capture_output=True)
    return {"case": case, "mode": "torch_load_inline", "wall_s": round(time.perf_counter() - wall, 2),
            "cpu_s": round(children_cpu_s() - cpu, 2)}


def build_once(case: str, mode: str, nonce: str) -> dict:
    from kernelgym.build import torch_ext

    if mode == "torch_load_inline":
        return torch_load_inline_once(case, nonce)
    source, functions, cflags, ldflags = CASES[case]
    request = torch_ext.ExtensionRequest(
        f"kg_bench_{case}", (f"{source}\n// {nonce}\n",), (), functions, cflags, (), ldflags
    )
    torch_ext.SPLIT_BUILD = mode == "split"
    cpu, wall = children_cpu_s(), time.perf_counter()
    folder = torch_ext.build(request)
    row = {
        "case": case,
        "mode": mode,
        "wall_s": round(time.perf_counter() - wall, 2),
        "cpu_s": round(children_cpu_s() - cpu, 2),
    }
    steps = folder / "build.json"
    if steps.exists():
        row["steps"] = json.loads(steps.read_text())
    elif mode == "split":
        row["fell_back"] = True
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--modes", default="torch,split")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--out", default=None)
    parser.add_argument("--cache", default=None, help="reuse DIR/<mode> as the cache (default: a fresh one)")
    args = parser.parse_args()
    summary = []
    for mode in args.modes.split(","):
        cache = Path(args.cache) / mode if args.cache else tempfile.mkdtemp(prefix=f"kg-build-speed-{mode}-")
        os.environ["KERNELGYM_CACHE"] = str(cache)  # kernels.cache_root() reads it on every build
        for case in args.cases.split(","):
            if mode == "split":  # what a pool's background warm-up leaves (headers, common binders)
                from kernelgym.build import torch_ext_split

                torch_ext_split.warm_up(extra_cflags=CASES[case][2])
            first = build_once(case, mode, f"first {time.time_ns()}")
            runs = [build_once(case, mode, f"run {i} {time.time_ns()}") for i in range(args.runs)]
            row = {
                "case": case,
                "mode": mode,
                "first_wall_s": first["wall_s"],
                "first_cpu_s": first["cpu_s"],
                "median_wall_s": statistics.median(r["wall_s"] for r in runs),
                "median_cpu_s": statistics.median(r["cpu_s"] for r in runs),
                "runs": runs,
            }
            summary.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "runs"}), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
