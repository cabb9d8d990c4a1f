"""What the candidate's process reports about its own failures."""

import pytest

from kernelgym.workers.child import error_meta

# Seen on the H200 host: the allocator's out-of-memory report needs NVML, which cannot start in the
# candidate's namespaces there, so its assert is what a 1 TiB allocation raises.
NVML_ASSERT = ('NVML_SUCCESS == DriverAPI::get()->nvmlInit_v2_() INTERNAL ASSERT FAILED at '
               '"/pytorch/c10/cuda/CUDACachingAllocator.cpp":1135, please report a bug to PyTorch.')


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("CUDA out of memory. Tried to allocate 1024.00 GiB", "oom"),
        (NVML_ASSERT, "oom"),
        ("nvmlInit failed in the candidate's own code", "runtime"),
        ("CUDA error: an illegal memory access was encountered", "cuda"),
        ("shape mismatch", "runtime"),
    ],
)
def test_failures_are_classified_by_what_raised_them(message, kind):
    assert error_meta("forward", RuntimeError(message)).error_kind == kind


def test_a_replays_candidate_gets_new_memory_filled_with_garbage():
    """A replay's fresh processes must not hide a read of an output never written: with fill_new_memory the
    candidate's new blocks hold 0x7f bytes (3.4e38 as float32), not a fresh page's zeros."""
    import subprocess
    import sys

    probe = ("import torch\nfrom kernelgym.workers.candidate_side import _fill_new_memory\n"
             "{fill}y = torch.empty(1 << 20)\nprint(float(y.abs().min()), float(y.abs().max()))")
    runs = {fill: subprocess.run([sys.executable, "-c", probe.format(fill="_fill_new_memory()\n" * fill)],
                                 capture_output=True, text=True, check=True).stdout.split()
            for fill in (False, True)}
    assert [float(v) for v in runs[True]] == [pytest.approx(3.3961e38, rel=1e-4)] * 2
    assert float(runs[False][0]) != pytest.approx(3.3961e38, rel=1e-4)


def test_a_replay_draws_its_seeds_first_and_fills_new_memory(tmp_path):
    from kernelgym.evaluation.machine import Machine, ReplayedSeeds
    from kernelgym.evaluation.options import EvalOptions
    from kernelgym.evaluation.result import EvalResult, Verdict
    from kernelgym.evaluation.state import Evaluation
    from kernelgym.tasks import bundled
    from kernelgym.workers.pool import make_job
    from kernelgym.workers.sandbox import SandboxConfig

    task = bundled().get("L1/1_ReLU")
    job = make_job(task, "class ModelNew: pass", "cpp", "cpu", EvalOptions(), gpu=False)
    machine = Machine(str(tmp_path), SandboxConfig(), has_gpu=False)
    result = EvalResult(task_id=job.task_id, backend="cpp", size="cpu", verdict=Verdict.OK)
    replay = Evaluation(machine, job, result, str(tmp_path), seeds=ReplayedSeeds([11, 22]))
    assert replay.child_job.init_seed == 11 and replay.seeds(1) == [22]
    assert replay.child_job.fill_new_memory
    assert not Evaluation(machine, job, result, str(tmp_path)).child_job.fill_new_memory
