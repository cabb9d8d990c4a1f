"""Search baselines on one GPU (Triton): template tuning of the bundled solutions' block sizes, then the four
methods at the same judge-call budget. Meant to fit in 3 minutes on one H200; writes under $OUT.

    OUT=/tmp/out python benchmarks/agents/search_gpu.py   # search_gpu.md, search_gpu.png, search_gpu.json

1. Template tuning: for each task, the bundled Triton solution is judged, then an Optuna study
   (kernelgym.agents.baselines.tuning) over its exposed parameters (BLOCK sizes, num_warps, num_stages, ...)
   spends --trials judge calls; the best configuration and the bundled one are then both judged again
   (fresh evaluations) to confirm the gain.
2. evolve, map_elites, refine and best_of_n with the `mutate:triton` policy (the bundled solutions as seeds,
   their parameters moved) at --budget judge calls on --compare-task: best verified speedup per judge call.
Tasks are tuned concurrently (one thread each, one pool worker each) and the four methods run concurrently:
builds overlap while kernelgym's device lock keeps every timing alone on the GPU. No tuning trial starts
after --tuning-s seconds; the comparison's episodes cannot stop mid-way, so --budget bounds them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from search_cpu import curve, plot

TUNE_TASKS = ("L1/2_Matmul_Square", "L2/1_Gemm_BiasAdd_ReLU", "L1/1_ReLU", "L1/10_Softmax")
METHODS = ("map_elites", "evolve", "best_of_n", "refine")


def score(result) -> float:
    """The search's score: the verified speedup, else a tenth of the measured one (kernelgym search.Node)."""
    if not result.correct or not result.speedup:
        return 0.0
    return float(result.verified_speedup or 0.1 * result.speedup)


def tune_task(pool, task, seed_source: str, trials: int, deadline: float, backend: str, size: str) -> dict:
    from kernelgym.agents.baselines.tuning import TemplateTuner, TuningConfig

    first = pool.evaluate(task, seed_source, backend=backend, size=size)
    tuner = TemplateTuner(
        seed_source, score(first), TuningConfig(trials=trials, max_params=4, seed=0, startup_trials=3)
    )
    row = {
        "task": task.id,
        "params": [p.name for p in tuner.params],
        "seed_speedup": first.speedup,
        "seed_verified": first.verified_speedup is not None,
        "trials": [],
    }
    best = (score(first), seed_source, {})
    for _ in range(trials):
        if time.monotonic() > deadline:
            break
        trial, source, values = tuner.ask()
        result = pool.evaluate(task, source, backend=backend, size=size)
        tuner.tell(trial, values, score(result))
        row["trials"].append(
            {
                "params": values,
                "verdict": str(result.verdict),
                "speedup": result.speedup,
                "verified": result.verified_speedup is not None,
            }
        )
        if score(result) > best[0]:
            best = (score(result), source, values)
    row["best_params"] = best[2]
    if best[2]:  # confirm: the tuned and the bundled solution judged again, fresh
        tuned = pool.evaluate(task, best[1], backend=backend, size=size)
        again = pool.evaluate(task, seed_source, backend=backend, size=size)
        low = tuned.timing.speedup_ci_low if tuned.timing is not None else None
        row.update(
            confirmed_speedup=tuned.speedup,
            confirmed_ci_low=low,
            confirmed_verified=tuned.verified_speedup is not None,
            seed_again_speedup=again.speedup,
            faster=bool(
                tuned.verified_speedup
                and low is not None
                and low > max(again.speedup or 0, first.speedup or 0)
            ),
        )
    return row


def phase_tuning(tasks, trials: int, deadline: float, backend: str, size: str) -> list[dict]:
    from kernelgym.solutions import examples
    from kernelgym.tasks import bundled
    from kernelgym.workers.pool import EvalPool

    seeds = {e.task_id.split("/", 1)[1]: e.path.read_text() for e in examples(backend)}
    chosen = [t for t in tasks if t in seeds]
    # One thread per task on a pool of as many workers: builds overlap, timing holds the device lock.
    with EvalPool(workers=max(1, len(chosen))) as pool, ThreadPoolExecutor(max(1, len(chosen))) as threads:
        jobs = [
            threads.submit(tune_task, pool, bundled().get(t), seeds[t], trials, deadline, backend, size)
            for t in chosen
        ]
        rows = [job.result() for job in jobs]
    for row in rows:
        print(json.dumps(row), flush=True)
    return rows


