"""A trained daVinci checkpoint as a kernelgym Policy (`--policy davinci:CHECKPOINT` in `kernelgym bench`).

The store's rerank call (info["role"] == "skill_selection") is answered by the selection role, everything
else by the policy role; pair it with `--baseline davinci`, which selects skills and writes the policy's
prompts the way training did.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from kernelgym.agents.davinci.config import BackboneConfig
from kernelgym.agents.policy import BasePolicy, to_messages


class DavinciPolicy(BasePolicy):
    def __init__(self, checkpoint: str, *, max_new_tokens: int = 4608, selection_tokens: int = 64,
                 temperature: float = 0.2, top_p: float = 1.0, device: str = "cpu",
                 threads: int | None = None, max_prompt_tokens: int = 6144):
        from kernelgym.agents.davinci.backbone import Backbone

        self.name = f"davinci:{checkpoint}"
        self.backbone = Backbone(BackboneConfig(model=checkpoint, device=device, threads=threads,
                                                max_prompt_tokens=max_prompt_tokens))
        self.max_new_tokens, self.selection_tokens = max_new_tokens, selection_tokens
        self.temperature, self.top_p = temperature, top_p
        self.calls: Counter[str] = Counter()  # replies per role

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> str:
        selecting = info.get("role") == "skill_selection"
        role = "selection" if selecting else "policy"
        self.calls[role] += 1
        messages = [{"role": "user", "content": observation["prompt"]}] if selecting else \
            to_messages(observation, None)
        limit = self.selection_tokens if selecting else self.max_new_tokens
        out = self.backbone.generate(role, messages, temperature=self.temperature, top_p=self.top_p,
                                     max_new_tokens=limit)
        return out.text

    def act_batch(self, observations: Sequence[dict[str, Any]], infos: Sequence[dict[str, Any]]) -> list[str]:
        return [self.act(o, i) for o, i in zip(observations, infos, strict=True)]

    def close(self) -> None:
        self.backbone = None
