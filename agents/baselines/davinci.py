"""The daVinci episode for `kernelgym bench`: select skills, then refine with the skills in the prompt.

Skill Selection takes the store's BM25 top candidates for the task and, with `rerank`, lets the policy
choose among them through the store's rerank interface (a `davinci:CHECKPOINT` policy answers that call
with its selection role); the chosen skills go into every policy prompt, in the same chat format the agent
was trained on (kernelgym.agents.davinci.roles). `-o skills=off` and `-o rerank=off` are the ablations.
No summary is written at bench time: the library is read, never changed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from kernelgym.agents.baselines.common import EpisodeRecord, max_turns, policy_info, start, step

NAME = "davinci"


def _switch(value) -> bool:
    if isinstance(value, str):
        if value.lower() not in ("on", "off", "true", "false"):
            raise ValueError(f"expected on or off, not {value!r}")
        return value.lower() in ("on", "true")
    return bool(value)


@dataclass
class DavinciConfig:
    skills: bool | str = True  # off: no skills in the prompt
    rerank: bool | str = True  # off: BM25's order, the policy is not asked
    candidates: int = 6
    use_skills: int = 2
    history: int = 1
    skills_db: str | None = None  # None: the default store (~/.cache/kernelgym/skills.sqlite, seeded)

    def __post_init__(self) -> None:
        self.skills, self.rerank = _switch(self.skills), _switch(self.rerank)


def select_skills(task, backend: str, policy, config: DavinciConfig) -> list:
    """The skills for `task` (a Task, or an id that kernelgym.tasks.resolve_task knows)."""
    from kernelgym.skill_store import SkillStore
    from kernelgym.skill_store.rerank import RerankConfig, rerank
    from kernelgym.skill_store.retrieval import Retriever, as_query
    from kernelgym.tasks import resolve_task

    if not config.skills:
        return []
    task = resolve_task(task) if isinstance(task, str) else task
    with SkillStore(config.skills_db) as store:
        hits = Retriever.from_store(store).search(task, backend=backend, k=config.candidates)
    if config.rerank and hits:
        hits = rerank(as_query(task).text(), hits, policy, k=config.use_skills,
                      config=RerankConfig(candidates=config.candidates)).hits
    return [h.skill for h in hits[: config.use_skills]]


def run_episode(env, policy, task_id: str, config: DavinciConfig | None = None, *, sample: int = 0,
                seed: int | None = None) -> EpisodeRecord:
    from kernelgym.agents.davinci.roles import policy_messages

    config = config or DavinciConfig()
    t0 = time.monotonic()
    obs, info, record = start(env, task_id, seed)
    record.sample, record.baseline = sample, NAME
    task = next(t for t in env.unwrapped.tasks if t.id == record.task_id)  # any source, a folder's too
    skills = select_skills(task, env.unwrapped.backend, policy, config)
    history: list[tuple[str, str]] = []
    for attempt in range(max_turns(env)):
        messages = policy_messages(obs["prompt"], skills, history[-config.history:] if config.history else [])
        started = time.monotonic()
        reply = policy.act({**obs, "messages": messages}, policy_info(info, attempt))
        notes = "skills: " + ",".join(s.id for s in skills) if attempt == 0 else ""
        obs, info, over, turn = step(env, reply, attempt, started=started, notes=notes)
        record.turns.append(turn)
        if over:
            break
        history.append((str(reply), obs["feedback"]))
    record.wall_s = round(time.monotonic() - t0, 3)
    return record
