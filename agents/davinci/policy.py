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
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: Sequence[dict[str, Any]], infos: Sequence[dict[str, Any]]) -> list[str]:
        """Replies of one role are generated together (one batched generate call per role)."""
        roles = ["selection" if i.get("role") == "skill_selection" else "policy" for i in infos]
        replies: list[str] = [""] * len(roles)
        for role in ("selection", "policy"):
            rows = [k for k, r in enumerate(roles) if r == role]
            if not rows:
                continue
            self.calls[role] += len(rows)
            messages = [[{"role": "user", "content": observations[k]["prompt"]}] if role == "selection"
                        else to_messages(observations[k], None) for k in rows]
            limit = self.selection_tokens if role == "selection" else self.max_new_tokens
            out = self.backbone.generate_batch(role, messages, temperature=self.temperature, top_p=self.top_p,
                                               max_new_tokens=limit)
            for k, generated in zip(rows, out, strict=True):
                replies[k] = generated.text
        return replies

    def close(self) -> None:
        self.backbone = None
