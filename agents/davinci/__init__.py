"""daVinci: a skill-evolving kernel agent, three roles on one backbone, trained with SFT then RL.

- config.py — the config dataclasses and their file/command-line loading
- backbone.py — the shared model (optional LoRA adapter per role): generation with token ids, log-probs
- roles.py — each role's prompt and how its reply is read
- episode.py — select skills -> T policy turns -> summarize -> gate, as one role-tagged Trajectory
- rewards.py — per-role rewards and leave-one-out advantages over a task's group of rollouts
- reinforce.py — the per-role REINFORCE loss and optimizer step
- sft_data.py / sft.py — cold-start data (replay, bench runs, JSONL), diversity filter, TRL's SFTTrainer
- rl.py — the RL loop (TensorBoard, checkpoints, resume); train.py — `kernelgym train sft|rl`

Light to import: torch, transformers, trl and peft load when a backbone is built or a trainer runs.
"""

from __future__ import annotations

from kernelgym._lazy import lazy_getattr

_LAZY = {
    "BackboneConfig": "kernelgym.agents.davinci.config",
    "EpisodeConfig": "kernelgym.agents.davinci.config",
    "RLConfig": "kernelgym.agents.davinci.config",
    "SFTConfig": "kernelgym.agents.davinci.config",
    "load_config": "kernelgym.agents.davinci.config",
    "Backbone": "kernelgym.agents.davinci.backbone",
    "EpisodeRunner": "kernelgym.agents.davinci.episode",
    "Teacher": "kernelgym.agents.davinci.episode",
    "Trajectory": "kernelgym.agents.davinci.trajectory",
    "run_sft": "kernelgym.agents.davinci.sft",
    "run_rl": "kernelgym.agents.davinci.rl",
}

__getattr__ = lazy_getattr("kernelgym.agents.davinci", _LAZY)

__all__ = ["Backbone", "BackboneConfig", "EpisodeConfig", "EpisodeRunner", "RLConfig", "SFTConfig", "Teacher",
           "Trajectory", "load_config", "run_rl", "run_sft"]
