"""Warm evaluations of one solution on this machine: the median of each part of the timing stage.

    python benchmarks/timing_parts.py TASK_ID SOLUTION_FILE [COUNT] [--backend cpp]

On a GPU these parts are what holds the timing slot (inputs made, inputs mapped, both sides run, outputs
checked). Run it in two worktrees to compare two trees of the judge side by side.
"""

from __future__ import annotations

import argparse
import statistics

from kernelgym.tasks import bundled
from kernelgym.workers.pool import EvalPool

KEYS = ["timing", "timing_inputs", "timing_map", "timing_run", "timing_check", "correctness"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task_id")
    parser.add_argument("solution")
    parser.add_argument("count", type=int, nargs="?", default=12)
    parser.add_argument("--backend", default="cpp")
    args = parser.parse_args()
    with open(args.solution) as f:
        source = f.read()
    task = bundled().get(args.task_id)
    rows, result = [], None
    with EvalPool(workers=1) as pool:
        for i in range(args.count + 1):
            result = pool.evaluate(task, source, backend=args.backend)
            if i:  # the first evaluation builds
                rows.append(result.stage_s)
    medians = {k: round(statistics.median(s.get(k, 0.0) for s in rows), 3) for k in KEYS}
    print(args.task_id, medians, "batches", result.timing.batches if result.timing else None,
          result.verdict.value)


if __name__ == "__main__":
    main()
