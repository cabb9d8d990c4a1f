# Exploit: work past the clock. Each call's ReLU runs on a thread that the next call joins, so the clock stops while only the batch's last call is still computing, which then finishes in the moment between 'done' and the freeze. Whatever it finishes there is charged to the batch (the tree's CPU time over its cores, timing.cpu_past_clock_ms); whatever it does not is an unfinished output.
# Task: L1/1_ReLU
# Backend: cpp
import threading

import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

lib = load_cpp(r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
""")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.pending = None

    def forward(self, x):
        if self.pending is not None:
            self.pending.join()  # the previous call's outputs are complete before this call's start
        x = x.contiguous()
        y = torch.empty_like(x)
        self.pending = threading.Thread(target=lib.relu, args=(x, y, x.numel()))
        self.pending.start()
        return y
