# Exploit: patching Model at import. The task's Model.forward is replaced (through a string.Formatter lookup of __setattr__) by one that returns zeros, and ModelNew returns zeros too, hoping the judge compares against the patched reference.
# Task: L1/1_ReLU
# Backend: cpp
# Expect: runtime_error
# Why: the task module and its Model no longer exist in the candidate's process: importing them fails at load, the failure reward
import string

import torch
import torch.nn as nn

from kernelgym.kernels import load_cpp

_field = string.Formatter().get_field  # "{0.name}" lookups: getattr by another name, invisible to an AST check
_U = chr(95) * 2  # dunder names are spelled at run time


def _get(obj, name):
    return _field("0." + name, (obj,), {})[0]


def _set(obj, name, value):
    setter = _get(type if isinstance(obj, type) else obj, _U + "setattr" + _U)
    return setter(obj, name, value) if isinstance(obj, type) else setter(name, value)


_bt = _get(string, _U + "builtins" + _U)  # the builtins, read from another module's globals
_bt = _bt if isinstance(_bt, dict) else _get(_bt, _U + "dict" + _U)
_imp = _bt[_U + "import" + _U]


_lib = load_cpp(r"""
#include <cstdint>
extern "C" void zero(float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 0.f; }
""")

_task = _get(_imp("sy" + "s"), "mod" + "ules")["kernelgym" + "_task"]
_set(_get(_task, "Mo" + "del"), "for" + "ward", lambda self, *a: torch.zeros_like(a[0]))


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _lib.zero(y, y.numel())
        return y
