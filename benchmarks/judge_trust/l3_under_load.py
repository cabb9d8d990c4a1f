"""The bundled L3 cpp replays judged with nothing of ours beside them, beside a training-like load and beside
a busy loop on the timing core; and, once, built without AVX-512 (issue 47: 0.04x on one run, 1.3x on
another).

    python benchmarks/judge_trust/l3_under_load.py [--repeats 3] [--label NAME] \
        [--out benchmarks/results/judge_trust/l3_under_load.md]

Loads (each started before its evaluations and killed after them):
- idle: nothing of this script's (the machine may still run other tenants' work: see the load average);
- training: a PyTorch MLP trained in a loop on 2 threads (what ran beside the quickstart on that machine);
- burner: one busy loop pinned to the timing core (the first core, where a one-worker pool times);
- no-avx512 (idle): the same sources built with -mno-avx512f, as on a host without AVX-512.

Per evaluation: the speedup, whether the judge marked the timing contended (judges before issue 47 have no
such mark), and whether it is within 25% of the idle median of the same task in this run.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import torch

import kernelgym
from kernelgym.solutions import examples
from kernelgym.tasks import bundled

HERE = Path(__file__).parent
TASKS = ("L3/1_MLP", "L3/4_ConvBnReLU", "L3/10_MultiHeadSelfAttention", "L3/16_SwiGLU_MLP")
TRAINING = """
import torch
torch.set_num_threads(2)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
x = torch.randn(64, 512)
while True:
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def start_load(kind: str, core: int) -> subprocess.Popen | None:
    if kind == "training":
        return subprocess.Popen([sys.executable, "-c", TRAINING])
    if kind == "burner":
        loop = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True:\n    pass\n"
        return subprocess.Popen([sys.executable, "-c", loop])
    return None


def without_avx512(source: str) -> str:
    """The solution with -mno-avx512f added to its load_cpp call (16-float vectors then split in halves)."""
    end = source.index('""")', source.index("load_cpp(")) + 3
    return source[:end] + ', extra_flags=("-mno-avx512f",)' + source[end:]


def judge(pool, condition: str, repeats: int, core: int, threads: int) -> list[dict]:
    load = "idle" if condition == "no-avx512" else condition
    rows = []
    process = start_load(load, core)
    try:
        for task_id in TASKS:
            source = next(e for e in examples("cpp") if e.task_id.endswith(task_id)).source
            if condition == "no-avx512":
                source = without_avx512(source)
            for _ in range(repeats if condition != "no-avx512" else 1):
                load_avg = os.getloadavg()[0]
                result = pool.evaluate(bundled().get(task_id), source, backend="cpp", threads=threads)
                timing = result.timing
                row = {"condition": condition, "task": task_id, "verdict": result.verdict.value,
                       "speedup": result.speedup, "verified": bool(timing and timing.verified),
                       "contended": getattr(timing, "contended", None),
                       "wait_share": getattr(timing, "cpu_wait_share", None), "load": round(load_avg, 2),
                       "reason": "" if result.verdict.value == "ok" else str(result.reasons[:1])[:160]}
                rows.append(row)
                print(row, flush=True)
    finally:
        if process is not None:
            process.kill()
            process.wait()
    return rows


def table(rows: list[dict]) -> list[str]:
    idle = {t: statistics.median([r["speedup"] for r in rows if r["condition"] == "idle" and r["task"] == t
                                  and r["speedup"]] or [0.0]) for t in TASKS}
    header = ("| condition | task | speedups (contended marked *) | median | idle median | within 25% of "
              "idle or marked | verified | wait share (median) | load average |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|"]
    for condition in dict.fromkeys(r["condition"] for r in rows):
        for task_id in TASKS:
            mine = [r for r in rows if r["condition"] == condition and r["task"] == task_id and r["speedup"]]
            if not mine:
                continue
            speedups = [r["speedup"] for r in mine]
            fine = sum(bool(r["contended"]) or abs(r["speedup"] / idle[task_id] - 1) <= 0.25 for r in mine)
            shown = ", ".join(f"{r['speedup']:.3f}{'*' if r['contended'] else ''}" for r in mine)
            loads = ", ".join(f"{r['load']:.2f}" for r in mine)
            waits = [r["wait_share"] for r in mine if r["wait_share"] is not None]
            wait = f"{statistics.median(waits):.2f}" if waits else "-"
            lines.append(f"| {condition} | {task_id} | {shown} | {statistics.median(speedups):.3f} | "
                         f"{idle[task_id]:.3f} | {fine}/{len(mine)} | {sum(r['verified'] for r in mine)}/"
                         f"{len(mine)} | {wait} | {loads} |")
    failed = [f"- {r['condition']} {r['task']}: {r['verdict']} {r['reason']}" for r in rows if r["reason"]]
    return lines + (["", "Not ok (no speedup):", *failed] if failed else [])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--conditions", default="idle,training,burner,no-avx512")
    parser.add_argument("--threads", type=int, default=1, help="EvalOptions.threads (the default is 1)")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default=str(HERE.parent / "results" / "judge_trust" / "l3_under_load.md"))
    args = parser.parse_args()
    core = min(os.sched_getaffinity(0))  # slot 0 of a one-worker pool times on the first core
    rows = []
    with kernelgym.EvalPool(workers=1) as pool:
        for condition in args.conditions.split(","):
            rows += judge(pool, condition, args.repeats, core, args.threads)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(kernelgym.__file__).parent, check=False).stdout.strip()
    from kernelgym.envs.prompt import cpu_name

    machine = (f"- {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC; {cpu_name()}, "
               f"{os.cpu_count()} cores; python {platform.python_version()}, torch {torch.__version__}; "
               f"judge at commit {commit}")
    command = (f"- command: `python benchmarks/judge_trust/l3_under_load.py --repeats {args.repeats} "
               f"--conditions "
               f"{args.conditions} --threads {args.threads}"
               f"{' --label ' + repr(args.label) if args.label else ''}`")
    lines = [f"## {args.label or commit}", "", machine, command, "", *table(rows), ""]
    print("\n".join(lines))
    with open(args.out, "a") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