def phase_compare(task: str, budget: int, work: Path, backend: str, size: str) -> dict:
    """`kernelgym bench` for each method, all at once (separate processes: each has its own pool, and
    matplotlib is not thread-safe); returns {method: {task id: result record}}."""
    procs = {}
    for method in METHODS:
        cmd = [
            sys.executable,
            "-c",
            "from kernelgym.cli import main; main()",
            "bench",
            "--policy",
            f"mutate:{backend}",
            "--baseline",
            method,
            "--backend",
            backend,
            "--size",
            size,
            "--tasks",
            task,
            "--turns",
            str(budget),
            "--out",
            str(work / method),
            "--no-tensorboard",
        ]
        procs[method] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found = {}
    for method, proc in procs.items():
        _, err = proc.communicate()
        results = work / method / "results.jsonl"
        if proc.returncode != 0 or not results.exists():
            print(f"{method}: bench failed ({proc.returncode}): {err[-800:]}", flush=True)
            continue
        found[method] = {
            json.loads(line)["task_id"]: json.loads(line)
            for line in results.read_text().splitlines()
            if line.strip()
        }
    return found


def _fmt(x) -> str:
    return f"{x:.3g}x" if isinstance(x, int | float) else "-"


def markdown(rows: list[dict], found: dict, args, started: float) -> str:
    import torch
    import triton

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "no GPU"
    lines = [
        f"# Search baselines on {device}",
        "",
        (
            f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M UTC}; torch {torch.__version__}, "
            f"triton {triton.__version__}, Python {platform.python_version()}; "
            f"wall {time.monotonic() - started:.0f} s"
        ),
        (
            f"Command: `OUT=... python benchmarks/agents/search_gpu.py --trials {args.trials} "
            f"--budget {args.budget} "
            f"--tuning-s {args.tuning_s} --backend {args.backend}`"
        ),
        "",
        "## Template tuning (Optuna) of the bundled Triton solutions",
        "",
        ("| task | tuned parameters | bundled | trials | best parameters | tuned, fresh | bundled, fresh "
        "| faster |"),
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        best = ", ".join(f"{k}={v}" for k, v in r.get("best_params", {}).items()) or "(the bundled one)"
        lines.append(
            f"| {r['task']} | {', '.join(r['params'])} | {_fmt(r['seed_speedup'])} | {len(r['trials'])} | "
            f"{best} | {_fmt(r.get('confirmed_speedup'))} (CI low {_fmt(r.get('confirmed_ci_low'))}"
            f"{', verified' if r.get('confirmed_verified') else ''})"
            f" | {_fmt(r.get('seed_again_speedup'))} | {'yes' if r.get('faster') else 'no'} |"
        )
    lines += [
        "",
        (
            "faster = the tuned configuration's fresh evaluation is verified and the low end of its 95% "
            "interval is above both measured speedups of the bundled one."
        ),
        "",
        (f"## Same budget ({args.budget} judge calls) on {args.compare_task}, policy mutate:{args.backend}"),
        "",
        "| method | best verified | best measured | judge calls |",
        "| --- | --- | --- | --- |",
    ]
    for method, per in found.items():
        for record in per.values():
            points = curve(record)
            last = points[-1] if points else (0, 0.0, 0.0)
            lines.append(f"| {method} | {_fmt(last[1])} | {_fmt(last[2])} | {len(points)} |")
    lines += ["", "![best verified speedup against judge calls](search_gpu.png)", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TUNE_TASKS))
    parser.add_argument("--trials", type=int, default=6, help="tuning trials (judge calls) per task")
    parser.add_argument("--compare-task", default="L1/2_Matmul_Square")
    parser.add_argument("--budget", type=int, default=5, help="judge calls per method in the comparison")
    parser.add_argument("--tuning-s", type=float, default=75.0, help="no tuning trial starts after this")
    parser.add_argument("--backend", default="triton", help="cpp: a dry run of the script on a CPU")
    args = parser.parse_args()
    out = Path(os.environ.get("OUT") or "runs/search_gpu")
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    size = "cpu" if args.backend == "cpp" else "gpu"
    rows = phase_tuning(args.tasks.split(","), args.trials, started + args.tuning_s, args.backend, size)
    with tempfile.TemporaryDirectory(prefix="search-gpu-") as work:
        found = phase_compare(args.compare_task, args.budget, Path(work), args.backend, size)
    if found:
        plot(found, out / "search_gpu.png", args.budget)
    (out / "search_gpu.json").write_text(
        json.dumps(
            {
                "tuning": rows,
                "compare": {m: {t: curve(r) for t, r in per.items()} for m, per in found.items()},
            },
            indent=1,
            default=str,
        )
    )
    text = markdown(rows, found, args, started)
    (out / "search_gpu.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
