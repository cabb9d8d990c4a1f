"""Warm evaluations of one solution on this machine: the median of each part of the timing stage.

    python benchmarks/judge_speed/timing_parts.py TASK_ID SOLUTION_FILE [COUNT] [--backend cpp]
    python benchmarks/judge_speed/timing_parts.py TASK_ID SOLUTION_FILE [COUNT] --parts reference \
        [--forget-costs]

On a GPU these parts are what holds the timing slot (inputs made, inputs mapped, both sides run, outputs
checked). `--parts reference` gives the reference process's start-up parts instead; `--forget-costs` drops
the cached task costs before every evaluation, so each one counts the task's FLOPs and bytes again (the
first evaluation of a task on a machine). Run it in two worktrees to compare two trees side by side.
"""

from __future__ import annotations

import argparse
import statistics

from kernelgym import kernels
from kernelgym.tasks import bundled
from kernelgym.workers.pool import EvalPool

KEYS = {"timing": ["timing", "timing_inputs", "timing_map", "timing_run", "timing_check", "correctness"],
        "reference": ["reference", "reference_hello", "reference_task", "reference_model", "reference_probe",
                      "reference_roofline"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task_id")
    parser.add_argument("solution")
    parser.add_argument("count", type=int, nargs="?", default=12)
    parser.add_argument("--backend", default="cpp")
    parser.add_argument("--parts", choices=sorted(KEYS), default="timing")
    parser.add_argument("--forget-costs", action="store_true", help="recount every task's cost")
    args = parser.parse_args()
    costs = kernels.cache_root() / "task_costs.json"
    with open(args.solution) as f:
        source = f.read()
    task = bundled().get(args.task_id)
    rows, result = [], None
    with EvalPool(workers=1) as pool:
        for i in range(args.count + 1):
            if args.forget_costs:
                costs.unlink(missing_ok=True)
            result = pool.evaluate(task, source, backend=args.backend)
            if i:  # the first evaluation builds
                rows.append(result.stage_s)
    medians = {k: round(statistics.median(s.get(k, 0.0) for s in rows), 3) for k in KEYS[args.parts]}
    print(args.task_id, medians, "batches", result.timing.batches if result.timing else None,
          result.verdict.value)


if __name__ == "__main__":
    main()
