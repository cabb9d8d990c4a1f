"""Which code launched each GPU kernel, seen from outside the launching process (issue 28, GPU evidence).

A child process runs one kind of launch at a time (a kernel of its own through the CUDA runtime, shared and
static; a Triton kernel; ATen ops; cuBLAS; a CUDA graph). For each, this process sets uprobes
(`kernelgym.evaluation.call_probe.CallProbe`) on the launch entries of the CUDA runtime and of the driver
mapped in the child, and prints the calls counted by the file that made them, and what a probed launch costs.

    python benchmarks/judge_trust/launch_probe_gpu.py [--out FILE.md] [--judge N]

With --judge N it then judges N bundled examples of each GPU backend and the GPU cheats of
tests/adversarial with the launch evidence on (`EvalOptions.launch_evidence`), and prints each verdict beside
the launches seen from outside: the evidence for making it the default.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernelgym.evaluation.call_probe import CallProbe
from kernelgym.evaluation.ip_sampler import PerfUnavailable, executable_mappings_at

KERNEL = r"""
#include <cuda_runtime.h>
__global__ void add_one(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}
extern "C" void launch(long x, long y, int n, int times) {
    for (int t = 0; t < times; ++t) add_one<<<(n + 255) / 256, 256>>>((const float*)x, (float*)y, n);
}
"""

CHILD = r"""
import ctypes, sys, time, torch, triton, triton.language as tl
own_shared, own_static = ctypes.CDLL(sys.argv[1]), ctypes.CDLL(sys.argv[2])
x = torch.randn(1 << 16, device="cuda"); y = torch.empty_like(x); a = torch.randn(512, 512, device="cuda")

@triton.jit
def add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)

graph = torch.cuda.CUDAGraph()
static_in = torch.randn(1 << 16, device="cuda")
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    static_out = static_in + 1
torch.cuda.synchronize()
with torch.cuda.graph(graph):
    static_out = static_in * 2 + 1

