"""Per-evaluation wall time, cold (a source never built before) and warm (the same source again), for
kernelgym and for a plain KernelBench-style path (fresh process, load_inline, 5 + 100 trials), side by side.

    python benchmarks/judge_speed/eval_speed.py [--backends cpp,triton,cuda] [--repeats 5] \
        [--out benchmarks/results/judge_speed/eval_speed.md]

A backend runs only where it can (cpp on any machine; triton and cuda on a GPU).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import time
import uuid
from pathlib import Path

import torch

import kernelgym
from kernelgym.solutions import examples
from kernelgym.stats import median
from kernelgym.tasks import bundled

HERE = Path(__file__).parent
KB_STYLE = HERE.parent / "kernelbench_style"  # the KernelBench-style harness and sources
RESULTS = HERE.parent / "results" / "judge_speed"
TASK = "L1/1_ReLU"


def fresh(source: str) -> str:
    """The same solution with a unique comment in its kernel source, so nothing is cached."""
    marker = f"// fresh {uuid.uuid4().hex}\n"
    for opener in ('r"""\n', 'r"""'):
        if opener in source:
            return source.replace(opener, opener + marker, 1)
    return f"# fresh {uuid.uuid4().hex}\n" + source


def kernelgym_times(backend: str, size: str, repeats: int) -> dict:
    task = bundled().get(TASK)
    source = next(e for e in examples(backend) if e.task_id.endswith(TASK)).source
    with kernelgym.EvalPool(workers=1) as pool:
        pool.evaluate(task, source, backend=backend, size=size)  # worker start, one-time imports
        cold, warm, overhead, speedups = [], [], [], []
        for _ in range(repeats):
            new = fresh(source)
            for bucket in (cold, warm):
                started = time.perf_counter()
                result = pool.evaluate(task, new, backend=backend, size=size)
                bucket.append(time.perf_counter() - started)
                assert result.ok, result.reasons
            speedups.append(result.speedup)
            timed = result.stage_s.get("timing", 0.0) + result.stage_s.get("profile", 0.0)
            overhead.append(warm[-1] - timed)
    return {"cold_s": median(cold), "warm_s": median(warm), "warm_harness_s": median(overhead),
            "speedup": median(s for s in speedups if s),
            "stage_s": result.stage_s}


def kernelbench_style_times(backend: str, size: str, repeats: int) -> dict | None:
    solution = KB_STYLE / f"relu_{backend}_load_inline.py"
    if not solution.exists():
        return None
    task = bundled().get(TASK)
    task_file = Path("/tmp") / f"kg_task_{size}.py"
    task_file.write_text(task.source_at(size))
    device = "cuda" if backend != "cpp" else "cpu"
    runs = []
    for i in range(2):  # the first builds (cold), the second finds torch's extension cache (warm)
        started = time.perf_counter()
        out = subprocess.run([sys.executable, str(KB_STYLE / "harness.py"), str(task_file),
                              str(solution), device], capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        if out.returncode == 0:
            data = json.loads(out.stdout.strip().splitlines()[-1])
        else:
            data = {"error": out.stderr[-500:]}
        runs.append({"wall_s": wall, **data})
    return {"cold_s": runs[0]["wall_s"], "warm_s": runs[1]["wall_s"], "speedup": runs[1].get("speedup"),
            "note": runs[0].get("error", "")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="cpp,triton,cuda")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=str(RESULTS / "eval_speed.md"))
    args = parser.parse_args()
    gpu = torch.cuda.is_available()
    rows = []
    for backend in args.backends.split(","):
        if backend != "cpp" and not gpu:
            continue
        size = "gpu" if backend != "cpp" else "cpu"
        ours = kernelgym_times(backend, size, args.repeats)
        theirs = kernelbench_style_times(backend, size, 1)
        rows.append((backend, size, ours, theirs))
        print(backend, json.dumps(ours), json.dumps(theirs), flush=True)
    device = torch.cuda.get_device_name() if gpu else platform.processor() or platform.machine()
    lines = [
        "# Evaluation wall time: kernelgym vs a KernelBench-style path",
        "",
        (f"- date: {datetime.date.today()}; machine: {device}, {platform.node()}; python "
         f"{platform.python_version()}, torch {torch.__version__}, kernelgym {kernelgym.__version__}"),
        (f"- task {TASK}; kernelgym: one warm pool, median of {args.repeats} new candidates (cold: never "
         "built; warm: the same source again); KernelBench-style: fresh process, load_inline, 5 correctness "
         "+ 100 timed trials"),
        (f"- command: `python benchmarks/judge_speed/eval_speed.py --backends {args.backends} "
         f"--repeats {args.repeats}`"),
        "",
        ("| backend | size | kernelgym cold s | kernelgym warm s | kernelgym warm harness s | "
         "KernelBench-style cold s | KernelBench-style warm s | speedup (kernelgym / KB-style) |"),
        "|---|---|---|---|---|---|---|---|",
    ]
    for backend, size, ours, theirs in rows:
        kb_cold = f"{theirs['cold_s']:.2f}" if theirs else "-"
        kb_warm = f"{theirs['warm_s']:.2f}" if theirs else "-"
        kb_speed = f"{theirs['speedup']:.3f}" if theirs and theirs.get("speedup") else "-"
        lines.append(f"| {backend} | {size} | {ours['cold_s']:.3f} | {ours['warm_s']:.3f} | "
                     f"{ours['warm_harness_s']:.3f} | {kb_cold} | {kb_warm} | {ours['speedup']:.3f} / "
                     f"{kb_speed} |")
    lines += ["", "Stage seconds of the last kernelgym evaluation per backend:", ""]
    lines += [f"- {backend}: {json.dumps(ours['stage_s'])}" for backend, _, ours, _ in rows]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
