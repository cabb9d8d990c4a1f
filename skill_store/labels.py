"""The labelled retrieval set and its metrics (recall@k, MRR).

Each row says which seed skills a kernel engineer would reach for on one bundled task with one backend:
{"task_id": ..., "backend": ..., "relevant": [...], "note": ...}. The labels were written from the tasks'
sources and the skills' meaning, and were not adjusted to what BM25 returns.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kernelgym.skill_store.skill import SkillFormatError


@dataclass
class Label:
    task_id: str
    backend: str
    relevant: list[str]
    note: str = ""


@dataclass
class QueryScore:
    task_id: str
    backend: str
    relevant: list[str]
    retrieved: list[str]
    recall: float
    reciprocal_rank: float


@dataclass
class RetrievalMetrics:
    k: int
    recall_at_k: float
    mrr: float
    queries: list[QueryScore] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.queries)


def default_labels_path() -> Path:
    return Path(str(resources.files("kernelgym.skill_store") / "bundled_labels.jsonl"))


def load_labels(path: str | os.PathLike | None = None) -> list[Label]:
    file = Path(path) if path else default_labels_path()
    labels = []
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            labels.append(Label(**json.loads(line)))
        except (json.JSONDecodeError, TypeError) as exc:
            raise SkillFormatError(f"{file}:{number}: bad label row ({exc})") from None
    return labels


def evaluate_retrieval(retriever, labels: list[Label], tasks, k: int = 5, policy=None) -> RetrievalMetrics:
    """Mean recall@k (share of a row's relevant skills in its top k) and MRR (1 / rank of the first relevant).

    `tasks` maps task ids to Tasks (a TaskSet works: anything with `.get(id)`). MRR looks at the whole
    ranking, not only the top k, so a relevant skill at rank 8 still counts 1/8.
    """
    scores = []
    for label in labels:
        task = tasks.get(label.task_id)
        full = [h.id for h in retriever.search(task, backend=label.backend, k=10**6)]
        top = (
            [h.id for h in retriever.search(task, backend=label.backend, k=k, policy=policy)]
            if policy
            else full[:k]
        )
        relevant = set(label.relevant)
        recall = len(relevant & set(top)) / len(relevant) if relevant else 0.0
        ranking = top + [i for i in full if i not in top] if policy else full
        rank = next((i for i, sid in enumerate(ranking, 1) if sid in relevant), None)
        scores.append(
            QueryScore(label.task_id, label.backend, label.relevant, top, recall, 1.0 / rank if rank else 0.0)
        )
    n = max(len(scores), 1)
    return RetrievalMetrics(
        k, sum(s.recall for s in scores) / n, sum(s.reciprocal_rank for s in scores) / n, scores
    )
