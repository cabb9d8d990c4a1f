"""SFT cold-start data: role-formatted chat examples from replays, bench runs and external JSONL, filtered.

Sources:
- replay: every bundled example solution of a backend (on the training split) played through a daVinci
  episode with teachers for all three roles and the real judge; only turns the judge found correct become
  policy examples, and only their episodes give selection and summary examples.
- bench runs: the environment's per-turn JSONL (`trajectories.jsonl` of `kernelgym bench`, or any env's
  `trajectory_path`); correct turns become policy examples.
- external JSONL: rows already role-formatted ({"role", "messages", "completion", "task_id", "category"})
  or env turns as above.

Filtering (policy examples, by the solution code they contain): exact duplicates by a normalised-AST hash
(names, docstrings, comments and whitespace do not count), optional near-duplicates by MinHash, a cap per
task, then category balance (no category above `category_ratio` x the smallest one).
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.agents.davinci import roles
from kernelgym.agents.davinci.config import SFTDataConfig
from kernelgym.envs.parsing import parse_reply
from kernelgym.errors import ConfigError


@dataclass
class Example:
    role: str
    messages: list[dict[str, str]]  # the prompt
    completion: str
    task_id: str = ""
    category: str = ""
    origin: str = ""  # "replay", "bench:<file>", "external:<file>"
    meta: dict[str, Any] = field(default_factory=dict)

    def code(self) -> str | None:
        return parse_reply(self.completion).code if self.role == "policy" else None

    def to_row(self) -> dict[str, Any]:
        """TRL's conversational prompt-completion row (the loss falls on the completion only)."""
        return {"prompt": self.messages, "completion": [{"role": "assistant", "content": self.completion}],
                "role": self.role, "task_id": self.task_id}


# sources -------------------------------------------------------------------------------------------------

def replay_examples(runner, backend: str, task_ids: Sequence[str] | None = None) -> list[Example]:
    """Teacher-forced episodes of the bundled solutions through `runner` (an EpisodeRunner)."""
    from kernelgym.agents.davinci.episode import Teacher
    from kernelgym.skill_store.labels import load_labels
    from kernelgym.skill_store.query import query_for_task
    from kernelgym.solutions import examples as bundled_solutions

    labels = {(lab.task_id, lab.backend): lab.relevant for lab in load_labels()}
    env_tasks = {t.id: t for t in runner.env.unwrapped.tasks}  # e.g. level 1 only for KernelGym-L1-v0
    wanted = None
    if task_ids:  # ids as the env takes them: whole, or without the suite ("L1/1_ReLU")
        wanted = {t for t in env_tasks if any(t == i or t.endswith("/" + i) for i in task_ids)}
    solutions = [(s.task_id, s.source) for s in bundled_solutions(backend)]
    if any(t.startswith("curriculum/") for t in env_tasks):  # the generated tasks' train split only
        from kernelgym.tasks.curriculum import curriculum

        solutions += [(c.id, c.solutions[backend]) for c in curriculum("train") if backend in c.solutions]
    heldout = heldout_task_ids()
    ids, teachers = [], []
    for task_id, source in solutions:
        if task_id not in env_tasks or task_id in heldout or (wanted is not None and task_id not in wanted):
            continue
        task = env_tasks[task_id]
        summary = roles.teacher_summary(task.name, task.category, query_for_task(task).bound, source)
        ids.append(task.id)
        teachers.append(Teacher(policy_replies=[f"```python\n{source}\n```"],
                                selection=labels.get((task.id, backend), []), summary=summary, gate=False))
    out: list[Example] = []
    # One batch: every replay is judged concurrently (as many at once as the pool has workers).
    for traj in runner.run_batch(ids, teachers) if ids else []:
        if "ok" not in traj.verdicts:
            continue  # the judge did not confirm it here: not a demonstration
        for turn in traj.turns:
            if turn.role == "policy" and turn.meta.get("verdict") != "ok":
                continue
            out.append(Example(turn.role, turn.meta["messages"], turn.text, traj.task_id, traj.category,
                               "replay", {"speedup": turn.meta.get("speedup")}))
    return out


