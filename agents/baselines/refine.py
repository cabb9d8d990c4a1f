"""Iterative refinement: each turn the model sees its recent attempts and the judge's feedback on them.

The conversation is the task statement, then for each earlier attempt the reply and the feedback (the
last `history` attempts in full; older ones are dropped to keep the context small). The episode runs
until the environment's max_turns, a DONE reply, or (optionally) the first correct solution.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kernelgym.agents.baselines.common import EpisodeRecord, max_turns, policy_info, start, step

NAME = "refine"


@dataclass
class RefineConfig:
    history: int = 2  # earlier attempts kept in the conversation
    max_reply_chars: int = 12_000  # an earlier reply is cut to this in the conversation
    stop_when_correct: bool = False


def feedback_message(feedback: str, turns_left: int, max_turns_: int) -> str:
    return (f"Feedback from the judge on your last attempt:\n{feedback.strip()}\n\nTurns left: {turns_left} "
            f"of {max_turns_}. Fix any error first, then make it faster; answer with the whole module in one "
            "```python block (or just DONE to stop).")


def run_episode(env, policy, task_id: str, config: RefineConfig | None = None, *, sample: int = 0,
                seed: int | None = None) -> EpisodeRecord:
    config = config or RefineConfig()
    t0 = time.monotonic()
    obs, info, record = start(env, task_id, seed)
    record.sample, record.baseline = sample, NAME
    first = {"role": "user", "content": obs["prompt"]}
    exchanges: list[list[dict[str, str]]] = []
    limit = max_turns(env)
    for attempt in range(limit):
        kept = [m for pair in exchanges[-config.history:] for m in pair] if config.history > 0 else []
        messages = [first, *kept]
        if exchanges and config.history <= 0:  # no history: the statement and the latest feedback only
            messages = [first, exchanges[-1][1]]
        started = time.monotonic()
        reply = policy.act({**obs, "messages": messages}, policy_info(info, attempt))
        obs, info, over, turn = step(env, reply, attempt, started=started)
        record.turns.append(turn)
        if over or (config.stop_when_correct and turn.correct):
            break
        exchanges.append([
            {"role": "assistant", "content": str(reply)[: config.max_reply_chars]},
            {"role": "user", "content": feedback_message(obs["feedback"], limit - attempt - 1, limit)},
        ])
    record.wall_s = round(time.monotonic() - t0, 3)
    return record
