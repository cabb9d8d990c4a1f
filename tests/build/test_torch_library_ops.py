"""A solution whose kernel is a PyTorch operator of its own (TORCH_LIBRARY, `load_inline(...,
is_python_module=False)`, called through torch.ops) is judged like any extension: torch loads such a
library as a plain library, so the judge does too (a helper's honest answer was runtime_error, "no
PyInit"), and the operator's calls are the solution's own work, in the samples and in the in-process
profile alike. A passthrough inside such an operator is still PyTorch's compute."""

from __future__ import annotations

import errno
import time

from kernelgym.evaluation import ip_sampler
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.pipeline import Pipeline
from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import bundled
from kernelgym.workers.pool import make_job
from kernelgym.workers.sandbox import SandboxConfig

OPERATOR = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
// fresh {fresh}
torch::Tensor clamp_below(const torch::Tensor& x) {{
    auto in = x.contiguous();
    auto out = torch::empty_like(in);
    const float* src = in.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    {body}
    return out;
}}
TORCH_LIBRARY(kg_test_ops_{fresh}, m) {{ m.def("relu(Tensor x) -> Tensor"); }}
TORCH_LIBRARY_IMPL(kg_test_ops_{fresh}, CPU, m) {{ m.impl("relu", &clamp_below); }}
"""
load_inline(name="kg_test_ops_{fresh}", cpp_sources=SOURCE, is_python_module=False, extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ops.kg_test_ops_{fresh}.relu(x)
'''
OWN_LOOP = "for (int64_t i = 0; i < in.numel(); ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;"
PASSTHROUGH = "out = at::relu(in); (void)src; (void)dst;"


def _solution(body: str) -> str:
    return OPERATOR.format(fresh=time.time_ns(), body=body)


def test_an_operator_of_the_solution_s_own_is_judged_ok(pool):
    result = pool.evaluate(bundled().get("L1/1_ReLU"), _solution(OWN_LOOP), backend="cpp", size="cpu")
    assert result.verdict is Verdict.OK, (result.reasons, result.output_tail[-800:])


def test_a_passthrough_inside_an_own_operator_is_still_pytorch_s_work(pool):
    result = pool.evaluate(bundled().get("L1/1_ReLU"), _solution(PASSTHROUGH), backend="cpp", size="cpu")
    assert result.verdict is Verdict.HACK, (result.reasons, result.profile)


def _judged_without_perf_events(tmp_path, monkeypatch, body: str):
    def refused(*args, **kwargs):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(ip_sampler, "_open_event", refused)
    options = EvalOptions(timing_budget_s=0.3, timing_trials=6, confirm_verified=False)
    job = make_job(bundled().get("L1/1_ReLU"), _solution(body), "cpp", "cpu", options, False)
    return Pipeline(str(tmp_path), SandboxConfig(), has_gpu=False).run(job)


def test_without_perf_events_the_in_process_profile_credits_the_operator(tmp_path, monkeypatch):
    result = _judged_without_perf_events(tmp_path, monkeypatch, OWN_LOOP)
    assert result.verdict is Verdict.OK, result.reasons
    assert result.profile.own_kernel_calls > 0 and result.profile.coverage > 0.5, result.profile


def test_without_perf_events_a_passthrough_inside_an_own_operator_is_still_seen(tmp_path, monkeypatch):
    """A red team's operator whose body is at::relu was `ok` on the fallback: the profile's dispatch mode is
    off while it handles an op, so the ATen op inside went unseen and the whole time was credited as own."""
    result = _judged_without_perf_events(tmp_path, monkeypatch, PASSTHROUGH)
    assert result.verdict is Verdict.HACK, (result.reasons, result.profile)
