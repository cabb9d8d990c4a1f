"""Warm evaluations of one bundled cpp solution in one warm pool: the median wall time, how many batches the
timing ran, and how many evaluations fell back to the candidate's in-process profile (its samples too few).

    python benchmarks/judge_speed/warm_batches.py --task L1/1_ReLU --runs 10

Run it with PYTHONPATH pointing at each tree to compare two judges side by side
(benchmarks/results/judge_speed/eval_speed.md).
"""

from __future__ import annotations

import argparse
import statistics

import kernelgym
from kernelgym.solutions import examples
from kernelgym.tasks import bundled
from kernelgym.workers.pool import EvalPool


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="L1/1_ReLU")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    example = next(e for e in examples("cpp") if e.task_id.endswith(args.task))
    task = bundled().get(args.task)
    results = []
    with EvalPool(workers=1) as pool:
        pool.evaluate(task, example.source, backend="cpp")  # built and warm
        for _ in range(args.runs):
            results.append(pool.evaluate(task, example.source, backend="cpp"))
    print(f"judge: {kernelgym.__file__}")
    print(f"verdicts: {sorted({r.verdict.value for r in results})}")
    print(f"median wall s: {statistics.median(r.wall_s for r in results):.3f}")
    print(f"median timed batches: {statistics.median(r.timing.batches for r in results)}")
    print(f"in-process profile ran: {sum('profile' in r.stage_s for r in results)} of {len(results)}")


if __name__ == "__main__":
    main()
