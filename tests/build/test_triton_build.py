"""Triton's helper modules: built by the trusted worker, keyed by content, refused when not Triton's own."""

import sysconfig

import pytest

from kernelgym.build import triton_build
from kernelgym.build.triton_build import ModuleRequest
from kernelgym.evaluation.result import Verdict
from kernelgym.tasks import bundled

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


# --- compiled kernels: the worker compiles everything after TTIR, keyed by what it compiles ------------

def test_a_kernel_request_is_keyed_by_ir_options_and_target_and_never_takes_file_options():
    from kernelgym.build.triton_build import KernelRequest

    base = KernelRequest.make("module {}", {"num_warps": 4, "extern_libs": (("libdevice", "/tmp/evil.bc"),),
                                            "ir_override": "/tmp/x.ttgir"}, 90)
    assert "evil" not in base.options_json and "ir_override" not in base.options_json
    assert KernelRequest.from_json(base.to_json()) == base
    others = [KernelRequest.make("module { }", {"num_warps": 4}, 90),
              KernelRequest.make("module {}", {"num_warps": 8}, 90),
              KernelRequest.make("module {}", {"num_warps": 4}, 80)]
    assert len({base.key, *(o.key for o in others)}) == 4


def test_a_kernel_request_is_refused_while_the_worker_side_compile_is_off(tmp_path):
    """Off, no candidate may have the worker parse kernel text of its own (a red-team helper's find)."""
    from kernelgym.kernels import BuildError

    assert not triton_build.TRUSTED_KERNEL_COMPILE
    with pytest.raises(BuildError, match="candidate's own process"):
        triton_build.build(ModuleRequest(triton_build.KERNEL_REQUEST, "{}"), root=tmp_path)


def test_a_malformed_kernel_request_is_a_build_error(tmp_path, monkeypatch):
    from kernelgym.kernels import BuildError

    monkeypatch.setattr(triton_build, "TRUSTED_KERNEL_COMPILE", True)
    with pytest.raises(BuildError, match="malformed"):
        triton_build.build(ModuleRequest(triton_build.KERNEL_REQUEST, "{not json"), root=tmp_path)
    # IR that does not parse: the candidate's error
    with pytest.raises(BuildError, match="failed to compile"):
        triton_build.compile_kernel(triton_build.KernelRequest.make("not mlir", {}, 90), root=tmp_path)
    assert not list((tmp_path / "triton_kernels").glob("*"))  # nothing half-built left behind


@pytest.mark.slow
def test_kernels_compile_in_the_worker_once_and_a_fresh_triton_cache_reuses_them(tmp_path, monkeypatch):
    """Two evaluations (two private Triton caches) compile the same kernel: the backend runs once, in the
    trusted side, and both get the same cubin from a store the candidate cannot write."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, total, mask=mask)

    backend_runs = []
    real = triton_build._run_backend
    monkeypatch.setattr(triton_build, "_run_backend", lambda request, tmp: backend_runs.append(request.key)
                        or real(request, tmp))
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    monkeypatch.setattr(triton.knobs.build, "impl", None)
    asked = []

    def ask(request):
        asked.append(request.name)
        return triton_build.build(request, root=tmp_path / "store")

    monkeypatch.setattr(triton_build, "TRUSTED_KERNEL_COMPILE", True)  # off by default until run on a GPU
    assert triton_build.route_builds_to(ask)
    signature = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    cubins = []
    for evaluation in ("first", "second"):
        monkeypatch.setattr(triton.knobs.cache, "dir", str(tmp_path / evaluation))  # its own Triton cache
        kernel = triton.compile(ASTSource(add, signature, {"BLOCK": 1024}), target=GPUTarget("cuda", 90, 32))
        cubins.append(kernel.asm["cubin"])
        assert kernel.metadata.name == "add"
    assert asked == [triton_build.KERNEL_REQUEST] * 2 and len(backend_runs) == 1
    assert cubins[0] == cubins[1] and len(cubins[0]) > 1000
    (entry,) = (tmp_path / "store" / "triton_kernels").iterdir()
    assert entry.stat().st_mode & 0o777 == 0o755  # the candidate (another user) can read, not write
    assert {p.name for p in entry.iterdir()} >= {"kernel.ttgir", "kernel.ptx", "kernel.cubin", "stages.json"}
