"""The three roles' prompts and how their replies are read.

- Skill Selection: the skill store's own rerank prompt over the BM25 candidates; the reply is a JSON list
  of ids (the store's `parse_ranked_ids`).
- Policy: the environment's statement with the chosen skills, then the judge's feedback turn by turn.
- Skill Summary: the finished trajectory's best solution and its measured result; the reply is one JSON
  object (title, technique, applies_when, bound, code_pattern) that becomes a gate candidate.

`teacher_summary` writes a well-formed summary from a verified solution: the SFT target of the summary
role, so the cold start teaches the format the RL phase is rewarded for.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from kernelgym.agents.policy import SYSTEM_PROMPT

SUMMARY_SYSTEM = (
    "You distill a verified GPU/CPU kernel optimization into a reusable skill for a library. Reply with one "
    "JSON object and nothing else."
)
SUMMARY_KEYS = ("title", "technique", "applies_when", "bound", "code_pattern")
_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


# Skill Selection ---------------------------------------------------------------------------------------

def selection_messages(query_text: str, hits, candidate_chars: int = 280) -> list[dict[str, str]]:
    from kernelgym.skill_store.rerank import RerankConfig, rerank_prompt

    config = RerankConfig(candidates=len(hits), technique_chars=candidate_chars)
    prompt = rerank_prompt(query_text, hits, config)
    return [{"role": "user", "content": prompt}]


def parse_selection(reply: str, candidate_ids: list[str]) -> list[str]:
    from kernelgym.skill_store.rerank import parse_ranked_ids

    return parse_ranked_ids(reply, candidate_ids)


def selection_target(ids: list[str]) -> str:
    return json.dumps(ids)


# Policy ------------------------------------------------------------------------------------------------

def skills_block(skills) -> str:
    if not skills:
        return ""
    body = "\n\n".join(skill.to_prompt() for skill in skills)
    return f"\n\nVerified techniques that may help (from the skill library):\n\n{body}"


def policy_messages(statement: str, skills, history: list[tuple[str, str]]) -> list[dict[str, str]]:
    """System, the statement with the skills, then (reply, feedback) pairs of earlier turns."""
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": statement + skills_block(skills)}]
    for reply, feedback in history:
        messages.append({"role": "assistant", "content": reply})
        messages.append({"role": "user", "content": f"Feedback from the judge:\n{feedback}"})
    return messages


# Skill Summary -----------------------------------------------------------------------------------------

def summary_messages(task_id: str, category: str, backend: str, source: str, speedup: float | None,
                     skills_used: list[str], max_source_chars: int = 4000) -> list[dict[str, str]]:
    measured = f"{speedup:.2f}x faster than PyTorch" if speedup else "correct, no verified speedup yet"
    code = source if len(source) <= max_source_chars else source[:max_source_chars] + "\n# ...[cut]"
    used = ", ".join(skills_used) or "none"
    user = (
        f"Task: {task_id} (category {category}, backend {backend}). The solution below was judged correct, "
        f"{measured}. Skills it was given: {used}.\n\n```python\n{code}\n```\n\n"
        "Write the technique it uses as a skill: a JSON object with keys \"title\" (short), \"technique\" "
        "(what it does and why it is faster), \"applies_when\" (a list of task patterns), \"bound\" "
        "(\"memory\", \"compute\" or \"any\") and \"code_pattern\" (a short sketch of the key code)."
    )
    return [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": user}]


def parse_summary(reply: str) -> dict[str, Any] | None:
    """The skill fields of a summary reply, or None when it is not one usable JSON object."""
    match = _OBJECT.search(reply or "")
    if match is None:
        return None
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict):
        return None
    title, technique = data.get("title"), data.get("technique")
    if not (isinstance(title, str) and title.strip() and isinstance(technique, str) and technique.strip()):
        return None
    patterns = data.get("applies_when") or []
    if isinstance(patterns, str):
        patterns = [patterns]
    bound = data.get("bound") if data.get("bound") in ("memory", "compute", "any") else "any"
    code = data.get("code_pattern") if isinstance(data.get("code_pattern"), str) else ""
    return {"title": title.strip()[:120], "technique": technique.strip()[:2000],
            "patterns": [str(p)[:200] for p in patterns if str(p).strip()][:8], "bound": bound,
            "code_pattern": code[:2000]}


def candidate_from_summary(fields: dict[str, Any], *, task_id: str, backend: str, size: str | None,
                           source: str):
    """A gate Candidate; the id is ours (task and content hash), never the model's."""
    from kernelgym.skill_store import AppliesWhen, Candidate, Provenance, Skill, Solution

    digest = hashlib.sha256((fields["title"] + source).encode()).hexdigest()[:10]
    stem = re.sub(r"[^a-z0-9]+", "-", task_id.split("/")[-1].lower()).strip("-")[:40] or "task"
    solution = Solution(source=source, task_ids=[task_id], backend=backend, size=size)
    skill = Skill(
        id=f"distilled-{stem}-{digest}", title=fields["title"], technique=fields["technique"],
        applies_when=AppliesWhen(patterns=fields["patterns"], bound=fields["bound"], backends=[backend]),
        code_pattern=fields["code_pattern"], provenance=Provenance(source="distilled"), solution=solution,
    )
    return Candidate(skill, solution)


def teacher_summary(task_name: str, category: str, bound: str, source: str) -> str:
    """A well-formed summary of a verified solution (the summary role's SFT target)."""
    lines = [ln for ln in source.splitlines() if ln.strip() and not ln.lstrip().startswith(("#", "import"))]
    sketch = "\n".join(lines[:12])
    what = category.replace("_", " ") or task_name
    return json.dumps({
        "title": f"Hand-written {what} kernel for {task_name.replace('_', ' ')}",
        "technique": f"Replace the PyTorch {what} ops with one fused native kernel over raw pointers: a "
                     "single pass over contiguous memory, no intermediate tensors, loops the compiler "
                     "vectorizes.",
        "applies_when": [task_name.replace("_", " "), what],
        "bound": bound if bound in ("memory", "compute") else "any",
        "code_pattern": sketch,
    })
