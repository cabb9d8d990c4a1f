"""How stable the judge's speedup is from one evaluation to the next: the same solution judged N times on a
fresh evaluation each (new processes, new inputs), the distribution of its speedup and the CV.

    python benchmarks/judge_trust/timing_stability.py [--repeats 10] [--backend cpp] [--label NAME] \
        [--out FILE.md]

Issue 14 asks for a CV of 1% or less over 10 repeats for each of 5 benchmark solutions.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
from pathlib import Path

import torch

import kernelgym
from kernelgym.solutions import examples
from kernelgym.tasks import bundled

HERE = Path(__file__).parent
TASKS = ("L1/1_ReLU", "L1/10_Softmax", "L1/15_LayerNorm", "L1/2_Matmul_Square", "L2/1_Gemm_BiasAdd_ReLU")


def judge_repeatedly(task_id: str, backend: str, repeats: int, pool) -> dict:
    task = bundled().get(task_id)
    source = next(e for e in examples(backend) if e.task_id.endswith(task_id)).source
    speedups, reference_ms, candidate_ms, verdicts = [], [], [], []
    for _ in range(repeats):
        result = pool.evaluate(task, source, backend=backend)
        verdicts.append(result.verdict.value)
        if result.speedup:
            speedups.append(result.speedup)
            reference_ms.append(result.timing.reference.median_ms)
            candidate_ms.append(result.timing.candidate.median_ms)
    return {"task": task_id, "verdicts": verdicts, "speedups": speedups,
            "reference_ms": reference_ms, "candidate_ms": candidate_ms}


def cv(values: list[float]) -> float | None:
    return statistics.stdev(values) / statistics.fmean(values) if len(values) > 1 else None


def row(entry: dict) -> str:
    s = entry["speedups"]
    if not s:
        return f"| {entry['task']} | {', '.join(entry['verdicts'])} | - | - | - | - | - |"
    return (f"| {entry['task']} | {len(s)}/{len(entry['verdicts'])} ok | {statistics.median(s):.3f} | "
            f"{min(s):.3f}-{max(s):.3f} | {cv(s):.1%} | {cv(entry['reference_ms']):.1%} | "
            f"{cv(entry['candidate_ms']):.1%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--backend", default="cpp")
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--label", default="", help="a name for this run in the report (e.g. the commit)")
    parser.add_argument("--out", default=str(HERE.parent / "results" / "judge_trust" / "timing_stability.md"))
    args = parser.parse_args()
    entries = []
    with kernelgym.EvalPool(workers=1) as pool:
        for task_id in args.tasks.split(","):
            entry = judge_repeatedly(task_id, args.backend, args.repeats, pool)
            entries.append(entry)
            print(json.dumps(entry), flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE, check=False).stdout.strip()
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else platform.machine()
    lines = [
        f"## {args.label or commit}: {args.backend}, {args.repeats} evaluations per solution",
        "",
        (f"- date {datetime.date.today()}; {device}, {platform.node()}, {torch.get_num_threads()} threads; "
         f"python {platform.python_version()}, torch {torch.__version__}; commit {commit}"),
        (f"- command: `python benchmarks/judge_trust/timing_stability.py --repeats {args.repeats} "
         f"--backend {args.backend}{' --label ' + repr(args.label) if args.label else ''}`"),
        "",
        "| solution | ok | median speedup | range | speedup CV | reference ms CV | candidate ms CV |",
        "|---|---|---|---|---|---|---|",
        *[row(e) for e in entries],
        "",
        "Speedups, in order: " + "; ".join(f"{e['task']}: " + ", ".join(f"{s:.3f}" for s in e["speedups"])
                                           for e in entries),
        "",
    ]
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
