"""Spare evaluation processes: started before their job, they judge exactly as freshly forked ones do."""

import glob
import os

import pytest

from kernelgym.evaluation.result import Verdict
from kernelgym.solutions import examples
from kernelgym.tasks import bundled
from kernelgym.workers.pool import EvalPool

MUTATES_INPUT = '''
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu_inplace(float* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) x[i] = x[i] > 0.f ? x[i] : 0.f;
}
""")

class ModelNew(nn.Module):
    def forward(self, x):
        lib.relu_inplace(x, x.numel())
        return x.view(x.shape)
'''


@pytest.fixture(scope="module")
def spare_pool(tmp_path_factory):
    root = tmp_path_factory.mktemp("spares")
    with EvalPool(workers=1, gpu=False, spare_processes=True, work_root=str(root)) as pool:
        yield pool, str(root)


def test_spares_judge_honest_code_and_cheats_like_fresh_processes(spare_pool):
    pool, _ = spare_pool
    example = examples("cpp")[0]
    honest = pool.evaluate(bundled().get(example.task_id), example.path.read_text(), backend="cpp")
    assert honest.verdict is Verdict.OK, honest.reasons
    # the candidate was moved into its cgroup before its code ran: no fallback was needed
    assert not any("cgroup" in w for w in honest.static.warnings), honest.static.warnings
    assert honest.timing.cpu_past_clock_ms is not None
    cheat = pool.evaluate(bundled().get("L1/1_ReLU"), MUTATES_INPUT, backend="cpp")
    assert cheat.verdict is Verdict.HACK, cheat.reasons


def test_a_spare_pair_waits_for_the_next_job_and_is_used_once(spare_pool):
    pool, root = spare_pool
    task = bundled().get("L1/1_ReLU")
    source = examples("cpp")[0].path.read_text()
    pool.evaluate(task, source, backend="cpp")
    waiting = glob.glob(os.path.join(root, "*", "spare-*"))
    assert len(waiting) == 1  # the next pair, forked once the last reference was ready
    pool.evaluate(task, source, backend="cpp")
    after = glob.glob(os.path.join(root, "*", "spare-*"))
    assert len(after) == 1 and after != waiting  # taken (and its folder removed), another waits