def heldout_task_ids() -> set[str]:
    """The curriculum's held-out tasks: never SFT data, never RL tasks."""
    from kernelgym.tasks.curriculum import heldout_ids

    return set(heldout_ids())


def drop_heldout(examples: Sequence[Example]) -> tuple[list[Example], int]:
    heldout = heldout_task_ids()
    kept = [e for e in examples if e.task_id not in heldout]
    return kept, len(examples) - len(kept)


def turn_examples(rows: Iterable[dict[str, Any]], origin: str) -> list[Example]:
    """Policy examples from env per-turn records whose verdict is ok."""
    from kernelgym.agents.policy import SYSTEM_PROMPT

    out = []
    for row in rows:
        if row.get("verdict") != "ok" or not row.get("action"):
            continue
        user = str(row.get("prompt", ""))
        if row.get("feedback_before"):
            user += f"\n\nFeedback from the judge:\n{row['feedback_before']}"
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
        speedup = ((row.get("result") or {}).get("timing") or {}).get("speedup")
        out.append(Example("policy", messages, str(row["action"]), str(row.get("task_id", "")),
                           _category(row.get("task_id")), origin, {"speedup": speedup}))
    return out


def jsonl_examples(path: str | Path) -> list[Example]:
    """Role-formatted rows or env turns from a JSONL file."""
    rows = _read_jsonl(path)
    formatted = [r for r in rows if "role" in r and "completion" in r]
    out = turn_examples([r for r in rows if "action" in r], f"external:{path}")
    for row in formatted:
        if row["role"] not in ("selection", "policy", "summary"):
            raise ConfigError(f"{path}: unknown role {row['role']!r}")
        messages = row.get("messages") or [{"role": "user", "content": str(row.get("prompt", ""))}]
        task_id = str(row.get("task_id", ""))
        out.append(Example(row["role"], messages, str(row["completion"]), task_id,
                           str(row.get("category") or _category(task_id)), f"external:{path}"))
    return out


def _read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    rows = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{number}: bad JSON ({exc.msg})") from None
    return rows


def _category(task_id: Any) -> str:
    from kernelgym.errors import KernelGymError
    from kernelgym.tasks import resolve_task

    try:
        return resolve_task(str(task_id)).category
    except KernelGymError:
        return "unknown"


# near-duplicate detection --------------------------------------------------------------------------------

def normalized_code(source: str) -> str:
    """Python with docstrings dropped and names renamed in order of appearance; string constants (the
    C++/CUDA kernel text) with comments and whitespace collapsed. Unparsable code: whitespace-collapsed."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return _squash(source)
    names: dict[str, str] = {}

    def rename(name: str) -> str:
        return names.setdefault(name, f"v{len(names)}")

    # Source order (not ast.walk's breadth-first order), so an added line does not renumber everything.
    for node in sorted(ast.walk(tree), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
        body = getattr(node, "body", None)
        first = body[0] if isinstance(body, list) and body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                isinstance(first.value.value, str):
            first.value.value = ""  # a docstring
        if isinstance(node, ast.Name):
            node.id = rename(node.id)
        elif isinstance(node, ast.arg):
            node.arg = rename(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            node.name = rename(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = _squash(node.value)
    return ast.dump(tree, annotate_fields=False)


def _squash(text: str) -> str:
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.DOTALL)  # C/C++ comments
    return re.sub(r"\s+", " ", text).strip()


def ast_hash(source: str) -> str:
    return hashlib.sha256(normalized_code(source).encode()).hexdigest()


def minhash(source: str, permutations: int = 64, shingle: int = 5) -> tuple[int, ...]:
    """MinHash signature of the normalised code's token 5-gram shingles (one salted hash per permutation)."""
    tokens = re.findall(r"\w+|[^\w\s]", normalized_code(source))
    grams = {" ".join(tokens[i:i + shingle]) for i in range(max(1, len(tokens) - shingle + 1))}
    signature = []
    for salt in range(permutations):
        key = salt.to_bytes(8, "little")
        digests = (hashlib.blake2b(g.encode(), digest_size=8, key=key).digest() for g in grams)
        signature.append(min(int.from_bytes(d, "little") for d in digests))
    return tuple(signature)


