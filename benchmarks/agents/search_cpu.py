"""Search baselines against prompting baselines on the CPU, at the same judge-call budget.

Runs `kernelgym bench` (cpp backend, cpu size) with one policy for each baseline (evolve, map_elites, refine,
best_of_n) on the same tasks and budget (--turns = judge calls per task), then writes a table and a
best-verified-speedup-vs-judge-calls plot per method. The default policy is `mutate:cpp` (no model: it moves
the tuning parameters of the bundled solutions), so the searches have something to find on a CPU-only
machine; `--policy smollm2` runs the same comparison with SmolLM2-135M.

    python benchmarks/agents/search_cpu.py --out runs/search_cpu --md benchmarks/results/agents/search_cpu.md

Rerunning the same command resumes (finished episodes and judge calls are kept).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import platform
import statistics
from pathlib import Path

METHODS = ("evolve", "map_elites", "refine", "best_of_n")
TASKS = ("L1/27_Cumsum", "L1/23_Sum_Dim", "L1/2_Matmul_Square")
NOT_JUDGED = ("no_code", "done")
SEARCHES = ("evolve", "map_elites")


def curve(record: dict) -> list[tuple[int, float, float]]:
    """(judge call, best verified speedup so far, best measured speedup so far) after each judged turn."""
    points, best_verified, best_measured = [], 0.0, 0.0
    for turn in record.get("turns", []):
        if turn.get("verdict") in NOT_JUDGED:
            continue
        if turn.get("correct") and turn.get("speedup"):
            best_measured = max(best_measured, float(turn["speedup"]))
            if turn.get("verified"):
                best_verified = max(best_verified, float(turn["speedup"]))
        points.append((len(points) + 1, best_verified, best_measured))
    return points


def run(methods, tasks, budget: int, policy: str, out: Path, replies_factor: float | None = None) -> dict:
    from kernelgym.agents.bench import BenchConfig, run_bench

    found: dict[str, dict[str, dict]] = {}
    for method in methods:
        options = {"max_proposals_factor": replies_factor} if replies_factor and method in SEARCHES else {}
        config = BenchConfig(
            policy=policy,
            baseline=method,
            tasks=",".join(tasks),
            turns=budget,
            out=str(out / method),
            tensorboard=False,
            baseline_options=options,
        )
        outcome = run_bench(config, progress=True, command=f"search_cpu.py {method}")
        found[method] = {r["task_id"]: r for r in outcome.records}
    return found


def best_sources(out: Path, method: str) -> dict[str, str]:
    """Each task's best correct candidate of a run (verified first, then measured speedup), from the
    environment's trajectory log."""
    best: dict[str, tuple[tuple, str]] = {}
    path = out / method / "trajectories.jsonl"
    for line in path.read_text().splitlines() if path.exists() else []:
        turn = json.loads(line)
        result = turn.get("result") or {}
        if not result.get("correct") or not turn.get("solution"):
            continue
        key = (bool((result.get("timing") or {}).get("verified")), float(result.get("speedup") or 0))
        if turn["task_id"] not in best or key > best[turn["task_id"]][0]:
            best[turn["task_id"]] = (key, turn["solution"])
    return {task: source for task, (_, source) in best.items()}


def confirm(out: Path, methods, tasks, backend: str = "cpp", rounds: int = 1) -> dict[str, dict[str, dict]]:
    """Fresh evaluations of each method's best candidate and of the bundled solution (`bundled`), one at a
    time, `rounds` times: a search's best is the maximum of noisy measurements, so it is judged again before
    comparing, and the median of the rounds is what the table shows."""
    from kernelgym.solutions import examples
    from kernelgym.tasks import bundled
    from kernelgym.workers.pool import EvalPool

    seeds = {e.task_id: e.path.read_text() for e in examples(backend)}
    sources = {"bundled": {t: seeds[t] for t in seeds}, **{m: best_sources(out, m) for m in methods}}
    fresh: dict[str, dict[str, dict]] = {}
    suite = bundled()
    with EvalPool(workers=1) as pool:  # task by task, the candidates in turn: load drifts hit them alike
        for _ in range(rounds):
            for task_id in [t for t in seeds if t.split("/", 1)[-1] in tasks]:
                for label, per in [(label, per) for label, per in sources.items() if task_id in per]:
                    task = suite.get(task_id.split("/", 1)[-1])
                    result = pool.evaluate(task, per[task_id], backend=backend)
                    cell = fresh.setdefault(label, {}).setdefault(task_id, {"speedups": [], "verified": 0})
                    cell["speedups"].append(result.speedup or 0.0)
                    cell["verified"] += result.verified_speedup is not None
    for per in fresh.values():
        for cell in per.values():
            cell["speedup"] = statistics.median(cell["speedups"])
    return fresh


