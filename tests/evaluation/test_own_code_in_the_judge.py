"""The own-code evidence inside the real pipeline (issue 28): sampled outside the candidate on every batch,
with a cgroup around the candidate, and the fallback, said in the notes, where the host refuses perf events.

The pipeline runs in this process here (as in a worker) so that the host's refusal can be simulated; the
candidate and the reference are the real forked, sandboxed processes."""

from __future__ import annotations

import errno
import time

from kernelgym.evaluation import ip_sampler, own_code
from kernelgym.evaluation.options import EvalOptions
from kernelgym.evaluation.pipeline import Pipeline
from kernelgym.evaluation.result import Verdict
from kernelgym.solutions import examples
from kernelgym.tasks import bundled
from kernelgym.workers.pool import make_job
from kernelgym.workers.sandbox import SandboxConfig

TASK = "L1/1_ReLU"


def _honest() -> str:
    source = next(e for e in examples("cpp") if e.task_id.endswith(TASK)).source
    return source.replace('r"""', f'r"""\n// fresh {time.time_ns()}\n', 1)  # new in any build cache


def _judge(tmp_path, source: str, options: EvalOptions | None = None):
    options = options or EvalOptions(timing_budget_s=0.3, timing_trials=6, confirm_verified=False)
    job = make_job(bundled().get(TASK), source, "cpp", "cpu", options, False)
    return Pipeline(str(tmp_path), SandboxConfig(), has_gpu=False).run(job)


def test_an_honest_kernel_is_ok_on_its_samples_and_its_cgroup(tmp_path):
    result = _judge(tmp_path, _honest())
    assert result.verdict is Verdict.OK, result.reasons
    profile = result.profile
    assert profile.samples > 0 and profile.sampled_shares["own"] > 0.2, profile
    assert profile.sampled_shares["torch"] < 0.1, profile
    assert result.timing.cpu_time_ratio is not None
    if not result.static.warnings:  # a cgroup was made (root with cgroups, as on CI): no fallback said
        assert result.timing.cpu_time_ratio <= 1.05


def test_a_fast_kernel_is_timed_until_its_samples_decide(tmp_path):
    """ReLU at the CPU size is precise after five batches of ~10 ms, whose samples were too few (24, a third
    in glue): the candidate's own profile then decided, and under CI's load judged honest kernels `hack`.
    The timing now goes on until the samples decide, within its batches (30 by default: in CI they once
    left 49 samples, too few, and the profile decided; here the test gives it room)."""
    result = _judge(tmp_path, _honest(), EvalOptions(confirm_verified=False, timing_trials=80,
                                                     timing_budget_s=20.0))
    assert result.verdict is Verdict.OK, result.reasons
    assert not any("too few to decide" in w for w in result.static.warnings), (
        result.static.warnings, result.timing.batches, result.profile, result.stage_s)
    work = result.profile.samples * (1 - result.profile.sampled_shares["glue"])
    assert work >= own_code.MIN_SAMPLES - 1, result.profile  # shares are rounded
    # It stops once precise and decided, not at its limit; where it used them all, the speedup's interval
    # was still wider than the 3% precision (a kernel as fast as PyTorch's straddles 1.0: 1.006x, 0.93-1.07 on
    # an EPYC without AVX-512)
    timing = result.timing
    half_width = (timing.speedup_ci_high - timing.speedup_ci_low) / 2
    assert timing.batches < 80 or half_width > 0.03 * timing.speedup, timing


def test_without_perf_events_the_verdict_says_so_and_names_the_fallback(tmp_path, monkeypatch):
    def refused(*args, **kwargs):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(ip_sampler, "_open_event", refused)
    result = _judge(tmp_path, _honest())
    assert result.verdict is Verdict.OK, result.reasons
    said = " ".join(result.static.warnings)
    assert "perf_event_open refused" in said and "fallback" in said, said
    assert not result.profile.sampled_shares  # the in-process profile decided instead


def test_without_perf_events_the_fallback_still_runs_its_checks(tmp_path, monkeypatch):
    """The fallback is the in-process evidence: forgeable, but not nothing (a plain passthrough fails)."""
    def refused(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(ip_sampler, "_open_event", refused)
    source = ("import torch\nimport torch.nn as nn\nfrom kernelgym.kernels import load_cpp\n"
              f"_lib = load_cpp('extern \"C\" void touch(float* y) {{ (void)y; }} // {time.time_ns()}')\n"
              "class ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n")
    result = _judge(tmp_path, source)
    assert result.verdict is Verdict.HACK, result.reasons
