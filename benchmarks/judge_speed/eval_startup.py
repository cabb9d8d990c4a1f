"""`kernelgym eval FILE` as a user runs it: the whole command's wall time against its evaluation's, with the
worker's warm-ups (the pool's default) and without them (what the command uses for one file), side by side.

    python benchmarks/judge_speed/eval_startup.py [--repeats 5] [--backend cpp] [--task L1/1_ReLU] \
        [--file PATH]

Each run is a fresh `python` process that builds a one-worker pool, judges the file once and closes the
pool, timed from outside; the two settings alternate so that load drifts hit both alike. The evaluation's
own seconds are the result's `wall_s`. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ONE_COMMAND = """
import json, sys
from kernelgym import EvalPool
from kernelgym.tasks import resolve_task
from kernelgym.tasks.cpu_size import with_cpu_size
task = resolve_task(sys.argv[1])
if sys.argv[3] == "cpp":
    task = with_cpu_size(task)
source = open(sys.argv[2]).read()
with EvalPool(workers=1, warm_up=sys.argv[4] == "on") as pool:
    result = pool.evaluate(task, source, backend=sys.argv[3])
print(json.dumps({"verdict": result.verdict.value, "eval_s": result.wall_s}))
"""


def one_run(task: str, path: str, backend: str, warm_up: str) -> dict:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", ONE_COMMAND, task, path, backend, warm_up],
                         capture_output=True, text=True, timeout=600, check=False)
    wall = time.perf_counter() - started
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"the run failed:\n{out.stderr[-3000:]}")
    return {**json.loads(lines[-1]), "wall_s": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="cpp")
    parser.add_argument("--task", default="L1/1_ReLU")
    parser.add_argument("--file", default="", help="the solution (default: the bundled example)")
    args = parser.parse_args()
    path = args.file or str(Path(__file__).resolve().parents[2] / "kernelgym" / "solutions" / args.backend /
                            "level1" / "1_ReLU.py")
    runs: dict[str, list[dict]] = {"on": [], "off": []}
    for _ in range(args.repeats):
        for setting in ("on", "off"):
            runs[setting].append(one_run(args.task, path, args.backend, setting))
    import torch

    print(f"{platform.node()}, {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"{args.task} ({args.backend}), {args.repeats} runs each, alternating\n")
    print("| worker warm-ups | verdicts | command wall s (median, min-max) | evaluation s (median) | "
          "command beyond its evaluation s (median) |\n| --- | --- | --- | --- | --- |")
    for setting, rows in runs.items():
        walls = [r["wall_s"] for r in rows]
        evals = [r["eval_s"] for r in rows]
        beyond = [r["wall_s"] - r["eval_s"] for r in rows]
        verdicts = ",".join(sorted({r["verdict"] for r in rows}))
        wall = f"{statistics.median(walls):.2f} ({min(walls):.2f}-{max(walls):.2f})"
        print(f"| {setting} | {verdicts} | {wall} | {statistics.median(evals):.2f} | "
              f"{statistics.median(beyond):.2f} |")


if __name__ == "__main__":
    main()
