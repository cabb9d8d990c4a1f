"""On a real GPU: the triton and cuda examples are judged ok with a speedup, every launch seen from outside
the candidate (the launch evidence, on by default) and their own kernels timed; faults end with the right
verdict. The GPU cheats are tests/adversarial/test_corpus.py's, under the same default judge."""

import pytest

from kernelgym.evaluation.feedback import render_feedback
from kernelgym.evaluation.result import Verdict
from kernelgym.solutions import examples
from kernelgym.tasks import bundled

pytestmark = pytest.mark.gpu

ILLEGAL_ACCESS = '''
import torch
import torch.nn as nn
from kernelgym.kernels import load_cuda

lib = load_cuda(r"""
#include <cstdint>
__global__ void bad(float* y, int64_t n) { float* p = (float*)0x10; p[threadIdx.x] = y[0]; }
extern "C" void relu(const float* x, float* y, int64_t n) { bad<<<1, 32>>>(y, n); }
""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        return y
'''

STREAM_CHEAT = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=m), 0.0), mask=m)

side = getattr(torch.cuda, "Str" + "eam")()

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        with getattr(torch.cuda, "str" + "eam")(side):
            relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
        return y
'''


NEVER_ENDS = '''
import torch
import torch.nn as nn
from kernelgym.kernels import load_cuda

lib = load_cuda(r"""
#include <cstdint>
// clock64() is volatile: the compiler cannot drop this loop (an empty infinite loop it may remove).
__global__ void spin(float* y, int64_t n) {
    long long start = clock64();
    while (clock64() - start >= 0) { __nanosleep(1000); }
    y[0] = 1.f;
}
extern "C" void relu(const float* x, float* y, int64_t n) { spin<<<1, 32>>>(y, n); }
""")

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())
        return y
'''

OUT_OF_MEMORY = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    tl.store(y_ptr + o, tl.maximum(tl.load(x_ptr + o, mask=m), 0.0), mask=m)

class ModelNew(nn.Module):
    def forward(self, x):
        scratch = torch.empty(1 << 40, dtype=torch.uint8, device=x.device)  # 1 TiB: more than any GPU has
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096)
        return y
'''


@pytest.fixture(scope="module")
def gpu_pool():
    import torch

    from kernelgym.workers.pool import EvalPool

    if not torch.cuda.is_available():
        pytest.fail("the gpu tests need a CUDA GPU")
    with EvalPool(workers=2) as pool:
        yield pool


@pytest.mark.parametrize("example", examples("triton") + examples("cuda"),
                         ids=lambda e: f"{e.backend}:{e.task_id}")
def test_examples_ok_on_gpu(gpu_pool, example):
    result = gpu_pool.evaluate(bundled().get(example.task_id), example.source, backend=example.backend,
                               size="gpu")
    print("\nRESULT", example.backend, example.task_id, result.verdict.value, result.speedup, result.wall_s,
          result.stage_s, result.reasons[:1])
    assert result.verdict is Verdict.OK, (result.reasons, result.output_tail[-2000:])
    assert result.speedup is not None and result.speedup > 0.5
    # the launch evidence (the default): every launch seen from outside the candidate, its own kernels timed
    launches = result.profile.launches if result.profile else {}
    assert launches.get("available"), launches
    assert "own_code_unverified" not in [r.rule for r in result.reasons], (result.reasons, launches)
    timed = launches["launches"].get("timed", {})
    assert any(name.startswith("own/") or "/graph" in name for name in timed), timed


def test_illegal_memory_access_is_a_crash_and_the_next_evaluation_is_fine(gpu_pool):
    task = bundled().get("L1/1_ReLU")
    result = gpu_pool.evaluate(task, ILLEGAL_ACCESS, backend="cuda", size="gpu", timeout_s=30)
    print(result.verdict, result.reasons)
    assert result.verdict is Verdict.CRASH
    good = examples("cuda")[0]
    assert gpu_pool.evaluate(task, good.source, backend="cuda", size="gpu").verdict is Verdict.OK


def test_kernel_that_never_ends_is_a_timeout_and_the_next_evaluation_is_fine(gpu_pool):
    task = bundled().get("L1/1_ReLU")
    result = gpu_pool.evaluate(task, NEVER_ENDS, backend="cuda", size="gpu", timeout_s=15)
    print(result.verdict, result.reasons, result.wall_s)
    assert result.verdict is Verdict.TIMEOUT
    assert result.wall_s < 90
    good = examples("cuda")[0]
    assert gpu_pool.evaluate(task, good.source, backend="cuda", size="gpu").verdict is Verdict.OK


def test_device_out_of_memory_is_a_runtime_error_and_the_next_evaluation_is_fine(gpu_pool):
    task = bundled().get("L1/1_ReLU")
    result = gpu_pool.evaluate(task, OUT_OF_MEMORY, backend="triton", size="gpu")
    print(result.verdict, result.reasons)
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert any(r.startswith("out_of_memory") for r in result.reasons), result.reasons
    good = next(e for e in examples("triton") if e.task_id.endswith("L1/1_ReLU"))
    assert gpu_pool.evaluate(task, good.source, backend="triton", size="gpu").verdict is Verdict.OK


def test_side_stream_gets_no_false_speedup(gpu_pool):
    """Whole-device synchronization: a kernel hidden on a side stream is inside the timed region."""
    task = bundled().get("L1/1_ReLU")
    result = gpu_pool.evaluate(task, STREAM_CHEAT, backend="triton", size="gpu")
    print(result.verdict, result.reasons, result.speedup)
    assert result.verdict in (Verdict.HACK, Verdict.INCORRECT) or (result.speedup or 0) < 1.5


@pytest.mark.parametrize("backend", ["cuda", "triton"])
def test_ncu_reports_counters_for_the_candidates_kernels(gpu_pool, backend):
    example = next(e for e in examples(backend) if e.task_id.endswith("L1/1_ReLU"))
    result = gpu_pool.evaluate(bundled().get(example.task_id), example.source, backend=backend, size="gpu",
                               ncu=True)
    print("\nNCU", backend, result.profile.ncu_note, result.stage_s, result.profile.kernels)
    assert result.verdict is Verdict.OK, result.reasons
    ours = [k for k in result.profile.kernels if "relu_kernel" in k.kernel]
    assert ours, result.profile.ncu_note
    assert ours[0].duration_us and ours[0].duration_us > 0
    assert ours[0].memory_throughput_pct and ours[0].memory_throughput_pct > 30  # a streaming kernel
    assert ours[0].registers_per_thread and ours[0].registers_per_thread > 0
    assert "Nsight Compute" in render_feedback(result)


def test_triton_launchers_come_from_the_workers_cache(gpu_pool):
    """Triton up to 3.6 compiles a C launcher per kernel signature: kernelgym's worker builds and caches
    it."""
    from triton.backends.nvidia import driver

    if not hasattr(driver, "make_launcher"):
        pytest.skip("this Triton launches through one generic launcher (nothing compiled per kernel)")
    example = next(e for e in examples("triton") if e.task_id.endswith("L1/1_ReLU"))
    result = gpu_pool.evaluate(bundled().get(example.task_id), example.source, backend="triton", size="gpu")
    assert result.verdict is Verdict.OK, result.reasons
    assert list((gpu_pool.cache_root / "triton_modules").glob("*/__triton_launcher*"))
