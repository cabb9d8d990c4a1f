"""Tokenizer, task queries, BM25 retrieval and its quality on the labelled bundled set."""

import pytest

from kernelgym.skill_store import SkillStore, seed_skills
from kernelgym.skill_store.labels import evaluate_retrieval, load_labels
from kernelgym.skill_store.query import query_for_source, query_for_task
from kernelgym.skill_store.retrieval import Retriever
from kernelgym.skill_store.tokens import tokenize
from kernelgym.tasks import bundled

# Measured with `python benchmarks/agents/skill_retrieval.py` (BM25 alone): recall@5 0.877, MRR 0.932 over 189
# rows.
MEASURED_RECALL, MEASURED_MRR, MARGIN = 0.877, 0.932, 0.02


@pytest.fixture(scope="module")
def retriever(tmp_path_factory):
    return Retriever.from_store(SkillStore(tmp_path_factory.mktemp("db") / "s.sqlite"))


def test_tokenizer_splits_identifiers():
    assert tokenize("snake_case_name") == ["snake", "case", "name"]
    assert {"batchnorm2d", "batchnorm", "batch", "norm", "2d"} <= set(tokenize("nn.BatchNorm2d"))
    assert {"shfl", "down", "sync"} <= set(tokenize("__shfl_down_sync"))
    assert {"tl", "dot"} <= set(tokenize("tl.dot(a, b)"))
    assert "re" not in tokenize("ReLU") and "relu" in tokenize("ReLU")  # no acronym fragments
    assert {"conv", "transpose"} <= set(tokenize("F.conv_transpose2d"))


def test_tokenizer_normalizes_domain_words():
    assert (
        "matmul" in tokenize("GEMM")
        and "matmul" in tokenize("nn.Linear")
        and "matmul" in tokenize("torch.bmm")
    )
    assert "elementwise" in tokenize("F.gelu") and "elementwise" in tokenize("torch.sigmoid")
    assert "conv" in tokenize("convolution") and "norm" in tokenize("LayerNorm")
    assert tokenize("loads kernels matrices") == ["load", "kernel", "matrix"]
    assert tokenize("self return torch import") == []  # boilerplate is not evidence


def test_query_reads_ops_and_guesses_the_bound():
    task = bundled().get("L2/1_Gemm_BiasAdd_ReLU")
    query = query_for_task(task)
    assert {"Linear", "relu"} <= set(query.ops) and query.bound == "compute"
    assert "Gemm BiasAdd ReLU" in query.name and "in_features" in query.constants
    relu = query_for_task(bundled().get("L1/1_ReLU"))
    assert relu.bound == "memory" and relu.ops == ["relu"]
    src = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
    assert query_for_source(src).ops == ["matmul"] and query_for_source(src).bound == "compute"
    assert query_for_source("def broken(:").bound == "any"


def test_backend_filter_and_statuses(retriever, tmp_path, make_skill):
    for backend in ("cuda", "triton", "cpp"):
        hits = retriever.search("matrix multiply with tiles", backend=backend, k=10)
        assert hits and all(backend in h.skill.applies_when.backends for h in hits)
    store = SkillStore(tmp_path / "s.sqlite", seed=False)
    store.put(make_skill("ok-skill", status="admitted", title="warp shuffle reduce"))
    store.put(make_skill("candidate-skill", status="candidate", title="warp shuffle reduce"))
    store.put(make_skill("rejected-skill", status="rejected", title="warp shuffle reduce"))
    assert [h.id for h in Retriever.from_store(store).search("warp shuffle", k=5)] == ["ok-skill"]


def test_obvious_queries_find_their_skill(retriever):
    cases = {
        ("online softmax with a running max", "triton"): "online-softmax",
        ("welford variance for layernorm", "cuda"): "welford-norm-statistics",
        ("openmp simd loop for an elementwise relu", "cpp"): "cpp-openmp-simd-elementwise",
        ("tensor cores wmma fragments", "cuda"): "cuda-wmma-tensor-cores",
        ("cumsum prefix scan", "cpp"): "parallel-prefix-scan",
    }
    for (text, backend), wanted in cases.items():
        assert retriever.search(text, backend=backend, k=3)[0].id == wanted, text


def test_labelled_set_is_well_formed():
    labels = load_labels()
    ids = {s.id: s for s in seed_skills()}
    tasks = bundled()
    assert len(labels) >= 40
    assert len({(lb.task_id, lb.backend) for lb in labels}) == len(labels)
    for label in labels:
        tasks.get(label.task_id)
        assert label.relevant and all(
            r in ids and label.backend in ids[r].applies_when.backends for r in label.relevant
        ), label


def test_bm25_recall_and_mrr_on_the_labelled_set(retriever):
    metrics = evaluate_retrieval(retriever, load_labels(), bundled(), k=5)
    assert metrics.n >= 40
    assert metrics.recall_at_k >= 0.8
    assert metrics.recall_at_k >= MEASURED_RECALL - MARGIN, metrics.recall_at_k
    assert metrics.mrr >= MEASURED_MRR - MARGIN, metrics.mrr
