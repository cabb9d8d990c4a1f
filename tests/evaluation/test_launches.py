"""Kernel launches counted by the library that made them, from outside the launching process
(evaluation/launches.py), and the rules that set them against the candidate's own profile. On the CPU with
stand-in libraries built by the test: a "CUDA runtime" exporting the launch entries, a "cuBLAS" and a
solution's library calling it; the real ones are checked on a GPU host
(benchmarks/judge_trust/launch_probe_gpu.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kernelgym.evaluation.launches import (
    OTHER,
    RUNTIME,
    TORCH,
    VENDOR,
    LaunchCounts,
    LaunchWatch,
    caller_kind,
    judge_launches,
)

RUNTIME_SOURCE = """
#include <stdint.h>
__attribute__((noinline)) int cudaLaunchKernel(int64_t k) { __asm__ volatile("" ::: "memory"); return 0; }
__attribute__((noinline)) int cudaGraphLaunch(int64_t g) { __asm__ volatile("" ::: "memory"); return 0; }
"""
CALLER_SOURCE = """
#include <stdint.h>
extern int cudaLaunchKernel(int64_t);
extern int cudaGraphLaunch(int64_t);
void {name}(int64_t n) {{ for (int64_t i = 0; i < n; ++i) cudaLaunchKernel(i); }}
void {name}_graph(void) {{ cudaGraphLaunch(1); }}
"""
CHILD = """
import ctypes, sys
runtime = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
own, vendor = ctypes.CDLL(sys.argv[2]), ctypes.CDLL(sys.argv[3])
print("ready", flush=True)
sys.stdin.readline()
own.solution_launch(ctypes.c_int64(4)); own.solution_launch_graph(); vendor.gemm_launch(ctypes.c_int64(2))
print("done", flush=True)
sys.stdin.readline()
"""


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("launches")
    (folder / "runtime.c").write_text(RUNTIME_SOURCE)
    runtime = folder / "libcudart.so.13"
    compile_ = ["gcc", "-O2", "-fPIC", "-shared"]
    subprocess.run([*compile_, str(folder / "runtime.c"), "-o", str(runtime)], check=True)
    built = [runtime]
    for library, name in (("libsolution.so", "solution_launch"), ("libcublasLt.so.13", "gemm_launch")):
        (folder / f"{name}.c").write_text(CALLER_SOURCE.format(name=name))
        subprocess.run([*compile_, str(folder / f"{name}.c"), "-o", str(folder / library), str(runtime),
                        f"-Wl,-rpath,{folder}"], check=True)
        built.append(folder / library)
    return [str(p) for p in built]


def test_launches_are_counted_by_the_library_that_made_them(stand_ins):
    child = subprocess.Popen([sys.executable, "-c", CHILD, *stand_ins], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        watch = LaunchWatch()
        assert watch.start(child.pid), watch.refused
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "done"
        counts = watch.stop()
    finally:
        child.stdin.write("end\n")
        child.stdin.flush()
        child.wait(timeout=30)
    assert counts.available, counts.reason
    assert counts.by_kind == {OTHER: 4, VENDOR: 2}
    assert counts.graph_launches == 1
    assert counts.by_file == {"libsolution.so": 4, "libcublasLt.so.13": 2}


def test_a_process_without_a_cuda_runtime_says_so():
    watch = LaunchWatch()
    assert not watch.start(os.getpid())
    assert "no CUDA runtime" in watch.refused
    assert not watch.stop().available


def test_callers_are_told_by_their_library():
    torch_folders = ("/site/torch/", "/site/torch.libs/")
    assert caller_kind("/site/torch/lib/libtorch_cuda.so", torch_folders) == TORCH
    assert caller_kind("/site/nvidia/cublas/lib/libcublasLt.so.13", torch_folders) == VENDOR
    assert caller_kind("/usr/local/cuda/lib64/libcudart.so.13", torch_folders) == RUNTIME
    assert caller_kind("/tmp/eval-1/ext/solution.so", torch_folders) == OTHER
    assert caller_kind("[anon exec]", torch_folders) == OTHER


@pytest.mark.parametrize(("kinds", "graphs", "profile", "rule"), [
    ({OTHER: 4}, 0, {"own_kernel_calls": 4, "other_kernel_launches": 0}, None),  # honest
    ({OTHER: 4, TORCH: 2}, 0, {"own_kernel_calls": 4, "other_kernel_launches": 2}, None),  # glue shown
    ({OTHER: 1, VENDOR: 1}, 0, {"own_kernel_calls": 1, "other_kernel_launches": 1}, "vendor"),
    ({OTHER: 1, TORCH: 3}, 0, {"own_kernel_calls": 1, "other_kernel_launches": 0}, "hidden"),  # forged
    ({TORCH: 2}, 0, {"own_kernel_calls": 2, "other_kernel_launches": 2}, "not_own"),
    ({TORCH: 1}, 1, {"own_kernel_calls": 2, "other_kernel_launches": 1}, None),  # a graph of own kernels
])
def test_the_launch_rules(kinds, graphs, profile, rule):
    found = judge_launches(LaunchCounts(True, by_kind=kinds, graph_launches=graphs), profile)
    assert (found[0] if found else None) == rule
    assert judge_launches(LaunchCounts(False, "refused"), profile) is None
