"""One-shot: the task statement, one reply, one evaluation (KernelBench's single-attempt setting)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from kernelgym.agents.baselines.common import EpisodeRecord, policy_info, start, step

NAME = "one_shot"


@dataclass
class OneShotConfig:
    instructions: str = ""  # appended to the task statement (e.g. a hint or a few-shot example)


def run_episode(env, policy, task_id: str, config: OneShotConfig | None = None, *, sample: int = 0,
                seed: int | None = None) -> EpisodeRecord:
    config = config or OneShotConfig()
    t0 = time.monotonic()
    obs, info, record = start(env, task_id, seed)
    record.sample, record.baseline = sample, NAME
    if config.instructions:
        obs = {**obs, "messages": [{"role": "user", "content": f"{obs['prompt']}\n\n{config.instructions}"}]}
    started = time.monotonic()
    reply = policy.act(obs, policy_info(info, 0))
    *_, turn = step(env, reply, 0, started=started)
    record.turns.append(turn)
    record.wall_s = round(time.monotonic() - t0, 3)
    return record
