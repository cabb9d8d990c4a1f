"""MutationPolicy: no model; it perturbs the tunable parameters of a solution (`mutate:cpp`, `mutate:triton`).

It gives a search something to find without an LLM: the parent it is shown (a search baseline's
`info["parent_source"]`, else the last solution in the conversation, else the bundled solution of the task)
comes back with one or two parameters moved (block/tile constants, unroll counts, the OpenMP schedule,
Triton block sizes and warps; see kernelgym.agents.baselines.templates). Attempt 0 with no parent is the
bundled solution itself. Instructions it is given (`info["instructions"]`) steer which kinds of parameters
it moves: words like "schedule", "unroll", "tile" or "block" narrow the choice, so evolved meta-prompts
matter to it the way they would to a model. Replies are reproducible: the randomness is seeded by the
task, the attempt and the parent.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from typing import Any

from kernelgym.agents.baselines import templates
from kernelgym.agents.policies.scripted import fence
from kernelgym.agents.policy import BasePolicy, Reply

# Words in the instructions -> the kinds of parameter they point at.
FOCUS_WORDS = {
    "schedule": ("schedule",),
    "thread": ("schedule",),
    "parallel": ("schedule",),
    "unroll": ("unroll",),
    "tile": ("constant", "launch"),
    "block": ("constant", "launch"),
    "warp": ("launch",),
    "stage": ("launch",),
}


@dataclass
class MutationConfig:
    backend: str = "cpp"  # whose bundled solutions are the seeds
    seed: int = 0
    max_changes: int = 2  # parameters moved per reply (1 .. max_changes)
    neighbour_prob: float = 0.7  # move to an adjacent value (else any other value)


class MutationPolicy(BasePolicy):
    def __init__(self, config: MutationConfig | None = None):
        from kernelgym.agents.policies.replay import bundled_files

        self.config = config or MutationConfig()
        self.name = f"mutate:{self.config.backend}"
        self._seeds: dict[str, str] = {}
        for f in bundled_files(self.config.backend):
            self._seeds.setdefault(f.key, f.path.read_text())

    def _seed_for(self, task_id: str) -> str | None:
        parts = task_id.split("/")
        return self._seeds.get("/".join(parts[-2:])) or self._seeds.get(parts[-1])

    def covers(self, task_id: str) -> bool:
        return self._seed_for(task_id) is not None

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> str:
        role = info.get("role")
        if role == "analyst":
            return Reply("No recommendations: this policy only moves tuning parameters.")
        if role == "meta_prompt":
            return Reply("")  # no rewrite of instructions: the search mutates them by its own rule
        task_id = str(info.get("task_id") or "")
        attempt = int(info.get("attempt", observation.get("turn", 0)))
        parent = info.get("parent_source") or _last_solution(observation.get("messages") or [])
        seed_source = self._seed_for(task_id)
        if parent is None:
            if seed_source is None:
                return Reply("DONE\n", note="no bundled solution for this task")
            if attempt == 0:
                return Reply(fence(seed_source), mutated="seed")
            parent = seed_source
        key = f"{self.config.seed}|{task_id}|{attempt}|{templates.source_hash(parent)}"
        rng = random.Random(zlib.crc32(key.encode()))
        child, changes = mutate(parent, rng, self.config, str(info.get("instructions") or ""))
        return Reply(fence(child), mutated="; ".join(f"{k}={v}" for k, v in changes.items()) or "none")


def mutate(
    source: str, rng: random.Random, config: MutationConfig, instructions: str = ""
) -> tuple[str, dict]:
    """`source` with 1..max_changes of its parameters moved; returns (new source, {name: new value})."""
    params = [p for p in templates.find_params(source) if len(p.choices) > 1]
    if not params:
        return source, {}
    wanted = {kind for word, kinds in FOCUS_WORDS.items() if word in instructions.lower() for kind in kinds}
    focused = [p for p in params if p.kind in wanted] or params
    chosen = rng.sample(focused, k=min(len(focused), rng.randint(1, max(1, config.max_changes))))
    changes = {}
    for p in chosen:
        here = p.choices.index(p.value) if p.value in p.choices else 0
        near = [p.choices[i] for i in (here - 1, here + 1) if 0 <= i < len(p.choices)]
        others = [c for c in p.choices if c != p.value]
        changes[p.name] = rng.choice(near if near and rng.random() < config.neighbour_prob else others)
    return templates.apply(source, params, changes), changes


def _last_solution(messages: list[dict[str, Any]]) -> str | None:
    from kernelgym.envs.parsing import parse_reply

    for message in reversed(messages):
        if message.get("role") == "assistant":
            code = parse_reply(str(message.get("content", ""))).code
            if code:
                return code
    return None


def parse_mutate(spec: str, options: dict[str, Any]) -> MutationPolicy:
    """`mutate:BACKEND?seed=1&max_changes=2`."""
    return MutationPolicy(MutationConfig(backend=spec or "cpp", **options))
