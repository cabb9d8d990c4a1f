"""Honest solutions judged again and again by a full pool beside busy loops: every verdict that is not `ok`
(or an expected `incorrect`) is printed with its reasons. A false `hack` is as serious as a credited cheat.

    python benchmarks/judge_trust/honest_under_load.py [--replies FILE.jsonl] [--examples cpp] \
        [--workers N] [--busy M] [--seconds S] [--json rows.jsonl]

--replies: JSON lines of {"task", "text"} (an LLM's reply, its code in a fenced block); the file beside this
script holds the 11 replies the GPU learning run's judge charged `hack` (segment 4, 15 cpp workers on a
16-core GPU host): 10 honest OpenMP loops and one wrong. --examples: the bundled solutions of a backend.
Each round submits every solution twice, all at once, so every worker stays busy; rounds go on until
--seconds have passed. Judged with the learning run's options (1 s timing budget, 20 s stage limit).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import kernelgym
from kernelgym.solutions import examples
from kernelgym.tasks import resolve_task

HERE = Path(__file__).parent
JUDGE = {"timing_budget_s": 1.0, "timeout_s": 20.0}  # benchmarks/agents/davinci_run.py's
CODE = re.compile(r"```(?:python)?\n(.*?)```", re.DOTALL)
BUSY = "while True: pass"


def solutions(args) -> list[tuple[str, str, str]]:
    """(name, task id, source) of every solution to judge."""
    found = []
    for path in args.replies:
        for number, line in enumerate(Path(path).read_text().splitlines(), 1):
            reply = json.loads(line)
            match = CODE.search(reply["text"])
            found.append((f"{Path(path).stem}:{number}", reply["task"],
                          match.group(1) if match else reply["text"]))
    for backend in args.examples:
        found += [(f"{backend}:{e.task_id}", e.task_id, e.source) for e in examples(backend)]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replies", action="append", default=[])
    parser.add_argument("--examples", action="append", default=[], choices=["cpp"])
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--busy", type=int, default=2, help="busy loops beside the pool (unpinned)")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--json", default=None, help="append every verdict that is not ok here")
    args = parser.parse_args()
    todo = solutions(args)
    if not todo:
        parser.error("nothing to judge: give --replies or --examples")
    tasks = {task_id: resolve_task(task_id) for _, task_id, _ in todo}
    busy = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(args.busy)]
    counts: collections.Counter = collections.Counter()
    flagged = []
    started = time.monotonic()
    try:
        with kernelgym.EvalPool(workers=args.workers) as pool:
            while time.monotonic() - started < args.seconds:
                futures = [(name, pool.submit(tasks[task_id], source, "cpp", "cpu", **JUDGE))
                           for name, task_id, source in todo * 2]
                for name, future in futures:
                    result = future.result()
                    verdict = result.verdict.value
                    counts[verdict] += 1
                    if verdict != "ok":
                        row = {"solution": name, "verdict": verdict,
                               "reasons": [str(r) for r in result.reasons[:3]]}
                        flagged.append(row)
                        print(json.dumps(row), flush=True)
                        if args.json:
                            with open(args.json, "a") as f:
                                f.write(json.dumps(row) + "\n")
                print(f"after {time.monotonic() - started:.0f} s: {dict(counts)}", flush=True)
    finally:
        for process in busy:
            process.kill()
    print(f"\n{platform.node()}, {os.cpu_count()} cores, kernelgym {kernelgym.__version__}; {args.workers} "
          f"workers beside {args.busy} busy loops, {time.monotonic() - started:.0f} s: {dict(counts)}")
    by_rule = collections.Counter((row["solution"], row["reasons"][0].split(":", 1)[0])
                                  for row in flagged if row["reasons"])
    for (name, rule), n in sorted(by_rule.items()):
        print(f"  {name}: {rule} x{n}")


if __name__ == "__main__":
    main()
