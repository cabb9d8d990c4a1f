"""How often the judge verifies a speedup on a busy machine, with and without a second, confirming timing.

    python benchmarks/judge_trust/verified_under_load.py --repeats 12 \
        [--tasks L1/1_ReLU,L1/23_Sum_Dim,L1/7_GELU]

Bundled cpp solutions, each judged --repeats times per arm by a pool of 2 workers kept busy (two evaluations
at once on a 2-core machine, the arms interleaved). An arm is `confirm_verified` on or off. A speedup
verified for a solution whose median over all its evaluations is about 1x is one the noise paid for.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from kernelgym import EvalPool
from kernelgym.solutions import examples
from kernelgym.tasks import bundled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--tasks", default="L1/1_ReLU,L1/23_Sum_Dim,L1/7_GELU")
    args = parser.parse_args()
    sources = {e.task_id.removeprefix("bundled/"): e.source for e in examples("cpp")}
    tasks = args.tasks.split(",")
    jobs = [(t, confirm) for _ in range(args.repeats) for t in tasks for confirm in (True, False)]
    rows: dict[tuple[str, bool], list] = defaultdict(list)
    with EvalPool(workers=2) as pool:
        def judge(job):
            task_id, confirm = job
            result = pool.evaluate(bundled().get(task_id), sources[task_id], backend="cpp",
                                   confirm_verified=confirm)
            return job, result

        with ThreadPoolExecutor(2) as threads:
            for (task_id, confirm), r in threads.map(judge, jobs):
                rows[task_id, confirm].append(r)
                print(task_id, "confirm" if confirm else "once", r.verdict.value, r.speedup,
                      r.timing and r.timing.speedup_ci_low, r.verified_speedup, flush=True)
    print("\n| solution | confirm_verified | ok | median speedup | range | verified | verified speedups |")
    print("|---|---|---|---|---|---|---|")
    for task_id in tasks:
        for confirm in (False, True):
            results = rows[task_id, confirm]
            speedups = sorted(r.speedup for r in results if r.speedup)
            verified = sorted(r.verified_speedup for r in results if r.verified_speedup)
            ok = sum(r.verdict.value == "ok" for r in results)
            print(f"| {task_id} | {'on' if confirm else 'off'} | {ok}/{len(results)} | "
                  f"{statistics.median(speedups):.3f} | {speedups[0]:.3f}-{speedups[-1]:.3f} | "
                  f"{len(verified)}/{len(results)} | {', '.join(f'{v:.3f}' for v in verified) or '-'} |")


if __name__ == "__main__":
    main()
