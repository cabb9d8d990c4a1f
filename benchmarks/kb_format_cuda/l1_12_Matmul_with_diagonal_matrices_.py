import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

diag_matmul_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

// C[i, j] = A[i] * B[i, j]: one row of B per block, four columns a thread through float4 when aligned.
__global__ void diag_matmul_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int n, int m) {
    const int row = blockIdx.x;
    const float scale = a[row];
    const float* src = b + (size_t)row * m;
    float* dst = c + (size_t)row * m;
    if (m % 4 == 0) {
        const float4* src4 = reinterpret_cast<const float4*>(src);
        float4* dst4 = reinterpret_cast<float4*>(dst);
        for (int j = threadIdx.x; j < m / 4; j += blockDim.x) {
            float4 v = src4[j];
            v.x *= scale; v.y *= scale; v.z *= scale; v.w *= scale;
            dst4[j] = v;
        }
    } else {
        for (int j = threadIdx.x; j < m; j += blockDim.x) dst[j] = src[j] * scale;
    }
}

torch::Tensor diag_matmul_cuda(torch::Tensor a, torch::Tensor b) {
    const int n = b.size(0), m = b.size(1);
    auto c = torch::empty_like(b);
    diag_matmul_kernel<<<n, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n, m);
    return c;
}
"""

diag_matmul_cpp_source = "torch::Tensor diag_matmul_cuda(torch::Tensor a, torch::Tensor b);"

diag_matmul = load_inline(
    name="diag_matmul",
    cpp_sources=diag_matmul_cpp_source,
    cuda_sources=diag_matmul_source,
    functions=["diag_matmul_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.diag_matmul = diag_matmul

    def forward(self, A, B):
        return self.diag_matmul.diag_matmul_cuda(A.contiguous(), B.contiguous())
