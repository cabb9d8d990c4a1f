"""The daVinci learning protocol end to end: SmolLM2-135M (or any backbone), on the CPU or on one GPU host.

    python benchmarks/agents/davinci_run.py --out runs/dv --suite curriculum --tokens 448 --rl-steps 20 \
        --group 4
    bash benchmarks/gpu/gpu_train.sh   # the same protocol on one GPU host, with the settings written there

The model runs on --device (cuda: generation and training on the GPU; the judge uses the same machine, the
GPU for triton/cuda candidates, its cores for cpp). Phases, each saved to results.json as it ends:

- before_sft: held-out tasks, the base model, one greedy policy turn each (skills as the agent uses them);
- sft: the SFT cold start on the training split (replayed bundled solutions the judge confirms here);
- after_sft: held-out again;
- rl: RL on the training split (the run's curves in rl/metrics.jsonl);
- after_rl: held-out again; then, with --baselines, after_rl_2turns (the agent with two greedy turns) and
  the SFT model through the prompting strategies, all without skills: sft_one_shot (one greedy turn, the
  agent's budget), sft_best_of_2 (two samples at the RL temperature, the better counts) and sft_refine_2
  (two greedy turns, the second seeing the first's feedback), both at the budget of after_rl_2turns.

A rerun of the same command skips the phases already in results.json and continues RL from its latest
checkpoint, so a run cut by a machine's time limit resumes where it stopped (--rl-max-minutes ends RL on the
last step boundary that the longest step so far says fits, with a checkpoint). Held-out tasks are never
trained on. --no-held-out trains only; a rerun of the same command without it, on any machine holding the
run's folder, judges every held-out phase.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

HELD_OUT = ["L1/8_Sigmoid", "L1/9_Tanh", "L1/12_LeakyReLU", "L1/24_Mean_Dim"]
# A stage that hangs holds its whole RL step: the step waits for its slowest candidate, and a `timeout`
# (3 of the H100 run's 344 rollouts) cost 60 s at the default. An honest curriculum solution's stages
# take far less (the timing stage about its 1 s budget a side); builds have their own limit.
JUDGE = {"timing_budget_s": 1.0, "timeout_s": 20.0}


def train_split(backend: str) -> list[str]:
    """The level-1 tasks with a bundled example solution for the backend (none of HELD_OUT has one)."""
    from kernelgym.solutions import examples

    ids = [e.task_id for e in examples(backend)]
    return [t.removeprefix("bundled/") for t in ids if t.startswith("bundled/L1/")]


def evaluate(backbone, pool, *, turns: int = 1, samples: int = 1, temperature: float = 0.0,
             skills: bool = True) -> dict:
    """`samples` episodes of `turns` policy turns per held-out task, all in lockstep (batched generation).

    Per task: correct when any of its replies is `ok`, fast_1 when its best verified speedup is above 1."""
    from kernelgym.agents.davinci.config import EpisodeConfig
    from kernelgym.agents.davinci.episode import EpisodeRunner
    from kernelgym.agents.davinci.rl import episode_metrics
    from kernelgym.skill_store import SkillStore

    setting = dict(SETTING, **({} if skills else {"skills": False, "rerank": False}))
    config = EpisodeConfig(max_turns=turns, summarize="never", temperature=temperature,
                           policy_tokens=ARGS.tokens, eval_options=JUDGE, task_ids=HELD_OUT,
                           generation_batch=ARGS.generation_batch, **setting)
    t0 = time.monotonic()
    with SkillStore(Path(ARGS.out) / "eval-skills.sqlite") as store:
        runner = EpisodeRunner(config, backbone, store, pool)
        try:
            trajs = runner.run_batch([task for task in HELD_OUT for _ in range(samples)])
        finally:
            runner.close()
    by_task = defaultdict(list)
    for traj in trajs:
        by_task[traj.task_id].append(traj)
    out = episode_metrics([trajs])
    out["verdicts"] = {task: [v for t in episodes for v in t.verdicts] for task, episodes in by_task.items()}
    out["correct_by_task"] = {task: int(any("ok" in t.verdicts for t in episodes))
                              for task, episodes in by_task.items()}
    out["best_verified_speedups"] = {task: max(t.best_verified_speedup for t in episodes)
                                     for task, episodes in by_task.items()}
    out["fast_1"] = sum(s > 1.0 for s in out["best_verified_speedups"].values()) / max(len(by_task), 1)
    out["judged_replies"] = sum(v != "infrastructure_error" for t in trajs for v in t.verdicts)
    out["setting"] = {"turns": turns, "samples": samples, "temperature": temperature, "skills": skills}
    out["wall_s"] = round(time.monotonic() - t0, 1)
    return out


def curriculum_ids(split: str) -> list[str]:
    from kernelgym.tasks.curriculum import heldout_ids, train_ids

    return train_ids() if split == "train" else heldout_ids()


class Results:
    """results.json: one key a phase, written as each phase ends, so a cut run keeps what it measured."""

    def __init__(self, out: Path, header: dict):
        self.path = out / "results.json"
        self.data = json.loads(self.path.read_text()) if self.path.is_file() else {}
        self.data.update(header)

    def done(self, phase: str) -> bool:
        return phase in self.data

    def put(self, phase: str, value) -> None:
        self.data[phase] = value
        self.path.write_text(json.dumps(self.data, indent=1))
        print(phase, json.dumps(value)[:600], flush=True)

    def phase(self, phase: str, measure) -> None:
        if not self.done(phase):
            self.put(phase, measure())


def sft_baselines(results: Results, backbone, pool) -> None:
    """The SFT model through the prompting strategies (no skills), at one and two judged replies a task."""
    results.phase("sft_one_shot", lambda: evaluate(backbone, pool, skills=False))
    results.phase("sft_best_of_2", lambda: evaluate(backbone, pool, samples=2, temperature=ARGS.temperature,
                                                    skills=False))
    results.phase("sft_refine_2", lambda: evaluate(backbone, pool, turns=2, skills=False))


def main() -> None:
    from kernelgym import EvalPool
    from kernelgym.agents.davinci.backbone import Backbone, is_saved_backbone
    from kernelgym.agents.davinci.config import (
        BackboneConfig,
        EpisodeConfig,
        SFTConfig,
        SFTDataConfig,
    )
    from kernelgym.agents.davinci.rl import latest_checkpoint
    from kernelgym.agents.davinci.sft import run_sft

    out = Path(ARGS.out)
    out.mkdir(parents=True, exist_ok=True)
    held_out = not ARGS.no_held_out
    train = train_split(ARGS.backend) if ARGS.suite == "bundled" else curriculum_ids("train")
    backbone_config = BackboneConfig(model=ARGS.model, max_prompt_tokens=2048, threads=ARGS.threads,
                                     device=ARGS.device, dtype=ARGS.dtype, lora=ARGS.lora, lora_rank=8,
                                     mixed_precision=ARGS.mixed_precision,
                                     generation_cache=ARGS.generation_cache)
    results = Results(out, {"train": train, "held_out": HELD_OUT, "args": vars(ARGS)})
    sft_dir = out / "sft" / "model"
    with EvalPool(workers=ARGS.workers) as pool:
        if ARGS.from_sft:  # RL again from an earlier run's SFT model; its before/after-SFT numbers carry over
            earlier = json.loads((Path(ARGS.from_sft) / "results.json").read_text())
            for key in ("before_sft", "sft", "after_sft"):
                if not results.done(key):
                    results.put(key, dict(earlier[key], **({"from": ARGS.from_sft} if key == "sft" else {})))
            sft_dir = Path(ARGS.from_sft) / "sft" / "model"
            backbone = Backbone(replace(backbone_config, model=str(sft_dir)))
            if ARGS.no_skills:  # the anchor of the ablation: the same SFT model, judged without skills
                results.phase("after_sft_no_skills", lambda: evaluate(backbone, pool, skills=False))
        elif results.done("sft") and is_saved_backbone(sft_dir):  # a resumed run: SFT is behind us
            if held_out and not results.done("before_sft"):  # a run trained elsewhere with --no-held-out
                base = Backbone(backbone_config)
                results.put("before_sft", evaluate(base, pool))
                del base
            backbone = Backbone(replace(backbone_config, model=str(sft_dir)))
        else:
            backbone = Backbone(backbone_config)
            if held_out:
                results.phase("before_sft", lambda: evaluate(backbone, pool))
            sft = SFTConfig(backbone=backbone_config, output_dir=str(out / "sft"), epochs=ARGS.sft_epochs,
                            lr=ARGS.sft_lr, batch_size=1, max_length=3072,
                            data=SFTDataConfig(replay_backend=ARGS.backend),
                            episode=EpisodeConfig(task_ids=train, max_turns=1, eval_options=JUDGE, **SETTING))
            t0 = time.monotonic()
            sft_result = run_sft(sft, backbone=backbone, pool=pool)
            sft_dir = sft_result.output_dir
            results.put("sft", {"examples": sft_result.examples, "filter": sft_result.filter_report,
                                "train_loss": sft_result.train_loss,
                                "wall_s": round(time.monotonic() - t0, 1)})
        if held_out:
            results.phase("after_sft", lambda: evaluate(backbone, pool))
        if ARGS.rl_steps == 0:  # SFT only; a later run can start RL from it with --from-sft
            if ARGS.baselines and held_out:
                sft_baselines(results, backbone, pool)
            return
        if not results.done("rl"):
            rl = run_rl_phase(backbone, backbone_config, sft_dir, train, pool)
            if rl["steps"] < ARGS.rl_steps:  # cut by --rl-max-minutes: the same command continues it
                print(f"RL stopped at step {rl['steps']} of {ARGS.rl_steps} (its time limit); rerun the same "
                      "command to continue", flush=True)
                return
            results.put("rl", rl)
        if not held_out:  # rerun without --no-held-out (on any machine) to judge the saved models
            return
        # The held-out model is the last checkpoint, as a fresh process would load it (also after a resume).
        del backbone
        backbone = Backbone(replace(backbone_config, model=str(latest_checkpoint(out / "rl")[1] / "model")))
        results.phase("after_rl", lambda: evaluate(backbone, pool))
        if ARGS.baselines:  # after RL, so that a run short of time has its RL figures first
            results.phase("after_rl_2turns", lambda: evaluate(backbone, pool, turns=2))
            del backbone
            sft_baselines(results, Backbone(replace(backbone_config, model=str(sft_dir))), pool)
    plot(out)


def run_rl_phase(backbone, backbone_config, sft_dir: Path, train: list[str], pool) -> dict:
    from kernelgym.agents.davinci.config import EpisodeConfig, RLConfig
    from kernelgym.agents.davinci.rl import latest_checkpoint, run_rl

    budget_s = ARGS.rl_max_minutes * 60
    if ARGS.rl_stop_at:  # a wall-clock end for this call (a lent machine's limit)
        left = ARGS.rl_stop_at - time.time()
        if left <= 0:
            done = latest_checkpoint(Path(ARGS.out) / "rl")
            return {"steps": done[0] if done else 0}
        budget_s = min(budget_s or left, left)
    rl = RLConfig(backbone=replace(backbone_config, model=str(sft_dir)),
                  episode=EpisodeConfig(task_ids=train, max_turns=ARGS.turns, eval_options=JUDGE,
                                        policy_tokens=ARGS.tokens, gate_runs=2,
                                        summarize="never" if ARGS.no_skills else "verified",
                                        temperature=ARGS.temperature, generation_batch=ARGS.generation_batch,
                                        **SETTING),
                  output_dir=str(Path(ARGS.out) / "rl"), steps=ARGS.rl_steps,
                  tasks_per_step=ARGS.tasks_per_step,
                  group_size=ARGS.group, lr=ARGS.rl_lr, save_every=ARGS.save_every or ARGS.rl_steps,
                  seed=ARGS.seed, max_wall_s=budget_s, update_batch_tokens=ARGS.update_batch_tokens,
                  task_sampling="success" if ARGS.suite == "curriculum" else "uniform")
    t0 = time.monotonic()
    rl_result = run_rl(rl, backbone=backbone, pool=pool)
    return {"steps": rl_result.steps_done, "skills_admitted": rl_result.admitted,
            "gate_calls": rl_result.gate_calls, "wall_s_last_call": round(time.monotonic() - t0, 1)}


def plot(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(line) for line in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2))
    steps = [r["step"] for r in rows]
    for key in ("compile_rate", "correct_rate", "fast_1"):
        axes[0].plot(steps, [r[key] for r in rows], marker="o", label=key)
    for role in ("selection", "policy", "summary"):
        axes[1].plot(steps, [r.get(f"{role}/reward", float("nan")) for r in rows], marker="o", label=role)
    axes[2].plot(steps, [r["skills_admitted_total"] for r in rows], marker="o")
    for ax, title in zip(axes, ("rollouts (training tasks)", "mean reward per role", "skills admitted")):
        ax.set_title(title)
        ax.set_xlabel("RL step")
    axes[0].legend()
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=100)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/davinci")
    parser.add_argument("--model", default="smollm2")
    # A reply must be able to hold a whole solution: the bundled cpp ones that SFT teaches are 1.1k-4.4k
    # SmolLM2 tokens (one is 216); in a run at 256, 5 of 8 RL replies were cut at the cap (all compile_error).
    parser.add_argument("--tokens", type=int, default=2048, help="max new tokens of a policy turn")
    parser.add_argument("--turns", type=int, default=1, help="policy turns per RL episode")
    parser.add_argument("--sft-epochs", type=float, default=3.0)
    parser.add_argument("--sft-lr", type=float, default=5e-5)
    parser.add_argument("--rl-steps", type=int, default=3, help="0: stop after SFT")
    parser.add_argument("--rl-lr", type=float, default=1e-5)
    parser.add_argument("--group", type=int, default=2, help="RL rollouts per task (the leave-one-out group)")
    parser.add_argument("--tasks-per-step", type=int, default=2, help="tasks drawn per RL step")
    parser.add_argument("--temperature", type=float, default=0.8, help="sampling temperature of RL rollouts")
    parser.add_argument("--from-sft", default="", help="an earlier run's --out: RL from its SFT model")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="where the model runs: cpu or cuda")
    parser.add_argument("--mixed-precision", default="no", help="bf16: fp32 weights under bf16 autocast")
    parser.add_argument("--dtype", default="float32",
                        help="the weights' dtype; with --lora, bfloat16 keeps the frozen base in bf16 (the "
                             "adapters stay fp32): no weight casts a step, and the static cache gets keys "
                             "and values of one dtype")
    parser.add_argument("--generation-cache", default="dynamic",
                        help="static: fixed KV cache buffers, the decoding step compiled on a GPU")
    parser.add_argument("--generation-batch", type=int, default=16, help="rows per batched generate call")
    parser.add_argument("--update-batch-tokens", type=int, default=16384,
                        help="RL update: padded tokens (rows x longest row) of one forward/backward pass "
                             "over a role's turns (0: one turn a pass)")
    parser.add_argument("--workers", type=int, default=1, help="judge workers")
    parser.add_argument("--backend", default="cpp", help="cpp (CPU judge) or triton (GPU judge, gpu size)")
    parser.add_argument("--suite", default="bundled",
                        help="bundled (level-1 tasks, 4 held out) or curriculum (its 46 train / 23 held-out "
                             "split; RL samples tasks by success rate)")
    parser.add_argument("--lora", action="store_true",
                        help="rank-8 LoRA adapters per role (small checkpoints)")
    parser.add_argument("--save-every", type=int, default=0, help="RL checkpoint interval (0: at the end)")
    parser.add_argument("--rl-max-minutes", type=float, default=0.0,
                        help="this call's minutes of RL: no step begins that would end past them, judged by "
                             "the longest step so far (0: no limit); rerun to go on")
    parser.add_argument("--rl-stop-at", type=float, default=0.0,
                        help="unix time: end this call's RL on the step boundary before it (0: none)")
    parser.add_argument("--seed", type=int, default=0, help="RL's seed (task draws and sampling)")
    parser.add_argument("--baselines", action="store_true",
                        help="also the SFT model's one_shot, best_of_2, refine_2 and the agent at two turns")
    parser.add_argument("--no-held-out", action="store_true",
                        help="train only (SFT, RL): a rerun without this flag (on any machine, from the "
                             "collected state) judges the held-out phases, so a short GPU lease only trains")
    parser.add_argument("--no-skills", action="store_true",
                        help="the policy role alone: no skills in any prompt, no summaries, no gate "
                             "(the ablation without a skill library, in training and in evaluation)")
    ARGS = parser.parse_args()
    SETTING = {"backend": ARGS.backend, "size": "gpu" if ARGS.backend != "cpp" else "cpu"}
    if ARGS.no_skills:
        SETTING.update(skills=False, rerank=False)
    if ARGS.suite == "curriculum":
        SETTING["suite"] = "curriculum"
        HELD_OUT = curriculum_ids("heldout")
    main()
