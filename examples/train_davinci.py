"""Train the daVinci agent: SFT cold start, then RL with per-role advantages. Copy and edit.

    python examples/train_davinci.py                 # SmolLM2-135M on the CPU, cpp backend (slow but real)
    python examples/train_davinci.py --tiny          # a tiny random model: checks the plumbing in a minute

The same runs from the command line:

    kernelgym train sft backbone.model=smollm2 output_dir=runs/davinci-sft 'episode.task_ids=["L1/1_ReLU"]'
    kernelgym train rl backbone.model=runs/davinci-sft/model output_dir=runs/davinci-rl steps=2
    kernelgym bench --policy davinci:runs/davinci-rl/checkpoint-2/model --baseline davinci \\
        -o skills_db=runs/davinci-rl/skills.sqlite --tasks L1/8_Sigmoid
"""

from __future__ import annotations

import argparse

from kernelgym.agents.davinci.config import BackboneConfig, EpisodeConfig, RLConfig, SFTConfig
from kernelgym.agents.davinci.rl import run_rl
from kernelgym.agents.davinci.sft import run_sft

TRAIN = ["L1/1_ReLU", "L1/7_GELU", "L1/23_Sum_Dim"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tiny", action="store_true", help="a tiny random model instead of SmolLM2")
    parser.add_argument("--out", default="runs/davinci-example")
    args = parser.parse_args()
    model = "smollm2"
    if args.tiny:
        from kernelgym.agents.tiny import make_tiny_model

        model = str(make_tiny_model(f"{args.out}/tiny-model", context=8192))
    episode = EpisodeConfig(task_ids=TRAIN, max_turns=2, policy_tokens=64 if args.tiny else 512,
                            eval_options={"timing_budget_s": 1.0})

    sft = run_sft(SFTConfig(backbone=BackboneConfig(model=model), episode=episode, epochs=1, max_length=4096,
                            output_dir=f"{args.out}/sft"))
    print("SFT:", sft.examples, sft.train_loss)

    rl = run_rl(RLConfig(backbone=BackboneConfig(model=str(sft.output_dir)), episode=episode, steps=2,
                         tasks_per_step=2, group_size=2, output_dir=f"{args.out}/rl"))
    print(f"RL: {rl.steps_done} steps, skills admitted: {rl.admitted}; "
          f"TensorBoard: {args.out}/rl/tensorboard")


if __name__ == "__main__":
    main()
