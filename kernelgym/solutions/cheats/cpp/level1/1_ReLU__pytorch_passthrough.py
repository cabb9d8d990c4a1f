# Exploit: PyTorch passthrough. A token kernel exists and is called, but torch does the real work.
import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void touch(float* y, int64_t n) { if (n > 0) y[0] = y[0]; }
""")


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        _lib.touch(y, 1)
        return y
