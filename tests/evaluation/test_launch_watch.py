"""The evaluation-long launch watch (evaluation/launch_watch.py), on the CPU with stand-in libraries built by
the test: a "CUDA runtime" and "driver" exporting the launch entries with their real argument lists, a
"PyTorch" library (in a folder the watch is told is PyTorch's) whose kernel stubs carry ATen-like names, an
installed "cuBLAS", a copy of it elsewhere, and a solution's library. What each launch is attributed to, its
size from its registers, threads and processes born meanwhile, and the verdict judge() draws from it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelgym.evaluation import gpu_evidence as ge
from kernelgym.evaluation import rules
from kernelgym.evaluation.launch_decode import launch_size
from kernelgym.evaluation.launch_watch import EvaluationLaunchWatch

KEEP = '#define KEEP __asm__ volatile("" ::: "memory")  /* no tail call: the return address stays here */\n'
TYPES = r"""
#include <stddef.h>
typedef struct { unsigned x, y, z; } dim3;
typedef struct { unsigned gx, gy, gz, bx, by, bz, smem; void* stream; void* attrs; unsigned n; }
    CUlaunchConfig;
"""
RUNTIME = KEEP + TYPES + r"""
__attribute__((noinline)) int cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** a, size_t s, void* st)
{ KEEP; return 0; }
__attribute__((noinline)) int cudaGraphLaunch(void* graph, void* stream) { KEEP; return 0; }
"""
DRIVER = KEEP + TYPES + r"""
__attribute__((noinline)) int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
    unsigned by, unsigned bz, unsigned smem, void* stream, void** p, void** e)
{ KEEP; return 0; }
__attribute__((noinline)) int cuLaunchKernelEx(const CUlaunchConfig* c, void* f, void** p, void** e)
{ KEEP; return 0; }
"""
DECLARED = TYPES + r"""
extern int cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** a, size_t s, void* st);
extern int cudaGraphLaunch(void* graph, void* stream);
extern int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned smem, void* stream, void** p, void** e);
extern int cuLaunchKernelEx(const CUlaunchConfig* c, void* f, void** p, void** e);
"""
TORCH = KEEP + DECLARED + r"""
#define FILL _ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEEEEviT0_
#define RMS _ZN2at6native24vectorized_rms_norm_kernelIfEEviPKfPf
void FILL(void) {}
void RMS(void) {}
static int launch(const void* stub, unsigned n) {
    dim3 g = {n, 1, 1}, b = {256, 1, 1};
    int r = cudaLaunchKernel(stub, g, b, 0, 0, 0);
    KEEP;
    return r;
}
int torch_fill(unsigned n) { return launch((const void*)&FILL, n); }
int torch_rms(unsigned n) { return launch((const void*)&RMS, n); }
int torch_graph(void) { int r = cudaGraphLaunch(0, 0); KEEP; return r; }
const void* torch_rms_stub(void) { return (const void*)&RMS; }
"""
OWN = KEEP + DECLARED + r"""
int own_driver(unsigned n)
{ int r = cuLaunchKernel((void*)1, n, 1, 1, 128, 1, 2, 0, 0, 0, 0); KEEP; return r; }
int own_ex(unsigned n) {
    volatile CUlaunchConfig c = {n, 2, 1, 64, 1, 1, 0, 0, 0, 0};
    int r = cuLaunchKernelEx((const CUlaunchConfig*)&c, (void*)1, 0, 0);
    KEEP;
    return r;
}
int own_launders(const void* stub, unsigned n) {  /* PyTorch's kernel through the solution's library */
    dim3 g = {n, 1, 1}, b = {256, 1, 1};
    int r = cudaLaunchKernel(stub, g, b, 0, 0, 0);
    KEEP;
    return r;
}
"""
VENDOR = KEEP + DECLARED + r"""
int gemm(unsigned n) { int r = cuLaunchKernel((void*)2, n, n, 1, 256, 1, 1, 0, 0, 0, 0); KEEP; return r; }
"""
CHILD = r"""
import ctypes, os, sys, threading
folder = sys.argv[1]
load = lambda path: ctypes.CDLL(os.path.join(folder, path), mode=ctypes.RTLD_GLOBAL)
load("sys/libcudart.so.13"); driver = load("sys/libcuda.so.1")
torch = load("torch/lib/libtorch_cuda.so"); own = load("eval/build/ext.so")
vendor = load("sys/nvidia/cublas/lib/libcublasLt.so.13")
torch.torch_rms_stub.restype = ctypes.c_void_p
print("ready", flush=True)
for line in sys.stdin:
    what = line.strip()
    if what == "honest":
        own.own_driver(10); own.own_driver(10); own.own_ex(8); torch.torch_fill(4)
    elif what == "passthrough":
        own.own_driver(1); torch.torch_rms(4096)
    elif what == "launder":
        own.own_driver(1); own.own_launders(ctypes.c_void_p(torch.torch_rms_stub()), 4096)
    elif what == "vendor":
        own.own_driver(10); vendor.gemm(64)
    elif what == "copy":
        own.own_driver(10); ctypes.CDLL(os.path.join(folder, "eval/work/libcublasLt.so.13")).gemm(64)
    elif what == "ctypes":
        own.own_driver(10); driver.cuLaunchKernel(None, 1, 1, 1, 1, 1, 1, 0, None, None, None)
    elif what == "graph":
        own.own_driver(10); torch.torch_graph()
    elif what == "thread":
        own.own_driver(10)
        worker = threading.Thread(target=vendor.gemm, args=(64,)); worker.start(); worker.join()
    elif what == "fork":
        own.own_driver(10)
        child = os.fork()
        if child == 0:
            vendor.gemm(64); os._exit(0)
        os.waitpid(child, 0)
    elif what == "launcher copy":  # as Triton loads the launcher the worker built: from its own cache
        ctypes.CDLL(os.path.join(folder, "eval/work/cache/ext.so")).own_driver(10)
    elif what == "runtime copy":
        ctypes.CDLL(os.path.join(folder, "eval/work/libmine.so"))
    else:
        break
    print("done", flush=True)