def confirm_table(fresh: dict[str, dict[str, dict]]) -> str:
    """Median fresh speedup per candidate and task; with several rounds, the range and how many verified."""
    tasks = sorted({t for per in fresh.values() for t in per})
    lines = [
        "| candidate | " + " | ".join(t.split("/", 1)[-1] for t in tasks) + " |",
        "| --- |" + " --- |" * len(tasks),
    ]

    def cell(c: dict) -> str:
        runs = c["speedups"]
        if len(runs) == 1:
            return f"{runs[0]:.3g}x{' verified' if c['verified'] else ''}"
        return f"{c['speedup']:.3g}x ({min(runs):.3g}-{max(runs):.3g}; {c['verified']}/{len(runs)} verified)"

    for label, per in fresh.items():
        lines.append(f"| {label} | " + " | ".join(cell(per[t]) if t in per else "-" for t in tasks) + " |")
    return "\n".join(lines)


def _geomean(values: list[float]) -> float | None:
    values = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def table(found: dict[str, dict[str, dict]], budget: int) -> str:
    """Per method and task: best verified speedup (best measured; the first candidate's measured speedup)."""
    tasks = sorted({t for per in found.values() for t in per})
    lines = [
        "| method | "
        + " | ".join(t.split("/", 1)[-1] for t in tasks)
        + " | tasks verified | geomean best measured | judge calls |",
        "| --- |" + " --- |" * (len(tasks) + 3),
    ]
    for method, per in found.items():
        cells, measured_bests, verified_tasks, calls = [], [], 0, 0
        for t in tasks:
            points = curve(per[t]) if t in per else []
            first = next(
                (
                    turn.get("speedup")
                    for turn in per.get(t, {}).get("turns", [])
                    if turn.get("verdict") not in NOT_JUDGED
                ),
                None,
            )
            verified, measured = (points[-1][1], points[-1][2]) if points else (0.0, 0.0)
            calls += len(points)
            verified_tasks += verified > 0
            measured_bests.append(measured)
            cells.append(f"{verified:.3g}x ({measured:.3g}x; first {first or 0:.3g}x)")
        gm = _geomean(measured_bests)
        lines.append(
            f"| {method} | " + " | ".join(cells) + f" | {verified_tasks}/{len(tasks)} | "
            f"{f'{gm:.3g}x' if gm else '-'} | {calls}/{budget * len(tasks)} |"
        )
    return "\n".join(lines)


def plot(found: dict[str, dict[str, dict]], path: Path, budget: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(found), figsize=(4 * len(found), 6), dpi=100, sharex=True, squeeze=False)
    for col, (method, per) in enumerate(found.items()):
        for row, label in ((0, "best verified speedup"), (1, "best measured speedup (correct)")):
            ax = axes[row][col]
            for task, record in sorted(per.items()):
                points = curve(record)
                ax.step(
                    [0] + [p[0] for p in points],
                    [0.0] + [p[1 + row] for p in points],
                    where="post",
                    label=task.split("/", 1)[-1],
                )
            ax.axhline(1.0, color="#bbbbbb", linestyle=":", linewidth=1)
            ax.set_xlim(0, budget)
            if col == 0:
                ax.set_ylabel(label)
        axes[0][col].set_title(method, fontsize=10)
        axes[1][col].set_xlabel("judge calls")
    axes[1][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def versions() -> str:
    import importlib.metadata as md

    names = ("kernelgym", "torch", "optuna", "gymnasium")
    found = []
    for n in names:
        try:
            found.append(f"{n} {md.version(n)}")
        except md.PackageNotFoundError:
            pass
    return ", ".join(found) + f", Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--budget", type=int, default=6, help="judge calls per task")
    parser.add_argument("--policy", default="mutate:cpp")
    parser.add_argument(
        "--replies-factor",
        type=float,
        default=None,
        help="evolve/map_elites: at most this many replies per judge call of the budget (an LLM "
        "that often answers without code; 1 = as many replies as refine and best_of_n get)",
    )
    parser.add_argument("--out", default="runs/search_cpu")
    parser.add_argument("--no-confirm", action="store_true", help="skip the fresh evaluations of the bests")
    parser.add_argument("--confirm-rounds", type=int, default=1, help="fresh evaluations of each best")
    parser.add_argument("--md", default=None, help="also write the table here (with the plot beside it)")
    args = parser.parse_args()
    out = Path(args.out)
    found = run(
        args.methods.split(","), args.tasks.split(","), args.budget, args.policy, out, args.replies_factor
    )
    text = table(found, args.budget)
    if not args.no_confirm:
        fresh = confirm(out, list(found), args.tasks.split(","), rounds=args.confirm_rounds)
        (out / "confirm.json").write_text(json.dumps(fresh, indent=1))
        text += (f"\n\nFresh evaluations of each method's best candidate (and of the bundled solution), "
                 f"{args.confirm_rounds} round(s), median:\n\n")
        text += confirm_table(fresh)
    png = Path(args.md).with_suffix(".png") if args.md else out / "search_cpu.png"
    plot(found, png, args.budget)
    (out / "search_cpu.json").write_text(
        json.dumps({m: {t: curve(r) for t, r in per.items()} for m, per in found.items()}, indent=1)
    )
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    footer = f"{stamp}; {platform.machine()}, {versions()}; plot: {png}"
    print(text)
    print(footer)
    if args.md:  # the help promises the table there, not only on stdout
        Path(args.md).write_text(f"{text}\n\n{footer}\n\n![best speedup against judge calls]({png.name})\n")


if __name__ == "__main__":
    main()
