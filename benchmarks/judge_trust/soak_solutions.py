"""The solutions benchmarks/judge_trust/soak.py replays: honest ones (bundled) and ones whose failure is the
candidate's own.

Each is (name, task id, source, honest). The expected verdict of each is measured once without faults at the
start of a soak, so nothing here hard-codes what the judge says.
"""

from __future__ import annotations

from pathlib import Path

import kernelgym

SOLUTIONS = Path(kernelgym.__file__).parent / "solutions"

CPP_HEADER = """
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp
"""

CPP_FORWARD = """

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.relu(x.contiguous(), y, x.numel())
        return y
"""

# The candidate's own faults, on L1/1_ReLU: each must be charged to it, whatever the judge goes through.
CPP_CANDIDATE_FAULTS = {
    "segfault": CPP_HEADER
    + '''
lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    float* p = nullptr;
    for (int64_t i = 0; i < n; ++i) p[i * 1000003] = x[i];
}
""")'''
    + CPP_FORWARD,
    "exit_in_forward": CPP_HEADER
    + '''
lib = load_cpp(r"""
#include <cstdint>
#include <unistd.h>
extern "C" void relu(const float* x, float* y, int64_t n) { _exit(3); }
""")'''
    + CPP_FORWARD,
    "compile_error": CPP_HEADER
    + '''
lib = load_cpp(r"""extern "C" void relu(const float* x, float* y, long n) { this is not C++; }""")'''
    + CPP_FORWARD,
    "wrong_output": CPP_HEADER
    + '''
lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? 2 * x[i] : 0;
}
""")'''
    + CPP_FORWARD,
    # More than the sandbox's address-space limit: its own MemoryError, never the host's out-of-memory.
    "memory_bomb": CPP_HEADER
    + '''
lib = load_cpp(r"""
#include <cstdint>
#include <cstdlib>
#include <cstring>
extern "C" void relu(const float* x, float* y, int64_t n) {
    char* p = (char*)std::malloc((size_t)64 << 30);  // refused under the sandbox's limit: its own abort
    if (!p) std::abort();
    std::memset(p, 1, 4096);  // never the whole: without a limit this must not eat the host's memory
    std::free(p);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0;
}
""")'''
    + CPP_FORWARD,
}

CPP_HONEST = ["1_ReLU", "10_Softmax", "23_Sum_Dim", "2_Matmul_Square", "7_GELU", "26_Argmax_Dim"]

# GPU: an out-of-bounds store poisons the candidate's CUDA context; it must die with its process and be
# charged to the candidate, and the next evaluations on the same worker must be unharmed.
TRITON_POISON = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n)
    tl.store(y_ptr + offsets * 1000003 + (1 << 40), tl.maximum(x, 0.0))


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
"""

TRITON_HONEST = ["1_ReLU", "10_Softmax", "15_LayerNorm", "2_Matmul_Square"]


def solutions(backend: str) -> list[tuple[str, str, str, bool]]:
    """(name, task id, source, honest) for the backend: cpp (the CPU soak) or triton (the GPU soak)."""
    if backend == "triton":
        out = [
            (f"honest:{n}", f"L1/{n}", (SOLUTIONS / "triton" / "level1" / f"{n}.py").read_text(), True)
            for n in TRITON_HONEST
        ]
        cheat = SOLUTIONS / "cheats" / "triton" / "level1" / "1_ReLU__pytorch_passthrough.py"
        out += [
            ("cheat:pytorch_passthrough", "L1/1_ReLU", cheat.read_text(), False),
            ("fault:poisoned_cuda_context", "L1/1_ReLU", TRITON_POISON, False),
        ]
        return out
    out = [
        (f"honest:{n}", f"L1/{n}", (SOLUTIONS / "cpp" / "level1" / f"{n}.py").read_text(), True)
        for n in CPP_HONEST
    ]
    cheat = SOLUTIONS / "cheats" / "cpp" / "level1" / "1_ReLU__pytorch_passthrough.py"
    out.append(("cheat:pytorch_passthrough", "L1/1_ReLU", cheat.read_text(), False))
    out += [(f"fault:{name}", "L1/1_ReLU", source, False) for name, source in CPP_CANDIDATE_FAULTS.items()]
    return out
