"""The timing's first batches get their input sets made before the GPU's slot is taken (issue 27): the same
judge, fewer seconds in the slot. Run in this process (as in a worker) to see its descriptors."""

from __future__ import annotations

import os

from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.pipeline import Pipeline
from kernelgym.evaluation.result import Verdict
from kernelgym.solutions import examples
from kernelgym.tasks import bundled
from kernelgym.workers.pool import make_job
from kernelgym.workers.sandbox import SandboxConfig

TASK = "L1/1_ReLU"

# Right while correctness looks (its five calls), wrong once timing starts: caught in the warm-up batch, with
# the prepared batches still unused.
WRONG_ONCE_TIMED = '''
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
""")

class ModelNew(nn.Module):
    calls = 0

    def forward(self, x):
        ModelNew.calls += 1
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        return y if ModelNew.calls <= 5 else y + 1.0
'''


def _judge(tmp_path, source: str):
    options = EvalOptions(timing_budget_s=0.3, timing_trials=6, confirm_verified=False)
    job = make_job(bundled().get(TASK), source, "cpp", "cpu", options, False)
    return Pipeline(str(tmp_path), SandboxConfig(), has_gpu=False).run(job)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_an_honest_timing_uses_the_inputs_made_ahead(tmp_path):
    source = next(e for e in examples("cpp") if e.task_id.endswith(TASK)).source
    _judge(tmp_path, source)  # imports and caches settle
    before = _open_fds()
    result = _judge(tmp_path, source)
    assert result.verdict is Verdict.OK, result.reasons
    assert result.timing.batches >= 5 and "timing_prepare" in result.stage_s
    assert _open_fds() == before  # every prepared batch's memfd was used and closed


def test_a_timing_that_ends_early_releases_the_inputs_made_ahead(tmp_path):
    _judge(tmp_path, WRONG_ONCE_TIMED)
    before = _open_fds()
    result = _judge(tmp_path, WRONG_ONCE_TIMED)
    assert result.verdict is Verdict.HACK, result.reasons
    assert result.correctness.passed
    assert _open_fds() == before
