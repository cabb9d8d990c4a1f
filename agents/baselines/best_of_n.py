"""Best-of-N: N independent replies to the same task statement, each judged; the best verified one counts.

The N samples are the episode's turns (so the environment's best-so-far is the best of N); every sample
sees only the first observation, never another sample's feedback. With `batch=True` the N replies come
from one `act_batch` call (one batched generation, or N concurrent requests).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kernelgym.agents.baselines.common import EpisodeRecord, max_turns, policy_info, start, step
from kernelgym.agents.policy import act_batch

NAME = "best_of_n"


@dataclass
class BestOfNConfig:
    n: int | None = None  # None: the environment's max_turns (and at most that)
    batch: bool = True


def run_episode(env, policy, task_id: str, config: BestOfNConfig | None = None, *, sample: int = 0,
                seed: int | None = None) -> EpisodeRecord:
    config = config or BestOfNConfig()
    t0 = time.monotonic()
    obs, info, record = start(env, task_id, seed)
    record.sample, record.baseline = sample, NAME
    n = min(config.n or max_turns(env), max_turns(env))
    infos = [policy_info(info, i, sample_of=n) for i in range(n)]
    started = time.monotonic()
    if config.batch:
        replies = act_batch(policy, [obs] * n, infos)
    else:
        replies = [policy.act(obs, i) for i in infos]
    generation_s = (time.monotonic() - started) / max(1, n)
    for i, reply in enumerate(replies):
        *_, over, turn = step(env, reply, i, phase="sample")
        turn.wall_s = round(turn.eval_s + generation_s, 3)
        record.turns.append(turn)
        if over:  # a reply that said DONE, or a target speedup reached
            break
    record.wall_s = round(time.monotonic() - t0, 3)
    return record