PHASES = {
    "own_shared_cudart": lambda: own_shared.launch(x.data_ptr(), y.data_ptr(), x.numel(), 1),
    "own_static_cudart": lambda: own_static.launch(x.data_ptr(), y.data_ptr(), x.numel(), 1),
    "triton": lambda: add_one[(x.numel() // 1024,)](x, y, x.numel(), BLOCK=1024),
    "aten_add": lambda: torch.add(x, 1.0, out=y),
    "cublas_matmul": lambda: torch.mm(a, a),
    "sdpa": lambda: torch.nn.functional.scaled_dot_product_attention(a[None, None], a[None, None],
                                                                     a[None, None]),
    "cuda_graph": lambda: graph.replay(),
}
for run in PHASES.values():
    run(); run()
torch.cuda.synchronize()
print("ready", flush=True)
for line in sys.stdin:
    name, times = line.split()
    start = time.perf_counter()
    for _ in range(int(times)):
        PHASES[name]()
    torch.cuda.synchronize()
    print(f"done {(time.perf_counter() - start) / int(times) * 1e6:.2f}", flush=True)
"""

RUNTIME_ENTRIES = ["cudaLaunchKernel", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC",
                   "cudaLaunchKernelExC_ptsz", "cudaLaunchCooperativeKernel",
                   "cudaGraphLaunch", "cudaGraphLaunch_ptsz"]
DRIVER_ENTRIES = ["cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
                  "cuLaunchCooperativeKernel", "cuGraphLaunch", "cuGraphLaunch_ptsz"]


def build(folder: Path) -> tuple[Path, Path]:
    source = folder / "own.cu"
    source.write_text(KERNEL)
    built = []
    for cudart in ("shared", "static"):
        target = folder / f"libown_{cudart}.so"
        subprocess.run(["nvcc", "-O2", "-shared", "-Xcompiler", "-fPIC", f"-cudart={cudart}", "-arch=sm_90",
                        str(source), "-o", str(target)], check=True)
        built.append(target)
    return built[0], built[1]


def probes_for(pid: int) -> list[CallProbe]:
    files = sorted({path for _, _, path, _ in executable_mappings_at(pid)
                    if os.path.basename(path).startswith(("libcudart", "libcuda.so"))})
    found = []
    for path in files:
        entries = DRIVER_ENTRIES if os.path.basename(path).startswith("libcuda.so") else RUNTIME_ENTRIES
        found.append(CallProbe(pid, path, entries, ring_pages=64))
    return found


def short(path: str) -> str:
    return os.path.basename(path) or path


def judged(per_backend: int, workers: int) -> list[str]:
    """Honest examples and the GPU cheats, judged with the launch rules on."""
    from kernelgym.solutions import examples
    from kernelgym.tasks import bundled
    from kernelgym.workers.pool import EvalPool

    corpus = Path(__file__).resolve().parents[2] / "tests" / "adversarial"
    cases = [(f"honest {e.backend}", e.task_id.removeprefix("bundled/"), e.backend, e.path.read_text())
             for backend in ("triton", "cuda") for e in examples(backend)[:per_backend]]
    for path in sorted(corpus.glob("*.py")):
        text = path.read_text()
        head = dict(line[2:].split(": ", 1) for line in text.splitlines()[:12]
                    if line.startswith(("# Task: ", "# Backend: ")))
        if head.get("Backend") in ("triton", "cuda"):
            cases.append((f"cheat {path.stem}", head["Task"], head["Backend"], text))
    lines = ["", ("| case | task | verdict | reasons | launches seen (by phase, caller/kernel) | profile s "
             "(evidence off) | notes |"), "|---|---|---|---|---|---|---|"]
    tasks = bundled()
    with EvalPool(workers=workers) as pool:
        # Each case twice, the evidence on and off, so the profile stage's cost is measured side by side.
        futures = [(name, task, pool.submit(tasks.get(task), source, backend=backend, size="gpu",
                                            launch_evidence=True),
                    pool.submit(tasks.get(task), source, backend=backend, size="gpu"))
                   for name, task, backend, source in cases]
        for name, task, future, baseline in futures:
            result, plain = future.result(), baseline.result()
            seen = (result.profile.launches if result.profile else {}) or {}
            reasons = "; ".join(str(r)[:120] for r in result.reasons)
            notes = "; ".join(w[:120] for w in (result.static.warnings if result.static else [])
                              if "launch" in w)
            profile_s = f"{result.stage_s.get('profile', 0):.2f} ({plain.stage_s.get('profile', 0):.2f})"
            lines.append(f"| {name} | {task} | {result.verdict.value} | {reasons} | {seen.get('launches')} | "
                         f"{profile_s} | {notes} |")
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="")
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--judge", type=int, default=0, help="examples per backend to judge (0: none)")
    parser.add_argument("--workers", type=int, default=6)
    args = parser.parse_args()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"# launches by caller, seen from outside ({when})", ""]
    with tempfile.TemporaryDirectory() as folder:
        shared, static = build(Path(folder))
        script = Path(folder) / "child.py"  # Triton reads a kernel's source from its file
        script.write_text(CHILD)
        child = subprocess.Popen([sys.executable, str(script), str(shared), str(static)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "ready"
            lines.append("probed files: " + ", ".join(sorted({p.library for p in probes_for(child.pid)})))
            lines += ["", "| phase | calls | us a call unprobed | us a call probed | counted |",
                      "|---|---|---|---|---|"]
            for phase in ("own_shared_cudart", "own_static_cudart", "triton", "aten_add", "cublas_matmul",
                          "sdpa", "cuda_graph"):
                child.stdin.write(f"{phase} {args.calls}\n")
                child.stdin.flush()
                plain = child.stdout.readline().split()[1]
                probes = probes_for(child.pid)
                started = [p for p in probes if p.start()]
                refused = [f"{short(p.library)}: {p.refused}" for p in probes if p not in started]
                child.stdin.write(f"{phase} {args.calls}\n")
                child.stdin.flush()
                probed = child.stdout.readline().split()[1]
                counted = []
                for probe in started:
                    counts = probe.stop()
                    for function, n in counts.calls_by_function.items():
                        counted.append(f"{short(probe.library)}:{function}={n}")
                    counted += [f"{short(probe.library)} <- {short(c)}: {n}"
                                for c, n in counts.calls_by_caller.items()]
                    if counts.lost:
                        counted.append(f"lost {counts.lost}")
                seen = "; ".join(counted + refused)
                lines.append(f"| {phase} | {args.calls} | {plain} | {probed} | {seen} |")
                print(lines[-1], flush=True)
        except (PerfUnavailable, AssertionError) as error:
            lines.append(f"failed: {error!r}")
        finally:
            child.kill()
    if args.judge:
        lines += judged(args.judge, args.workers)
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
