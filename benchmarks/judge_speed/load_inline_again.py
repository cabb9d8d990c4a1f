"""A KernelBench-style C++ `load_inline` answer judged new, then the same source again, by the real judge.

The answer is benchmarks/kernelbench_style/relu_cpp_load_inline.py on task L1/1_ReLU (cpu size), each round
with a fresh comment in its C++ source: the first evaluation builds it (the split build), the next ones find
it in the cache by content. Prints, per evaluation, the build seconds the worker spent serving the candidate's
build requests, whether they all came from the cache, the load stage (process ready, builds served, module
imported), and the whole evaluation. Usage:

    python benchmarks/judge_speed/load_inline_again.py [--rounds 3] [--again 2] [--flags default|O3_openmp]
        [--out FILE.json]

The pool's first evaluation (its worker's start, and on an empty cache the precompiled headers) is reported
apart as `first`. Set KERNELGYM_CACHE to a folder of its own to keep other caches out of it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository root

SOURCE = (HERE.parent / "kernelbench_style" / "relu_cpp_load_inline.py").read_text()
O3_OPENMP = ',\n                   extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"]'


def answer(flags: str) -> str:
    """The answer with torch's default flags (no extra_cflags) or its own `-O3 -fopenmp`."""
    return SOURCE if flags == "O3_openmp" else SOURCE.replace(O3_OPENMP, "")


def judged(pool, task, source: str) -> dict:
    started = time.perf_counter()
    result = pool.evaluate(task, source, backend="cpp")
    wall_s = time.perf_counter() - started
    assert result.load is not None and result.load.loaded, (result.verdict, result.reasons)
    return {"verdict": result.verdict.value, "wall_s": round(wall_s, 3), "build_s": result.build.build_s,
            "cached": result.build.cached, "load_s": result.stage_s.get("load"),
            "timing_s": result.stage_s.get("timing"),
            "beyond_timing_s": round(wall_s - result.stage_s.get("timing", 0.0), 3)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--again", type=int, default=2, help="evaluations of each new source after its first")
    parser.add_argument("--flags", choices=("default", "O3_openmp"), default="default")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import kernelgym
    from kernelgym.tasks import bundled

    task = bundled().get("L1/1_ReLU")
    base = answer(args.flags)
    rows: dict[str, list[dict]] = {"new": [], "again": []}
    with kernelgym.EvalPool(workers=1) as pool:
        first = judged(pool, task, base.replace('r"""', f'r"""\n// first {uuid.uuid4().hex}', 1))
        print(json.dumps({"first": first}), flush=True)
        for _ in range(args.rounds):
            source = base.replace('r"""', f'r"""\n// fresh {uuid.uuid4().hex}', 1)
            for kind in ["new"] + ["again"] * args.again:
                row = judged(pool, task, source)
                rows[kind].append(row)
                print(json.dumps({kind: row}), flush=True)
    summary = {kind: {key: statistics.median(r[key] for r in found)
                      for key in ("wall_s", "build_s", "load_s", "beyond_timing_s")}
               for kind, found in rows.items() if found}
    print(json.dumps({"flags": args.flags, "median": summary}), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps({"flags": args.flags, "first": first, **rows, "median": summary},
                                             indent=1))


if __name__ == "__main__":
    main()
