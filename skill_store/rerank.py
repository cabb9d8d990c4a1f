"""LLM rerank of BM25 candidates, through kernelgym's Policy protocol (`act(observation, info) -> str`).

The model sees the task summary and the numbered candidates and answers with their ids, best first. Any
id it names that is not a candidate is ignored; candidates it leaves out follow in BM25 order. A reply that
names no candidate at all, or a policy that raises, leaves the BM25 order unchanged (the deterministic
fallback), and the result says why.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_ID_LIKE = re.compile(r"[a-z0-9][a-z0-9_.-]*[a-z0-9]", re.IGNORECASE)
_JSON_LIST = re.compile(r"\[[^\[\]]*\]", re.DOTALL)


@dataclass
class RerankConfig:
    candidates: int = 10  # how many BM25 hits the model chooses from
    technique_chars: int = 280  # each candidate's technique, trimmed, in the prompt


@dataclass
class RerankResult:
    hits: list = field(default_factory=list)
    used_llm: bool = False
    reason: str = ""  # why the BM25 order was kept, when it was
    reply: str = ""


def rerank_prompt(query_text: str, hits, config: RerankConfig) -> str:
    lines = [
        "You select optimization techniques for a GPU/CPU kernel-writing task.",
        f"Task: {query_text}",
        "",
        "Candidate skills:",
    ]
    for hit in hits:
        skill = hit.skill
        technique = (
            skill.technique
            if len(skill.technique) <= config.technique_chars
            else (skill.technique[: config.technique_chars].rsplit(" ", 1)[0] + " ...")
        )
        lines.append(f"- {skill.id}: {skill.title}. {technique}")
    lines += [
        "",
        ("Reply with a JSON list of the ids of the skills that help with this task, most useful first, "
         'for example ["id-one", "id-two"]. Leave out skills that do not apply.'),
    ]
    return "\n".join(lines)


def parse_ranked_ids(reply: str, known: list[str]) -> list[str]:
    """The known ids the reply names, in its order: from a JSON list if there is one, else from the text."""
    allowed = set(known)
    for match in _JSON_LIST.finditer(reply or ""):
        try:
            values = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        ids = [v for v in values if isinstance(v, str) and v in allowed]
        if ids:
            return list(dict.fromkeys(ids))
    # No usable JSON: take ids in order of first mention (models often answer with a numbered list).
    found = [m.group(0) for m in _ID_LIKE.finditer(reply or "") if m.group(0) in allowed]
    return list(dict.fromkeys(found))


def rerank(query_text: str, hits, policy, k: int = 5, config: RerankConfig | None = None) -> RerankResult:
    config = config or RerankConfig()
    candidates = list(hits[: config.candidates])
    if policy is None:
        return RerankResult(candidates[:k], False, "no reranker configured")
    if not candidates:
        return RerankResult([], False, "no candidates")
    prompt = rerank_prompt(query_text, candidates, config)
    info = {"role": "skill_selection", "candidates": [h.id for h in candidates]}
    try:
        reply = policy.act({"prompt": prompt}, info)
    except Exception as exc:  # noqa: BLE001 - a failing LLM must not take retrieval down with it
        return RerankResult(candidates[:k], False, f"reranker failed: {type(exc).__name__}: {exc}"[:300])
    if not isinstance(reply, str):
        return RerankResult(candidates[:k], False, "reranker reply is not text")
    ranked = parse_ranked_ids(reply, [h.id for h in candidates])
    if not ranked:
        return RerankResult(candidates[:k], False, "reranker reply named no candidate", reply)
    by_id = {h.id: h for h in candidates}
    ordered = [by_id[i] for i in ranked] + [h for h in candidates if h.id not in set(ranked)]
    return RerankResult(ordered[:k], True, "", reply)
