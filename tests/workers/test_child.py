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