"""


def _build(source: str, out: Path, *links: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", str(src), "-o", str(out),
                    *[str(p) for p in links], *[f"-Wl,-rpath,{p.parent}" for p in links]], check=True)


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("launch_watch")
    runtime, driver = root / "sys/libcudart.so.13", root / "sys/libcuda.so.1"
    _build(RUNTIME, runtime)
    _build(DRIVER, driver)
    _build(TORCH, root / "torch/lib/libtorch_cuda.so", runtime)
    _build(OWN, root / "eval/build/ext.so", runtime, driver)
    vendor = root / "sys/nvidia/cublas/lib/libcublasLt.so.13"
    _build(VENDOR, vendor, driver)
    (root / "eval/work").mkdir(parents=True)
    shutil.copy(vendor, root / "eval/work/libcublasLt.so.13")  # a copy the solution made: not installed
    shutil.copy(driver, root / "eval/work/libmine.so")  # a driver of its own, under another name
    (root / "eval/work/cache").mkdir()
    shutil.copy(root / "eval/build/ext.so", root / "eval/work/cache/ext.so")
    return root


class _Child:
    def __init__(self, root: Path):
        self.process = subprocess.Popen([sys.executable, "-c", CHILD, str(root)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline().strip() == "ready"

    def do(self, what: str) -> None:
        self.process.stdin.write(what + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "done"

    def end(self) -> None:
        self.process.stdin.write("end\n")
        self.process.stdin.flush()
        self.process.wait(timeout=30)


@pytest.fixture
def watched(stand_ins):
    child = _Child(stand_ins)
    own = {str(stand_ins / "eval/build/ext.so")}
    torch_folder, installed = str(stand_ins / "torch") + os.sep, str(stand_ins / "sys") + os.sep
    watch = EvaluationLaunchWatch(own, (torch_folder,), (installed,))
    try:
        assert watch.start(child.process.pid), watch.refused
        yield child, watch
    finally:
        watch.close()
        child.end()


def _batch(child, watch, what: str, number: int = 1):
    child.do(what)
    return watch.take(number, ge.TIMED, calls=1)


def test_honest_launches_are_own_with_their_sizes(watched):
    child, watch = watched
    batch = _batch(child, watch, "honest")
    assert batch.counts == {ge.LaunchKey(ge.OWN, ge.OWN): 3, ge.LaunchKey(ge.TORCH, ge.TORCH_HOUSEKEEPING): 1}
    # cuLaunchKernel: 10 * 128 * 2 threads (bz from the stack); cuLaunchKernelEx: 8 * 2 * 64 (its config in
    # the caller's frame); PyTorch's fill: 4 * 256 (two dim3s in registers)
    assert batch.threads[ge.OWN] == 2 * 10 * 128 * 2 + 8 * 2 * 64
    assert batch.threads[ge.TORCH_HOUSEKEEPING] == 4 * 256
    assert not batch.threads_unknown and not batch.lost and not batch.unfollowed_launches
    batches = [batch] + [_batch(child, watch, "honest", n) for n in range(2, 6)]
    assert ge.judge(ge.GpuLaunchEvidence(True, batches=batches)) == ge.GpuOwnCodeVerdict(None, True)


@pytest.mark.parametrize(("what", "rule", "word"), [
    ("passthrough", rules.TORCH_COMPUTE, "PyTorch's compute"),  # a token beside PyTorch's kernel
    ("launder", rules.TORCH_COMPUTE, "through the solution's library"),  # its GOT rewritten
    ("vendor", rules.TORCH_COMPUTE, "vendor"),
    ("copy", rules.UNTRACKED_COMPUTE, "did not build"),  # cuBLAS copied into its folder
    ("ctypes", rules.UNTRACKED_COMPUTE, "did not build"),  # a launch straight from Python
])
def test_cheats_launches_are_judged(watched, what, rule, word):
    child, watch = watched
    batches = [_batch(child, watch, what, n) for n in range(1, 6)]
    finding = ge.judge(ge.GpuLaunchEvidence(True, batches=batches)).finding
    assert finding is not None and finding[0] is rule and word in finding[1], finding


def test_a_copy_of_a_built_library_is_own(watched):
    child, watch = watched
    assert _batch(child, watch, "launcher copy").counts == {ge.LaunchKey(ge.OWN, ge.OWN): 1}


def test_a_graph_launch_is_counted_apart(watched):
    child, watch = watched
    batch = _batch(child, watch, "graph")
    assert batch.counts[ge.LaunchKey(ge.TORCH, ge.UNKNOWN, graph=True)] == 1


def test_threads_and_processes_born_in_a_batch_are_counted(watched):
    """A thread born in the batch, and a forked process, each launching cuBLAS: not sampled (their events
    are inherited counts only), so the batch says how many launches it could not attribute."""
    child, watch = watched
    for what in ("thread", "fork"):
        batch = _batch(child, watch, what)
        assert batch.counts == {ge.LaunchKey(ge.OWN, ge.OWN): 1}
        assert batch.unfollowed_launches == 1, what
    batches = [_batch(child, watch, "thread", n) for n in range(5)]
    verdict = ge.judge(ge.GpuLaunchEvidence(True, batches=batches))
    assert verdict.finding[0] is rules.UNTRACKED_COMPUTE and "born" in verdict.finding[1]


def test_a_runtime_copy_mapped_later_is_reported(watched, stand_ins):
    child, watch = watched
    assert watch.take(1, ge.TIMED).unprobed_runtimes == ()
    child.do("runtime copy")
    batch = watch.take(2, ge.TIMED)
    assert batch.unprobed_runtimes == (str(stand_ins / "eval/work/libmine.so"),)
    finding = ge.judge(ge.GpuLaunchEvidence(True, batches=[batch])).finding
    assert finding[0] is rules.UNTRACKED_COMPUTE and "libmine.so" in finding[1]


def test_launch_sizes_from_registers():
    regs = {"di": 0x1000, "si": (2 << 32) | 3, "dx": 5, "cx": (4 << 32) | 64, "r8": 1, "r9": 7, "sp": 0x7000}
    assert launch_size("dim3", regs, b"") == (0x1000, 3 * 2 * 5 * 64 * 4 * 1)
    stack = (0xDEAD).to_bytes(8, "little") + (3).to_bytes(4, "little") + bytes(4)
    assert launch_size("driver", regs, stack) == (0x1000, 3 * 5 * 64 * 1 * 7 * 3)  # 32 bits each, bz stacked
    config = bytes(16) + b"".join(v.to_bytes(4, "little") for v in (2, 3, 4, 32, 2, 1))
    regs_ex = dict(regs, di=0x7000 + 16)
    assert launch_size("driver_config", regs_ex, config) == (0x7010, 2 * 3 * 4 * 32 * 2)
    assert launch_size("driver_config", dict(regs, di=0x9000), config) == (0x9000, None)  # not on the stack
    assert launch_size("graph", regs, b"") == (None, None)
