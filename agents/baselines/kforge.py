"""KForge-style loop: a generator writes kernels, a performance analyst tells it what to do next.

Functional passes come first: until a solution is correct, the generator sees its last attempt and the
judge's errors and is asked only to fix them. Once one is correct, each optimization pass first asks the
analyst (another policy, or the same one in an analyst role) to read the judge's timing and profile
feedback and the best solution so far, and to write concrete, prioritized recommendations; the generator
then writes a faster version following them, starting from the best correct solution.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from kernelgym.agents.baselines.common import EpisodeRecord, max_turns, policy_info, start, step

NAME = "kforge"

ANALYST_SYSTEM = (
    "You are a performance analyst for CPU and GPU kernels. You read a kernel, the judge's timing and "
    "profile report, and you write 3 to 5 concrete, prioritized recommendations for making it faster while "
    "keeping it correct (memory access patterns, fusion, vectorization, tiling, parallelism, avoiding "
    "framework ops). Write recommendations only, no code."
)


@dataclass
class KForgeConfig:
    analyst: Any = None  # a Policy for the analyst role; None: the generator's policy plays it too
    analyst_system: str = ANALYST_SYSTEM
    max_code_chars: int = 12_000


def _code(text: str | None, limit: int) -> str:
    return f"```python\n{(text or '').strip()[:limit]}\n```"


def functional_prompt(statement: str, last_solution: str | None, feedback: str, limit: int) -> str:
    if not last_solution:
        previous = "Your previous reply held no solution module."
    else:
        previous = f"Your previous attempt:\n{_code(last_solution, limit)}"
    return (f"{statement}\n\n{previous}\n\nThe judge rejected it:\n{feedback.strip()}\n\nFunctional pass: "
            "fix these problems. The next attempt must be correct; speed comes later. Answer with the whole "
            "module in one ```python block.")


def analyst_prompt(statement: str, best: dict[str, Any], feedback: str, limit: int) -> str:
    speed = f"{best.get('speedup', 0.0):.3g}x" + (" (verified)" if best.get("verified")
                                                  else " (not verified)")
    return (f"The task:\n{statement}\n\nThe best correct solution so far, speedup {speed} over the "
            f"reference:\n{_code(best.get('source'), limit)}\n\nThe judge's report on the latest attempt "
            f"(timings, profile):\n{feedback.strip()}\n\nWrite the recommendations for the next attempt.")


def optimization_prompt(statement: str, best: dict[str, Any], feedback: str, advice: str, limit: int) -> str:
    return (f"{statement}\n\nThe best correct solution so far ({best.get('speedup', 0.0):.3g}x):\n"
            f"{_code(best.get('source'), limit)}\n\nThe judge's report on the latest attempt:\n"
            f"{feedback.strip()}\n\nA performance analyst recommends:\n{advice.strip()}\n\nOptimization "
            "pass: write a faster version that follows these recommendations and stays correct, as the whole "
            "module in one ```python block.")


def run_episode(env, policy, task_id: str, config: KForgeConfig | None = None, *, sample: int = 0,
                seed: int | None = None) -> EpisodeRecord:
    config = config or KForgeConfig()
    analyst = config.analyst or policy
    t0 = time.monotonic()
    obs, info, record = start(env, task_id, seed)
    record.sample, record.baseline = sample, NAME
    statement = obs["prompt"]
    best: dict[str, Any] | None = None
    last_solution: str | None = None
    for attempt in range(max_turns(env)):
        started = time.monotonic()
        advice = ""
        if attempt == 0:
            phase, messages = "functional", [{"role": "user", "content": statement}]
        elif best is None:
            phase = "functional"
            messages = [{"role": "user",
                         "content": functional_prompt(statement, last_solution, obs["feedback"],
                                                                      config.max_code_chars)}]
        else:
            phase = "optimization"
            asked = [{"role": "system", "content": config.analyst_system},
                     {"role": "user",
                      "content": analyst_prompt(statement, best, obs["feedback"], config.max_code_chars)}]
            advice = str(analyst.act({**obs, "messages": asked}, policy_info(info, attempt, role="analyst")))
            messages = [{"role": "user",
                         "content": optimization_prompt(statement, best, obs["feedback"], advice,
                                                                        config.max_code_chars)}]
        reply = policy.act({**obs, "messages": messages},
                           policy_info(info, attempt, role="generator", phase=phase))
        obs, info, over, turn = step(env, reply, attempt, started=started, phase=phase, notes=advice[:4000])
        record.turns.append(turn)
        last_solution = info.get("solution")
        best = info.get("best") or best
        if over:
            break
    record.wall_s = round(time.monotonic() - t0, 3)
    return record
