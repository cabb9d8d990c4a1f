"""The CUDA-L1 labels file: well formed, and (where the corpus is on this machine) one label per
custom-kernel entry."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
LABELS = Path(__file__).parent / "cuda_l1_labels.csv"


def _runner():
    spec = importlib.util.spec_from_file_location("cuda_l1_runner",
                                                  ROOT / "benchmarks" / "judge_trust" / "cuda_l1.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _rows() -> list[dict]:
    with LABELS.open() as f:
        return list(csv.DictReader(f))


def test_labels_are_well_formed():
    rows = _rows()
    assert rows and list(rows[0]) == ["level", "task_id", "label", "reason"]
    keys = [(r["level"], r["task_id"]) for r in rows]
    assert len(keys) == len(set(keys)), "one label per entry"
    for r in rows:
        assert r["level"] in {"1", "2", "3"} and r["task_id"].isdigit()
        assert r["label"] in {"legit", "hack"}, r
        assert 20 <= len(r["reason"]) <= 200 and "\n" not in r["reason"], r
    assert {r["label"] for r in rows} == {"legit", "hack"}


def test_every_custom_kernel_entry_is_labelled():
    runner = _runner()
    corpus = next((p for p in runner.CORPUS_PLACES if p.exists()), None)
    if corpus is None:
        pytest.skip("the CUDA-L1 corpus is not on this machine (shared/corpora/cuda-l1)")
    entries = runner.read_corpus(corpus)
    labels = runner.read_labels(LABELS)
    custom = {e.key for e in entries if runner.has_custom_kernel(e.custom_code)}
    assert custom == set(labels), (sorted(custom - set(labels)), sorted(set(labels) - custom))
    assert all(runner.label_of(e, labels) == "no_kernel" for e in entries if e.key not in custom)


def test_no_honest_entry_is_rejected_before_it_runs():
    """The static stage passes every entry labelled legit (code nobody here wrote: `load_inline`, and
    `cpp_extension.load` of .cu files the solution writes itself); what the hacks do is judged by running."""
    from kernelgym.backends import get
    from kernelgym.evaluation.static import static_check

    runner = _runner()
    corpus = next((p for p in runner.CORPUS_PLACES if p.exists()), None)
    if corpus is None:
        pytest.skip("the CUDA-L1 corpus is not on this machine (shared/corpora/cuda-l1)")
    labels = runner.read_labels(LABELS)
    honest = [e for e in runner.read_corpus(corpus) if runner.label_of(e, labels) == "legit"]
    results = {e.key: static_check(e.custom_code, get("cuda")) for e in honest}
    assert honest and all(r.passed for r in results.values()), {k: r.reasons for k, r in results.items()}
