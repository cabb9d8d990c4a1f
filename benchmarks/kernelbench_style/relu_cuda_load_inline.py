import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_CUDA = r"""
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
_CPP = "torch::Tensor relu_forward(torch::Tensor x);"
_ext = load_inline(name="kg_bench_relu_cuda", cpp_sources=_CPP, cuda_sources=_CUDA,
                   functions=["relu_forward"])


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.relu_forward(x.contiguous())
