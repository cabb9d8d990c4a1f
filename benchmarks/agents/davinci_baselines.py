"""Issue 29's comparisons on the held-out curriculum tasks, each through `kernelgym bench` (resumable):

- reload: the RL run's last checkpoint loaded in a fresh process, one greedy turn (as the run evaluated it);
- no skills: the same, with `-o skills=off` (the policy role alone, no skill library in the prompt);
- the prompting baselines one_shot, best_of_n and refine with the SFT model, and the RL agent, each at the
  same judge budget (BUDGET replies a task).

    python benchmarks/agents/davinci_baselines.py --run /work/scratch/dv --out /work/scratch/dv-baselines
    python benchmarks/agents/davinci_baselines.py --run /work/scratch/dv --out /work/scratch/dv-baselines \
        --table \
        --json benchmarks/results/agents/davinci_baselines_cpu.json

Each case's folder holds the bench's results.jsonl and report.md; --table prints the markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from davinci_compare import mcnemar_exact, wilson

JUDGE = ["--eval-option", "timing_budget_s=1"]
BUDGET = 2


def cases(run: Path, tokens: int, threads: int) -> dict[str, list[str]]:
    def policy(model: Path, temperature: float) -> str:
        return (f"davinci:{model}?temperature={temperature:g}&max_new_tokens={tokens}&threads={threads}"
                "&max_prompt_tokens=2048")

    rl, sft = run / "rl" / "checkpoint-20" / "model", run / "sft" / "model"
    return {
        "reload_rl_1turn": ["--policy", policy(rl, 0), "--baseline", "davinci", "--turns", "1"],
        "no_skills_rl_1turn": ["--policy", policy(rl, 0), "--baseline", "davinci", "--turns", "1",
                               "-o", "skills=off"],
        "one_shot_sft": ["--policy", policy(sft, 0), "--baseline", "one_shot", "--turns", "1"],
        f"best_of_{BUDGET}_sft": ["--policy", policy(sft, 0.8), "--baseline", "best_of_n",
                                  "--turns", str(BUDGET)],
        f"refine_{BUDGET}_sft": ["--policy", policy(sft, 0), "--baseline", "refine", "--turns", str(BUDGET)],
        f"davinci_{BUDGET}_rl": ["--policy", policy(rl, 0), "--baseline", "davinci", "--turns", str(BUDGET)],
    }


def run_case(name: str, args: list[str], out: Path, tasks: list[str]) -> None:
    command = [sys.executable, "-m", "kernelgym.cli", "bench", "--env", "KernelGym-Curriculum-v0",
               "--backend", "cpp", "--size", "cpu", "--tasks", ",".join(tasks), "--no-tensorboard",
               "--out", str(out / name), *JUDGE, *args]
    print(" ".join(command), flush=True)
    subprocess.run(command, check=False)


def outcomes(folder: Path) -> dict[str, dict]:
    path = folder / "results.jsonl"
    if not path.exists():
        return {}
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["task_id"]: r for r in records}


def compiled(record: dict) -> bool:
    return any(t.get("verdict") not in ("compile_error", "no_code", None) for t in record.get("turns", []))


def table(out: Path, all_cases: dict[str, list[str]], tasks: list[str]) -> str:
    """One row a case; each is paired with the RL agent at the same judge budget (replies a task)."""
    rows = [("| case | replies a task | judged | compile rate | correct (95% Wilson) | fast_1 verified | "
             "against the RL agent at that budget: gained / lost (McNemar p) |"),
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, args in all_cases.items():
        got = outcomes(out / name)
        if not got:
            continue
        turns = int(args[args.index("--turns") + 1])
        against = "reload_rl_1turn" if turns == 1 else f"davinci_{BUDGET}_rl"
        base = {t: int(bool(r.get("correct"))) for t, r in outcomes(out / against).items()}
        n = len(tasks)
        correct = sum(bool(r.get("correct")) for r in got.values())
        fast = sum(bool(r.get("correct")) and (r.get("verified_speedup") or 0) > 1 for r in got.values())
        low, high = wilson(correct, n)
        paired = "" if name == against or len(base) < n else \
            "{} / {} (p={:.3g})".format(*mcnemar_exact(base, {t: int(bool(got[t].get("correct")))
                                                                for t in tasks if t in got}))
        rows.append(f"| {name} | {turns} | {len(got)}/{n} | {sum(map(compiled, got.values())) / n:.3f} | "
                    f"{correct}/{n} ({low:.2f}-{high:.2f}) | {fast}/{n} | {paired} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", required=True, help="davinci_cpu_run.py's output folder")
    parser.add_argument("--out", required=True)
    parser.add_argument("--tokens", type=int, default=448)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--table", action="store_true", help="print the table of what has run, run nothing")
    parser.add_argument("--json", default="", help="also write each case's per-task verdicts here")
    args = parser.parse_args()
    from kernelgym.tasks.curriculum import heldout_ids

    tasks, out = heldout_ids(), Path(args.out)
    all_cases = cases(Path(args.run), args.tokens, args.threads)
    names = [n for n in all_cases if not args.only or n in args.only.split(",")]
    if not args.table:
        for name in names:
            run_case(name, all_cases[name], out, tasks)
    print(table(out, all_cases, tasks))
    if args.json:
        Path(args.json).write_text(json.dumps({
            name: {t: {"verdicts": [turn.get("verdict") for turn in r.get("turns", [])],
                       "correct": bool(r.get("correct")), "verified_speedup": r.get("verified_speedup")}
                   for t, r in outcomes(out / name).items()}
            for name in all_cases}, indent=1))


if __name__ == "__main__":
    main()
