"""The solution contract each backend's prompt teaches (kept short: it is read by an LLM every turn)."""

_COMMON = """\
Write a Python module that defines `class ModelNew(nn.Module)` with exactly the same constructor and forward
signatures as `Model`. Create parameters in `__init__` in the same order and with the same layers or
initializers as `Model` (keep e.g. `nn.Linear` as a weight holder), so the weights match under one seed.
The heavy computation must run in your own kernels; in `forward`, PyTorch may only allocate (`torch.empty`),
reshape or view tensors, or make them contiguous. Not allowed: calling the reference ops for the real work,
try/except fallbacks, threads or processes, other CUDA streams, computing in lower precision than the
task's dtype, caching results between calls, modifying inputs, patching torch or timers.
Answer with one fenced ```python code block holding the whole module."""

CPP_CONTRACT = _COMMON + """

Backend cpp (runs on the CPU): write C++ with `extern "C"` functions over raw pointers and build it at import
with kernelgym's lean loader (about 0.1 s to build; OpenMP and -O3 -march=native are on):

```python
import torch
import torch.nn as nn
from kernelgym.kernels import load_cpp

lib = load_cpp(r'''
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}''')

class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.relu(x, y, x.numel())  # tensors pass as pointers, int as int64_t, float as float
        return y
```
`torch.utils.cpp_extension.load_inline(cpp_sources=..., functions=[...])` also works, but a new build takes
about 3 s (more on a busy machine)."""

TRITON_CONTRACT = _COMMON + """

Backend triton: write `@triton.jit` kernels in the module and launch them from `forward` with a grid, e.g.
`add_kernel[(triton.cdiv(n, BLOCK),)](x, y, out, n, BLOCK=1024)`. Mask every load and store that can run
past the end of a tensor. Inputs are already on the GPU and contiguous unless the reference says otherwise."""

CUDA_CONTRACT = _COMMON + """

Backend cuda: write CUDA kernels with `extern "C"` host launchers over raw pointers and build them at import
with kernelgym's lean loader (nvcc alone, no torch headers: about 1-2 s to build):

```python
from kernelgym.kernels import load_cuda
lib = load_cuda(r'''
#include <cstdint>
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
extern "C" void relu(const float* x, float* y, int64_t n) {
    relu_kernel<<<(unsigned)((n + 255) / 256), 256>>>(x, y, n);
}''')
# in forward: y = torch.empty_like(x); lib.relu(x, y, x.numel())
```
Launch on the default stream. KernelBench-style `torch.utils.cpp_extension.load_inline(cpp_sources,
cuda_sources, functions)` also works but builds far slower."""
