"""Held-out results of daVinci learning runs, phase against phase, with intervals (issue 29's protocol).

    python benchmarks/agents/davinci_compare.py RUN_DIR [RUN_DIR ...] [--resamples 10000]

Each RUN_DIR holds the `results.json` that `davinci_run.py` writes (phases `before_sft`, `after_sft`,
`after_rl`; a run started `--from-sft` carries the earlier run's first two, and one with `--no-skills` adds
`after_sft_no_skills`). Prints, per phase, the compile
rate, the correct rate and fast_1 over the held-out tasks with 95% Wilson intervals, then each phase against
its anchor on the same tasks (PAIRS: SFT against the base, RL against SFT, the agent against the prompting
strategies at the same number of judged replies a task): the correct rate's difference with a paired
bootstrap interval over tasks, and the exact McNemar test on the tasks whose verdict changed. Where the run
trained (`rl/trajectories.jsonl`), the skills its own rollouts got admitted, and the later episodes that
selected them against the other episodes of their steps. With several runs, each run's after-RL verdicts
against the first run's, task by task.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

# after_sft_no_skills: the SFT model judged without skills, the anchor of a run trained without them;
# sft_*: the SFT model through the prompting strategies; after_rl_2turns: the agent at their budget
PHASES = ("before_sft", "after_sft", "after_sft_no_skills", "sft_one_shot", "sft_best_of_2", "sft_refine_2",
          "after_rl", "after_rl_2turns")
# (anchor, phase) pairs compared task by task, where both are in the run; after_rl's anchor is the SFT model
# as the run judged it (without skills in a --no-skills run)
PAIRS = (("before_sft", "after_sft"), ("after_sft", "after_sft_no_skills"), ("SFT", "after_rl"),
         ("sft_one_shot", "after_rl"), ("sft_best_of_2", "after_rl_2turns"),
         ("sft_refine_2", "after_rl_2turns"), ("after_rl", "after_rl_2turns"))


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return 0.0, 0.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def correct_by_task(phase: dict) -> dict[str, int]:
    """1 where the held-out task was solved: any reply `ok` (davinci_run.py records it per task); in older
    results, where its greedy episode ended `ok` (its last judged turn), else 0."""
    if "correct_by_task" in phase:
        return {task: int(v) for task, v in phase["correct_by_task"].items()}
    return {task: int(bool(seen) and seen[-1] == "ok") for task, seen in phase["verdicts"].items()}


def paired_bootstrap(before: dict[str, int], after: dict[str, int], resamples: int,
                     seed: int = 0) -> tuple[float, float, float]:
    """The correct rate's difference (after - before) and its 95% percentile interval, resampling tasks."""
    tasks = sorted(before.keys() & after.keys())
    diffs = [after[t] - before[t] for t in tasks]
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(diffs) for _ in diffs) / len(diffs) for _ in range(resamples))
    return sum(diffs) / len(diffs), means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def mcnemar_exact(before: dict[str, int], after: dict[str, int]) -> tuple[int, int, float]:
    """(tasks gained, tasks lost, two-sided exact p) over the tasks whose verdict changed."""
    tasks = before.keys() & after.keys()
    gained = sum(after[t] > before[t] for t in tasks)
    lost = sum(after[t] < before[t] for t in tasks)
    n = gained + lost
    if n == 0:
        return 0, 0, 1.0
    tail = sum(math.comb(n, k) for k in range(min(gained, lost) + 1)) / 2 ** n
    return gained, lost, min(1.0, 2 * tail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--resamples", type=int, default=10000)
    args = parser.parse_args()
    for run in args.runs:
        results = json.loads((Path(run) / "results.json").read_text())
        phases = [p for p in PHASES if isinstance(results.get(p), dict) and results[p].get("verdicts")]
        n = len(results["held_out"])
        print(f"\n{run}: {n} held-out tasks\n")
        print("| phase | compile rate | correct rate (95% Wilson) | fast_1 (95% Wilson) |")
        print("| --- | --- | --- | --- |")
        for phase in phases:
            data = results[phase]
            correct = sum(correct_by_task(data).values())
            fast = round(data["fast_1"] * n)
            lo, hi = wilson(correct, n)
            flo, fhi = wilson(fast, n)
            print(f"| {phase} | {data['compile_rate']:.3f} | {correct}/{n} = {correct / n:.3f} "
                  f"({lo:.2f}-{hi:.2f}) | {fast}/{n} ({flo:.2f}-{fhi:.2f}) |")
        print()
        anchor = "after_sft_no_skills" if "after_sft_no_skills" in phases else "after_sft"
        for earlier, later in PAIRS:
            earlier = anchor if earlier == "SFT" else earlier
            if earlier not in phases or later not in phases:
                continue
            before, after = correct_by_task(results[earlier]), correct_by_task(results[later])
            diff, low, high = paired_bootstrap(before, after, args.resamples)
            gained, lost, p = mcnemar_exact(before, after)
            print(f"- {later} vs {earlier}: correct rate {diff:+.3f} (paired bootstrap 95% {low:+.3f} to "
                  f"{high:+.3f}); tasks gained {gained}, lost {lost} (exact McNemar p = {p:.3f})")
        training_curve(Path(run))
        skills_in_the_loop(Path(run))
    versus_first(args.runs, args.resamples)


def training_curve(run: Path) -> None:
    """The RL steps on training tasks (rl/metrics.jsonl): rollouts judged, how many steps carried a learning
    signal, the rates per step, and where a step's time went."""
    path = run / "rl" / "metrics.jsonl"
    if not path.is_file():
        return
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    signal = [r for r in rows if r.get("policy/abs_advantage", 0) > 0]
    rollouts = sum(r.get("rollouts", 0) for r in rows)
    print(f"\nRL on training tasks: {len(rows)} steps, {rollouts} rollouts judged; steps with a non-zero "
          f"policy advantage: {len(signal)}/{len(rows)}")
    print("\n| step | rollouts | compile | correct | fast_1 (verified) | policy mean abs. advantage | skills "
          "admitted | rollouts s | of which generation s | update s | tokens/s generating |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        rate = r.get("generated_tokens", 0) / r["time/generate_s"] if r.get("time/generate_s") else 0.0
        print(f"| {r['step']} | {r.get('rollouts', '')} | {r['compile_rate']:.3f} | "
              f"{r['correct_rate']:.3f} | {r['fast_1']:.3f} | {r.get('policy/abs_advantage', 0):.3f} | "
              f"{r['skills_admitted_total']} | "
              f"{r.get('time/rollouts_s', 0):.1f} | {r.get('time/generate_s', 0):.1f} | "
              f"{r.get('time/update_s', 0):.1f} | {rate:.0f} |")


def versus_first(runs: list[str], resamples: int) -> None:
    """Each later run's after-RL correct rate against the first run's, over the same held-out tasks."""
    finals = [json.loads((Path(r) / "results.json").read_text()).get("after_rl") for r in runs]
    if len(runs) < 2 or not finals[0]:
        return
    print(f"\nafter RL, against {runs[0]}:")
    first = correct_by_task(finals[0])
    for run, final in zip(runs[1:], finals[1:]):
        if not final:
            continue
        other = correct_by_task(final)
        diff, low, high = paired_bootstrap(first, other, resamples)
        gained, lost, p = mcnemar_exact(first, other)
        print(f"- {run}: correct rate {diff:+.3f} (paired bootstrap 95% {low:+.3f} to {high:+.3f}); "
              f"tasks gained {gained}, lost {lost} (exact McNemar p = {p:.3f})")


def skills_in_the_loop(run: Path) -> None:
    """Admitted skills (from the run's own rollouts) and the episodes that selected them afterwards."""
    path = run / "rl" / "trajectories.jsonl"
    if not path.is_file():
        return
    episodes = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    admitted = [(e["step"], e["candidate_id"], e["task_id"], e["gate_reason"]) for e in episodes
                if e.get("summary_status") == "admitted"]
    print(f"\nskills admitted from the run's rollouts: {len(admitted)} (episodes: {len(episodes)})")
    for step, skill, task, why in admitted:
        uses = [e for e in episodes if skill in e.get("selected_ids", [])]
        print(f"- step {step}: {skill} (from {task}; {why}); selected by {len(uses)} later episode(s)")
        for use in uses:
            others = [outcome(e) for e in episodes if e["step"] == use["step"] and e is not use]
            others = [o for o in others if o is not None]
            mean = sum(others) / len(others) if others else float("nan")
            print(f"  - step {use['step']} {use['task_id']}: {use['verdicts']} outcome {outcome(use)} "
                  f"(the step's other episodes: {mean:.3f})")


def outcome(episode: dict) -> float | None:
    """The episode's return: its policy turns' reward (None when no turn was judged)."""
    rewards = [t["reward"] for t in episode["turns"] if t["role"] == "policy" and t.get("reward") is not None]
    return rewards[-1] if rewards else None


if __name__ == "__main__":
    main()
