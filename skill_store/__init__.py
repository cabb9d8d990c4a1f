"""The skill store: a library of reusable kernel-optimization techniques, and the gate that grows it.

    from kernelgym.skill_store import open_store, Retriever
    store = open_store()                      # $KERNELGYM_SKILLS_DB or ~/.cache/kernelgym/skills.sqlite
    hits = Retriever.from_store(store).search(task, backend="cpp", k=5)

Importing this package loads only the standard library; BM25 loads on the first search, the judge only
when the gate runs.
"""

from __future__ import annotations

from kernelgym._lazy import lazy_getattr
from kernelgym.skill_store.skill import (
    AppliesWhen,
    Evidence,
    Provenance,
    Skill,
    SkillFormatError,
    SkillNotFoundError,
    Solution,
    Verification,
)
from kernelgym.skill_store.store import (
    ImportReport,
    SkillExistsError,
    SkillStore,
    StoreConfig,
    StoreError,
    default_db_path,
    open_store,
    seed_skills,
)

_LAZY = {
    "Retriever": "kernelgym.skill_store.retrieval",
    "RetrievalConfig": "kernelgym.skill_store.retrieval",
    "Hit": "kernelgym.skill_store.retrieval",
    "rerank": "kernelgym.skill_store.rerank",
    "RerankConfig": "kernelgym.skill_store.rerank",
    "Gate": "kernelgym.skill_store.gate",
    "GateConfig": "kernelgym.skill_store.gate",
    "GateDecision": "kernelgym.skill_store.gate",
    "Candidate": "kernelgym.skill_store.gate",
    "query_for_task": "kernelgym.skill_store.query",
}


__getattr__ = lazy_getattr("kernelgym.skill_store", _LAZY)


__all__ = [
    "AppliesWhen",
    "Candidate",
    "Evidence",
    "Gate",
    "GateConfig",
    "GateDecision",
    "Hit",
    "ImportReport",
    "Provenance",
    "RerankConfig",
    "RetrievalConfig",
    "Retriever",
    "Skill",
    "SkillExistsError",
    "SkillFormatError",
    "SkillNotFoundError",
    "SkillStore",
    "Solution",
    "StoreConfig",
    "StoreError",
    "Verification",
    "default_db_path",
    "open_store",
    "query_for_task",
    "rerank",
    "seed_skills",
]
