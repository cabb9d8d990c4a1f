"""KernelEvolve-style graph search: select a node, rewrite it with the policy, judge the child, repeat.

- Graph: every judged candidate is a node with an edge from the parent it was rewritten from
  (kernelgym.agents.baselines.search: deduplicated by normalised source, saved per task as JSON + PNG).
- Selection: UCB over the nodes that can be parents (correct ones; before any is correct, every judged one,
  so the first fixes build on the failures): value = score relative to the best (Node.score: the fitness,
  else a tenth of the measured speedup), plus
  `exploration * sqrt(ln(visits of all) / (1 + visits))` (a visit is a reply asked for from it), plus
  `novelty * 1 / (nodes sharing its
  behaviour cell)`; ties go to the measured speedup.
- Universal operator: one prompt for every step: the task statement, the parent's code, the judge's
  feedback on it (timings, roofline, profile) and the skills retrieved for the task from the skill store;
  the policy answers with a whole new module (the parent's source is also in `info["parent_source"]` for
  programmatic policies such as `mutate:cpp`).
- Fitness: the verified speedup (0 when failed or not verified). Termination: the judge-call budget
  (`budget`, default the environment's max_turns, i.e. `kernelgym bench --turns`), no improvement in
  `patience` calls, or `max_proposals_factor * budget` replies.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from kernelgym.agents.baselines.common import EpisodeRecord, policy_info, start
from kernelgym.agents.baselines.search import Node, Search, rewrite_prompt

NAME = "evolve"


@dataclass
class EvolveConfig:
    budget: int | None = None  # judge calls; None: the environment's max_turns (and at most that)
    seeds: int = 1  # first candidates written from the task statement alone
    exploration: float = 0.5  # UCB constant
    novelty: float = 0.2  # weight of the behaviour-cell rarity bonus
    patience: int | None = None  # stop after this many calls without a better best; None: never
    skills: int = 3  # skills retrieved from the store into each prompt; 0: none
    skills_db: str | None = None  # None: the default store ($KERNELGYM_SKILLS_DB or ~/.cache/kernelgym)
    max_code_chars: int = 12_000
    max_proposals_factor: float = 4.0
    state_dir: str | None = None  # None: <bench out>/search (next to the trajectory log)


def cell(node: Node) -> tuple:
    d = node.descriptor
    return d.get("bound"), d.get("roofline_bin"), d.get("kernels"), d.get("tile_log2")


def select(nodes: list[Node], exploration: float, novelty: float) -> Node | None:
    """The parent for the next rewrite (UCB with a novelty term), or None when nothing was judged."""
    judged = [n for n in nodes if n.call is not None]
    pool = [n for n in judged if n.correct] or judged
    if not pool:
        return None
    top = max(max(n.score for n in pool), 1e-9)
    total = sum(n.visits for n in pool) + 1
    cells: dict[tuple, int] = {}
    for n in judged:
        cells[cell(n)] = cells.get(cell(n), 0) + 1

    def score(n: Node) -> tuple[float, float]:
        bonus = exploration * math.sqrt(math.log(total + 1) / (1 + n.visits)) + novelty / cells[cell(n)]
        return n.score / top + bonus, n.rank[1]

    return max(pool, key=score)


def retrieve_skills(env, task_id: str, config: EvolveConfig) -> str:
    """The top skills for the task as prompt text ('' when none or when the store cannot be opened)."""
    if config.skills <= 0:
        return ""
    try:
        from kernelgym.skill_store import Retriever, open_store

        task = next((t for t in env.unwrapped.tasks if t.id == task_id), None)
        hits = Retriever.from_store(open_store(config.skills_db)).search(
            task if task is not None else task_id, backend=env.unwrapped.backend, k=config.skills
        )
    except Exception:  # noqa: BLE001 - skills are help, not a requirement: a broken store means none
        return ""
    return "\n\n".join(h.skill.to_prompt() for h in hits)


def run_episode(
    env, policy, task_id: str, config: EvolveConfig | None = None, *, sample: int = 0, seed: int | None = None
) -> EpisodeRecord:
    config = config or EvolveConfig()
    obs, info, _ = start(env, task_id, seed)
    search = Search.from_config(env, NAME, info.get("task_id", task_id), sample, config)
    statement = obs["prompt"]
    skills = retrieve_skills(env, task_id, config)
    while not search.should_stop():
        state = search.state
        roots = sum(n.operator == "seed" for n in state.nodes)
        parent = select(state.nodes, config.exploration, config.novelty) if roots >= config.seeds else None
        started = time.monotonic()
        if parent is None:
            messages = [{"role": "user", "content": statement}]
            extra = {}
        else:
            guidance = f"Techniques that may apply:\n{skills}" if skills else ""
            prompt = rewrite_prompt(statement, parent, guidance, config.max_code_chars)
            messages = [{"role": "user", "content": prompt}]
            extra = {"parent_source": parent.source, "parent_id": parent.id}
        reply = policy.act(
            {**obs, "messages": messages},
            policy_info(info, state.proposals, role="generator", phase=NAME, **extra),
        )
        search.judge(reply, parent, "seed" if parent is None else "rewrite", started=started)
    return search.finish(info)
