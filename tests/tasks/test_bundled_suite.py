"""The bundled suite: counts, metadata, two sizes, and every reference healthy at the cpu size."""

import pytest

from kernelgym.solutions import examples
from kernelgym.tasks import bundled
from kernelgym.tasks.screen import screen_task

SUITE = bundled()
CATEGORIES = {
    1: {"matmul", "activation", "norm", "pooling", "reduction", "scan", "loss", "convolution", "attention"},
    2: {"gemm_chain", "conv_chain"},
    3: {"mlp", "cnn", "attention", "rnn", "architecture"},
}


def test_suite_counts():
    counts = {level: len(SUITE.filter(level=level)) for level in (1, 2, 3)}
    assert counts[1] >= 40 and counts[2] >= 40 and counts[3] >= 15, counts


def test_level_one_covers_the_operator_families():
    assert {t.category for t in SUITE.filter(level=1)} == CATEGORIES[1]


@pytest.mark.parametrize("task", list(SUITE), ids=lambda t: t.id)
def test_metadata_and_sizes(task):
    assert task.category in CATEGORIES[task.level]
    assert task.has_size("cpu") and task.has_size("gpu")
    assert task.source_at("gpu") == task.source  # loadable by KernelBench's tooling as is
    assert task.perturb in ("signed", "positive", "none")


@pytest.mark.parametrize("task", list(SUITE), ids=lambda t: t.id)
def test_reference_passes_the_degenerate_screen_at_cpu_size(task):
    result = screen_task(task, "cpu")
    assert result.passed, (result.flags, result.error)


def test_example_solutions_cover_each_backend():
    cpp, triton, cuda = examples("cpp"), examples("triton"), examples("cuda")
    assert len(cpp) >= 20 and {e.task_id.split("/")[1] for e in cpp} == {"L1", "L2", "L3"}
    assert len(triton) >= 10 and len(cuda) >= 10
    ids = SUITE.ids()
    assert all(e.task_id in ids for e in cpp + triton + cuda), "every example solves a bundled task"
