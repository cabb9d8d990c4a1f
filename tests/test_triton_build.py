"""Triton's helper modules: built by the trusted worker, keyed by content, refused when not Triton's own."""

import sysconfig

import pytest

from kernelgym import triton_build
from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import bundled
from kernelgym.triton_build import ModuleRequest

pytest.importorskip("triton")

# A minimal Python extension under a helper's module name (Triton's real helpers need libcuda).
HELPER_C = r"""
#include <Python.h>
static PyObject* answer(PyObject* self, PyObject* args) { return PyLong_FromLong(%d); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, ""}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "cuda_utils", NULL, -1, methods};
PyMODINIT_FUNC PyInit_cuda_utils(void) { return PyModule_Create(&module); }
"""


def test_only_tritons_own_helpers_with_its_own_folders_are_built():
    assert triton_build.refusal(ModuleRequest("__triton_launcher", HELPER_C % 1)) is None
    assert "helper modules" in triton_build.refusal(ModuleRequest("my_module", HELPER_C % 1))
    assert "other than Triton's own" in triton_build.refusal(
        ModuleRequest("__triton_launcher", HELPER_C % 1, include_dirs=("/home/agent/include",)))
    assert "other than Triton's own" in triton_build.refusal(
        ModuleRequest("cuda_utils", HELPER_C % 1, libraries=("libevil.so",)))


def test_a_module_is_built_once_and_keyed_by_its_source(tmp_path):
    import importlib.util

    first = triton_build.build(ModuleRequest("cuda_utils", HELPER_C % 7), root=tmp_path)
    assert first.name == "cuda_utils" + sysconfig.get_config_var("EXT_SUFFIX")
    built_at = first.stat().st_mtime_ns
    assert triton_build.build(ModuleRequest("cuda_utils", HELPER_C % 7), root=tmp_path) == first
    assert first.stat().st_mtime_ns == built_at  # from the cache, not compiled again
    other = triton_build.build(ModuleRequest("cuda_utils", HELPER_C % 8), root=tmp_path)
    assert other != first
    spec = importlib.util.spec_from_file_location("cuda_utils", other)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.answer() == 8


def test_a_bad_source_is_a_build_error(tmp_path):
    from kernelgym.kernels import BuildError

    with pytest.raises(BuildError, match="failed to build"):
        triton_build.build(ModuleRequest("__triton_launcher", "this is not C"), root=tmp_path)


SOLUTION = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
from triton.runtime.build import compile_module_from_src

# What Triton does for its helpers (for each new kernel signature, up to 3.6): the build goes to the worker.
helper = compile_module_from_src(src=r"""HELPER""", name="cuda_utils")


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        scale = helper.answer() - 41  # 1 only when the worker-built module loaded
        relu_kernel[(triton.cdiv(x.numel(), 8192),)](x * scale, y, x.numel(), BLOCK=8192)
        return y
'''


def test_an_evaluation_gets_its_triton_helpers_from_the_worker(pool):
    import uuid

    helper = f"// {uuid.uuid4().hex}: a source no cache has seen" + HELPER_C % 42
    result = pool.evaluate(bundled().get("L1/1_ReLU"), SOLUTION.replace("HELPER", helper), backend="triton")
    assert result.verdict is Verdict.OK, (result.reasons, result.output_tail[-1500:])
    # Built by the worker into kernelgym's cache (the candidate's process would have built it in its own).
    assert triton_build.module_path(ModuleRequest("cuda_utils", helper), root=pool.cache_root).exists()
