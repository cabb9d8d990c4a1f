"""New curriculum candidates a minute through the judge, per backend: the rate an RL step's rollouts see.

    python benchmarks/judge_speed/judge_rate.py --backend triton --workers 8 --count 48 [--out DIR]

Each candidate is a curriculum training task's bundled solution made new with a unique comment line, so
every one is a fresh build, as a policy's replies are. All are submitted at once to one EvalPool (the
pool's first evaluation of each backend is a warm-up, not counted). Prints one JSON line and, with --out,
writes judge_rate_<backend>.json there: candidates a minute over the burst, verdicts, the median latency.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
import uuid
from collections import Counter
from pathlib import Path


def main(args) -> dict:
    from kernelgym import EvalPool
    from kernelgym.tasks.curriculum import curriculum

    size = "cpu" if args.backend == "cpp" else "gpu"
    tasks = curriculum("train")
    options = dict(kv.split("=", 1) for kv in args.eval_option)
    options = {k: float(v) for k, v in options.items()}
    with EvalPool(workers=args.workers) as pool:
        warm = tasks[0]
        t0 = time.monotonic()
        pool.evaluate(warm.task, warm.solutions[args.backend], backend=args.backend, size=size, **options)
        warm_s = time.monotonic() - t0
        submitted = time.monotonic()
        futures = []
        for i in range(args.count):
            item = tasks[i % len(tasks)]
            source = f"# candidate {uuid.uuid4().hex}\n{item.solutions[args.backend]}"
            futures.append((time.monotonic(), pool.submit(item.task, source, backend=args.backend, size=size,
                                                          **options)))
        latencies, verdicts = [], Counter()
        for started, future in futures:
            result = future.result()
            verdicts[str(result.verdict)] += 1
            latencies.append(time.monotonic() - started)
        wall = time.monotonic() - submitted
    out = {"backend": args.backend, "size": size, "workers": args.workers, "count": args.count,
           "cpu_count": os.cpu_count(), "first_evaluation_s": round(warm_s, 2),
           "burst_wall_s": round(wall, 2),
           "candidates_per_min": round(args.count / wall * 60, 1),
           "latency_median_s": round(statistics.median(latencies), 2), "verdicts": dict(verdicts),
           "eval_options": options}
    print(json.dumps(out), flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / f"judge_rate_{args.backend}.json").write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="cpp", choices=["cpp", "triton", "cuda"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--eval-option", action="append", default=["timing_budget_s=1"],
                        help="KEY=VALUE judge options (numbers)")
    parser.add_argument("--out", default="")
    main(parser.parse_args())
