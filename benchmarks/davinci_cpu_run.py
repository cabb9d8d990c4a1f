"""A small real learning run of the daVinci agent: SmolLM2-135M, cpp (or triton) backend, bundled tasks.

    python benchmarks/davinci_cpu_run.py --out runs/davinci-cpu [--rl-steps 3] [--model smollm2] \
        [--device cuda] [--backend triton]

The model runs on --device (cpu by default; cuda puts generation and training on the GPU while the cpp
judge stays on the CPU cores).

1. evaluate the base model on held-out level-1 tasks (no example solution ships for them);
2. SFT cold start on the training split (the level-1 tasks whose example solution for the backend the
   judge confirms);
3. evaluate again; 4. RL (REINFORCE, per-role advantages) on the training split; 5. evaluate again.
Writes `results.json` (compile rate, correct rate, fast_1 per phase; skills admitted during RL),
`curves.png` (RL metrics per step) and TensorBoard logs under the phases' folders.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

HELD_OUT = ["L1/8_Sigmoid", "L1/9_Tanh", "L1/12_LeakyReLU", "L1/24_Mean_Dim"]
JUDGE = {"timing_budget_s": 1.0}


def train_split(backend: str) -> list[str]:
    """The level-1 tasks with a bundled example solution for the backend (none of HELD_OUT has one)."""
    from kernelgym.solutions import examples

    ids = [e.task_id for e in examples(backend)]
    return [t.removeprefix("bundled/") for t in ids if t.startswith("bundled/L1/")]


def evaluate(backbone, pool, tokens: int) -> dict:
    """One greedy episode (one policy turn, the BM25+rerank skills) per held-out task."""
    from kernelgym.agents.davinci.config import EpisodeConfig
    from kernelgym.agents.davinci.episode import EpisodeRunner
    from kernelgym.agents.davinci.rl import episode_metrics
    from kernelgym.skill_store import SkillStore

    config = EpisodeConfig(max_turns=1, summarize="never", temperature=0.0, policy_tokens=tokens,
                           eval_options=JUDGE, task_ids=HELD_OUT, **SETTING)
    t0 = time.monotonic()
    with SkillStore(Path(ARGS.out) / "eval-skills.sqlite") as store:
        runner = EpisodeRunner(config, backbone, store, pool)
        trajs = runner.run_batch(HELD_OUT)  # one batched generate call per turn
        runner.close()
    out = episode_metrics([trajs])
    out["verdicts"] = {t.task_id: t.verdicts for t in trajs}
    out["best_verified_speedups"] = {t.task_id: t.best_verified_speedup for t in trajs}
    out["wall_s"] = round(time.monotonic() - t0, 1)
    return out


def curriculum_ids(split: str) -> list[str]:
    from kernelgym.tasks.curriculum import heldout_ids, train_ids

    return train_ids() if split == "train" else heldout_ids()


def main() -> None:
    from kernelgym import EvalPool
    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.agents.davinci.config import (
        BackboneConfig,
        EpisodeConfig,
        RLConfig,
        SFTConfig,
        SFTDataConfig,
    )
    from kernelgym.agents.davinci.rl import run_rl
    from kernelgym.agents.davinci.sft import run_sft

    out = Path(ARGS.out)
    out.mkdir(parents=True, exist_ok=True)
    train = train_split(ARGS.backend) if ARGS.suite == "bundled" else curriculum_ids("train")
    backbone_config = BackboneConfig(model=ARGS.model, max_prompt_tokens=2048, threads=ARGS.threads,
                                     device=ARGS.device, lora=ARGS.lora, lora_rank=8)
    results: dict = {"train": train, "held_out": HELD_OUT, "args": vars(ARGS)}

    def save() -> None:  # after every phase, so that a run cut by a time limit keeps what it measured
        (out / "results.json").write_text(json.dumps(results, indent=1))
    with EvalPool(workers=1) as pool:
        if ARGS.from_sft:  # RL again from an earlier run's SFT model; its before/after-SFT numbers carry over
            earlier = json.loads((Path(ARGS.from_sft) / "results.json").read_text())
            results.update({k: earlier[k] for k in ("before_sft", "sft", "after_sft")})
            results["sft"]["from"] = ARGS.from_sft
            sft_dir = Path(ARGS.from_sft) / "sft" / "model"
            backbone = Backbone(replace(backbone_config, model=str(sft_dir)))
            if ARGS.no_skills:  # the anchor of the ablation: the same SFT model, judged without skills
                results["after_sft_no_skills"] = evaluate(backbone, pool, ARGS.tokens)
                print("after SFT, no skills", results["after_sft_no_skills"], flush=True)
                save()
        else:
            backbone = Backbone(backbone_config)
            results["before_sft"] = evaluate(backbone, pool, ARGS.tokens)
            print("before SFT", results["before_sft"], flush=True)
            save()
            sft = SFTConfig(backbone=backbone_config, output_dir=str(out / "sft"), epochs=ARGS.sft_epochs,
                            lr=ARGS.sft_lr,
                            batch_size=1, max_length=3072, data=SFTDataConfig(replay_backend=ARGS.backend),
                            episode=EpisodeConfig(task_ids=train, max_turns=1, eval_options=JUDGE, **SETTING))
            t0 = time.monotonic()
            sft_result = run_sft(sft, backbone=backbone, pool=pool)
            sft_dir = sft_result.output_dir
            results["sft"] = {"examples": sft_result.examples, "filter": sft_result.filter_report,
                              "train_loss": sft_result.train_loss, "wall_s": round(time.monotonic() - t0, 1)}
            results["after_sft"] = evaluate(backbone, pool, ARGS.tokens)
            print("after SFT", results["after_sft"], flush=True)
            save()
        if ARGS.rl_steps == 0:  # SFT only; a later run can start RL from it with --from-sft
            return
        rl = RLConfig(backbone=replace(backbone_config, model=str(sft_dir)),
                      episode=EpisodeConfig(task_ids=train, max_turns=ARGS.turns, eval_options=JUDGE,
                                            policy_tokens=ARGS.tokens, gate_runs=2,
                                            summarize="never" if ARGS.no_skills else "verified",
                                            temperature=ARGS.temperature, **SETTING),
                      output_dir=str(out / "rl"), steps=ARGS.rl_steps, tasks_per_step=2,
                      group_size=ARGS.group, lr=ARGS.rl_lr, save_every=ARGS.save_every or ARGS.rl_steps,
                      seed=ARGS.seed,
                      task_sampling="success" if ARGS.suite == "curriculum" else "uniform")
        t0 = time.monotonic()
        rl_result = run_rl(rl, backbone=backbone, pool=pool)
        results["rl"] = {"steps": rl_result.steps_done, "skills_admitted": rl_result.admitted,
                         "gate_calls": rl_result.gate_calls, "wall_s": round(time.monotonic() - t0, 1)}
        results["after_rl"] = evaluate(backbone, pool, ARGS.tokens)
        print("after RL", results["after_rl"], flush=True)
        save()
    plot(out)


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
    parser.add_argument("--out", default="runs/davinci-cpu")
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
    parser.add_argument("--temperature", type=float, default=0.8, help="sampling temperature of RL rollouts")
    parser.add_argument("--from-sft", default="", help="an earlier run's --out: RL from its SFT model")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu", help="where the model runs: cpu or cuda")
    parser.add_argument("--backend", default="cpp", help="cpp (CPU judge) or triton (GPU judge, gpu size)")
    parser.add_argument("--suite", default="bundled",
                        help="bundled (level-1 tasks, 4 held out) or curriculum (its 46 train / 23 held-out "
                             "split; RL samples tasks by success rate)")
    parser.add_argument("--lora", action="store_true",
                        help="rank-8 LoRA adapters per role (small checkpoints)")
    parser.add_argument("--save-every", type=int, default=0, help="RL checkpoint interval (0: at the end)")
    parser.add_argument("--seed", type=int, default=0, help="RL's seed (task draws and sampling)")
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
