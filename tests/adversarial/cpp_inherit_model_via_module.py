# Exploit: inheriting Model. The reference class is taken from the task module by attribute (not `class ModelNew(Model)`) and its forward runs unchanged.
# Task: L1/1_ReLU
# Backend: cpp
# Expect: runtime_error
# Why: the task module and its Model no longer exist in the candidate's process: importing them fails at load, the failure reward

import kernelgym_task as _task

from kernelgym.kernels import load_cpp

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void noop(const float* x, int64_t n) { (void)x; (void)n; }
""")


class ModelNew(_task.Model):
    def forward(self, x):
        _lib.noop(x, 0)
        return super().forward(x)