def similarity(a: Sequence[int], b: Sequence[int]) -> float:
    """Estimated Jaccard similarity of two MinHash signatures."""
    return sum(x == y for x, y in zip(a, b)) / len(a)


# filtering -----------------------------------------------------------------------------------------------

@dataclass
class FilterReport:
    kept: int = 0
    duplicates: int = 0
    near_duplicates: int = 0
    over_task_cap: int = 0
    over_category: int = 0
    too_long: int = 0  # longer than SFTConfig.max_length (dropped whole, never truncated)

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def filter_examples(examples: Sequence[Example], config: SFTDataConfig) -> tuple[list[Example], FilterReport]:
    report = FilterReport()
    policy = [e for e in examples if e.role == "policy" and e.code()]
    others = _unique(e for e in examples if e.role != "policy")
    kept = _dedup(policy, config, report)
    kept = _cap_per_task(kept, config.per_task_cap, report)
    kept = _balance(kept, config.category_ratio, config.seed, report)
    # Selection and summary examples follow the policy examples of their task.
    tasks = {e.task_id for e in kept}
    result = kept + [e for e in others if e.task_id in tasks or not e.task_id]
    report.kept = len(result)
    return result, report


def _unique(examples: Iterable[Example]) -> list[Example]:
    seen, out = set(), []
    for e in examples:
        key = (e.role, json.dumps(e.messages), e.completion)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def _dedup(examples: list[Example], config: SFTDataConfig, report: FilterReport) -> list[Example]:
    if config.dedup not in ("ast", "minhash", "none"):
        raise ConfigError(f"dedup must be 'ast', 'minhash' or 'none', not {config.dedup!r}")
    if config.dedup == "none":
        return list(examples)
    seen: set[str] = set()
    signatures: list[tuple[int, ...]] = []
    out = []
    for e in examples:
        code = e.code() or ""
        digest = ast_hash(code)
        if digest in seen:
            report.duplicates += 1
            continue
        if config.dedup == "minhash":
            sig = minhash(code)
            if any(similarity(sig, other) >= config.minhash_threshold for other in signatures):
                report.near_duplicates += 1
                continue
            signatures.append(sig)
        seen.add(digest)
        out.append(e)
    return out


def _cap_per_task(examples: list[Example], cap: int, report: FilterReport) -> list[Example]:
    counts: dict[str, int] = defaultdict(int)
    out = []
    for e in examples:
        counts[e.task_id] += 1
        if counts[e.task_id] > cap:
            report.over_task_cap += 1
            continue
        out.append(e)
    return out


def _balance(examples: list[Example], ratio: float, seed: int, report: FilterReport) -> list[Example]:
    by_category: dict[str, list[Example]] = defaultdict(list)
    for e in examples:
        by_category[e.category].append(e)
    if len(by_category) < 2:
        return examples
    limit = max(1, int(ratio * min(len(v) for v in by_category.values())))
    rng = random.Random(seed)
    dropped: set[int] = set()
    for items in by_category.values():
        if len(items) > limit:
            for e in rng.sample(items, len(items) - limit):
                dropped.add(id(e))
    report.over_category += len(dropped)
    return [e for e in examples if id(e) not in dropped]


def to_dataset(examples: Sequence[Example]):
    from datasets import Dataset

    return Dataset.from_list([e.to_row() for e in examples])


def write_examples(examples: Sequence[Example], path: str | Path) -> None:
    rows = [json.dumps({"role": e.role, "messages": e.messages, "completion": e.completion,
                        "task_id": e.task_id, "category": e.category, "origin": e.origin}) + "\n"
            for e in examples]
    Path(path).write_text("".join(rows), encoding="utf-8")
