"""BM25 retrieval of skills for a task, filtered by backend, with an optional LLM rerank on top.

Each skill is one document: its title and applies_when count twice (they are written to be matched), the
technique and code pattern once. One BM25 index is built per backend, so term statistics reflect the
skills that can actually be returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kernelgym.skill_store.query import QueryConfig, TaskQuery, query_for_task, query_for_text
from kernelgym.skill_store.skill import Skill
from kernelgym.skill_store.tokens import tokenize


@dataclass
class RetrievalConfig:
    k: int = 5
    statuses: tuple[str, ...] = ("admitted",)  # candidates and rejected skills are never served
    field_weights: dict[str, int] = field(
        default_factory=lambda: {"title": 2, "applies_when": 2, "technique": 1, "code_pattern": 1}
    )
    k1: float = 1.2
    b: float = 0.75
    # Score share kept by a skill whose bound type is the opposite of the task's guess ("any": never touched).
    # Off by default: on the bundled labels it moved recall@5 by 0.001 and cost 0.02 MRR, since the bound
    # words are already indexed and queried as terms ("compute bound").
    bound_mismatch: float = 1.0
    query: QueryConfig = field(default_factory=QueryConfig)


@dataclass
class Hit:
    skill: Skill
    score: float

    @property
    def id(self) -> str:
        return self.skill.id


def skill_tokens(skill: Skill, weights: dict[str, int]) -> list[str]:
    tokens: list[str] = []
    for name, text in skill.text_fields().items():
        tokens.extend(tokenize(text) * weights.get(name, 1))
    return tokens


class Retriever:
    """Ranks a fixed set of skills against task queries (build once, search many times)."""

    def __init__(self, skills: Iterable[Skill], config: RetrievalConfig | None = None):
        self.config = config or RetrievalConfig()
        self.skills = [s for s in skills if s.status in self.config.statuses]
        self._indexes: dict[str | None, tuple[list[Skill], Any]] = {}

    @classmethod
    def from_store(cls, store, config: RetrievalConfig | None = None) -> Retriever:
        config = config or RetrievalConfig()
        return cls(store.list(status=config.statuses), config)

    def _index(self, backend: str | None):
        if backend not in self._indexes:
            docs = [s for s in self.skills if backend is None or backend in s.applies_when.backends]
            corpus = [skill_tokens(s, self.config.field_weights) for s in docs]
            bm25 = _bm25(corpus, self.config.k1, self.config.b) if docs else None
            self._indexes[backend] = (docs, bm25)
        return self._indexes[backend]

    def query_tokens(self, query) -> list[str]:
        return as_query(query).tokens(self.config.query)

    def search(
        self, query, backend: str | None = None, k: int | None = None, policy=None, rerank_config=None
    ) -> list[Hit]:
        """The best k skills for a Task, a TaskQuery, free text or a token list.

        With `policy` (anything with `act(observation, info) -> str`), the BM25 candidates are reranked by it;
        an unusable reply falls back to the BM25 order.
        """
        k = self.config.k if k is None else k
        docs, bm25 = self._index(backend)
        tokens = query if isinstance(query, list) else self.query_tokens(query)
        if bm25 is None or not tokens:
            return []
        bound = "any" if isinstance(query, list) else as_query(query).bound
        scores = [
            score * self._bound_factor(skill, bound) for skill, score in zip(docs, bm25.get_scores(tokens))
        ]
        ranked = sorted(zip(docs, scores), key=lambda pair: (-pair[1], pair[0].id))
        hits = [Hit(skill, float(score)) for skill, score in ranked if score > 0]
        if policy is None:
            return hits[:k]
        from kernelgym.skill_store.rerank import RerankConfig, rerank

        config = rerank_config or RerankConfig()
        result = rerank(
            as_query(query).text() if not isinstance(query, list) else " ".join(query),
            hits[: max(config.candidates, k)],
            policy,
            k=k,
            config=config,
        )
        return result.hits

    def _bound_factor(self, skill: Skill, bound: str) -> float:
        theirs = skill.applies_when.bound
        if bound == "any" or theirs == "any" or theirs == bound:
            return 1.0
        return self.config.bound_mismatch


def _bm25(corpus: list[list[str]], k1: float, b: float):
    """rank_bm25's Okapi BM25 with a never-negative IDF, log(1 + (N - n + 0.5) / (n + 0.5)).

    Okapi's own IDF goes negative for a term in more than half the documents, and with a small library (a
    store with a handful of admitted skills) every matching term does, so nothing would ever be returned.
    """
    import math

    from rank_bm25 import BM25Okapi  # imported here: `import kernelgym.skill_store` stays light

    class PositiveIdfBM25(BM25Okapi):
        def _calc_idf(self, nd):
            for word, freq in nd.items():
                self.idf[word] = math.log(1.0 + (self.corpus_size - freq + 0.5) / (freq + 0.5))
            self.average_idf = sum(self.idf.values()) / max(len(self.idf), 1)

    return PositiveIdfBM25(corpus, k1=k1, b=b)


def as_query(query) -> TaskQuery:
    if isinstance(query, TaskQuery):
        return query
    if isinstance(query, str):
        return query_for_text(query)
    if hasattr(query, "source"):
        return query_for_task(query)
    raise TypeError(f"cannot build a skill query from {type(query).__name__}")
