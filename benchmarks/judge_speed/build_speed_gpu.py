"""Build speed on a GPU machine (H200): KernelBench-style CUDA `load_inline` and Triton, before and after.

In one run, on a cold cache, within --budget-s (default 170 s):
1. split build: warm-up (precompiled headers, timed apart), then 5 distinct KernelBench-style CUDA files, each
   built new (torch_ext.build), imported and checked against torch on the GPU;
2. torch's own build in kernelgym (KERNELGYM_SPLIT_BUILD=0 path) and torch's real `load_inline` (what
   KernelBench's harness runs, fresh TORCH_EXTENSIONS_DIR) on as many of the same files as the budget allows;
3. Triton: the same kernel in three fresh processes with private Triton caches: plain Triton (cold), then
   through kernelgym's trusted compile twice (cold store, warm store): seconds to the first checked result.
Writes $OUT/build_speed_gpu.json and $OUT/build_speed_gpu.md. Usage (project root, GPU machine):

    OUT=/tmp/out python benchmarks/judge_speed/build_speed_gpu.py [--budget-s 170]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PRELUDE = "#include <torch/extension.h>\n"
KERNELS = {  # name: (cuda source, cpp declaration, function, reference(x, y))
    "relu": (
        """__global__ void k(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; if (i < n) y[i] = fmaxf(x[i], 0.f); }
torch::Tensor relu_cuda(torch::Tensor x) { auto y = torch::empty_like(x); int64_t n = x.numel();
    k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n); return y; }""",
        "torch::Tensor relu_cuda(torch::Tensor x);",
        "relu_cuda",
        "torch.relu(x)",
    ),
    "add": (
        """__global__ void k(const float* a, const float* b, float* c, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }
torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto c = torch::empty_like(a); int64_t n = a.numel();
    k<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
    return c; }""",
        "torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);",
        "add_cuda",
        "x + y",
    ),
    "scale_bias": (
        """__global__ void k(const float* x, float* y, float s, float b, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] * s + b; }
torch::Tensor scale_bias_cuda(torch::Tensor x, double s, double b) { auto y = torch::empty_like(x);
    int64_t n = x.numel();
    k<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, (float)b, n);
    return y; }""",
        "torch::Tensor scale_bias_cuda(torch::Tensor x, double s, double b);",
        "scale_bias_cuda",
        "x * 2.0 + 0.5",
    ),
    "row_sum": (
        """__global__ void k(const float* x, float* y, int64_t rows, int64_t cols) {
    int64_t r = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; if (r >= rows) return;
    float s = 0.f; for (int64_t c = 0; c < cols; ++c) s += x[r * cols + c]; y[r] = s; }
torch::Tensor row_sum_cuda(torch::Tensor x) { auto y = torch::empty({x.size(0)}, x.options());
    k<<<(x.size(0) + 127) / 128, 128>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1));
    return y; }""",
        "torch::Tensor row_sum_cuda(torch::Tensor x);",
        "row_sum_cuda",
        "x.sum(1)",
    ),
    "gelu_mul": (
        """__global__ void k(const float* a, const float* b, float* c, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; if (i >= n) return;
    float v = a[i]; c[i] = 0.5f * v * (1.f + erff(v * 0.70710678f)) * b[i]; }
torch::Tensor gelu_mul_cuda(torch::Tensor a, torch::Tensor b) { TORCH_CHECK(a.is_cuda(), "cuda only");
    auto c = torch::empty_like(a); int64_t n = a.numel();
    k<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), n);
    return c; }""",
        "torch::Tensor gelu_mul_cuda(torch::Tensor a, torch::Tensor b);",
        "gelu_mul_cuda",
        "torch.nn.functional.gelu(x) * y",
    ),
}
CALLS = {  # name: (call of the built function, torch's answer)
    "relu": (lambda f, x, y: f(x), lambda x, y: torch_module().relu(x)),
    "add": (lambda f, x, y: f(x, y), lambda x, y: x + y),
    "scale_bias": (lambda f, x, y: f(x, 2.0, 0.5), lambda x, y: x * 2.0 + 0.5),
    "row_sum": (lambda f, x, y: f(x), lambda x, y: x.sum(1)),
    "gelu_mul": (lambda f, x, y: f(x, y), lambda x, y: torch_module().nn.functional.gelu(x) * y),
}


def torch_module():
    import torch

    return torch


def check(name: str, module) -> bool:
    import torch

    x, y = torch.randn(64, 256, device="cuda"), torch.randn(64, 256, device="cuda")
    call, want = CALLS[name]
    got = call(getattr(module, KERNELS[name][2]), x, y)
    torch.cuda.synchronize()
    return bool(torch.allclose(got, want(x, y), atol=1e-4, rtol=1e-4))


def kernelgym_build(name: str, split: bool) -> dict:
    from kernelgym.build import torch_ext

    cuda, cpp, fn, _ = KERNELS[name]
    request = torch_ext.ExtensionRequest(
        f"kg_{name}", (cpp,), (f"{PRELUDE}{cuda}\n// {time.time_ns()}\n",), (fn,)
    )
    torch_ext.SPLIT_BUILD = split
    started = time.perf_counter()
    folder = torch_ext.build(request)
    row = {
        "file": name,
        "mode": "split" if split else "kernelgym_torch",
        "build_s": round(time.perf_counter() - started, 2),
    }
    steps = folder / "build.json"
    row["steps"] = json.loads(steps.read_text()) if steps.exists() else None
    row["correct"] = check(name, torch_ext._import(f"kg_{name}", folder / f"kg_{name}.so"))
    return row


TORCH_LOAD_INLINE = """
import sys, time, json, torch
from torch.utils.cpp_extension import load_inline
started = time.perf_counter()
m = load_inline(name=sys.argv[1], cpp_sources=sys.argv[2], cuda_sources=sys.argv[3], functions=[sys.argv[4]])
print(json.dumps({"build_s": round(time.perf_counter() - started, 2)}))
"""


def torch_load_inline(name: str) -> dict:
    cuda, cpp, fn, _ = KERNELS[name]
    with tempfile.TemporaryDirectory() as ext_dir:
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=ext_dir)
        started = time.perf_counter()
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                TORCH_LOAD_INLINE,
                f"tl_{name}",
                cpp,
                f"{PRELUDE}{cuda}\n// {time.time_ns()}\n",
                fn,
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    row = {"file": name, "mode": "torch_load_inline", "process_s": round(time.perf_counter() - started, 2)}
    try:
        row.update(json.loads(done.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        row["error"] = done.stderr[-2000:]
    return row


TRITON_RUN = r"""
import sys, time, json, os
started = time.perf_counter()
import torch, triton, triton.language as tl
from pathlib import Path
if sys.argv[1] == "kernelgym":
    from kernelgym.build import triton_build
    store = Path(sys.argv[2])
    triton_build.route_builds_to(lambda request: triton_build.build(request, root=store))

@triton.jit
def fused(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(out_ptr + offs, tl.maximum(x, 0.0) * tl.load(y_ptr + offs, mask=m) + 1.0, mask=m)

x, y = torch.randn(1 << 20, device="cuda"), torch.randn(1 << 20, device="cuda")
out = torch.empty_like(x)
ready = time.perf_counter()
fused[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
torch.cuda.synchronize()
first = time.perf_counter() - ready
ok = bool(torch.allclose(out, torch.relu(x) * y + 1.0))
total = time.perf_counter() - started
print(json.dumps({"first_call_s": round(first, 3), "process_s": round(total, 2), "correct": ok}))
"""


def triton_runs(store: Path) -> list[dict]:
    rows = []
    for label, mode in (
        ("plain_cold", "plain"),
        ("kernelgym_cold_store", "kernelgym"),
        ("kernelgym_warm_store", "kernelgym"),
    ):
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, TRITON_CACHE_DIR=cache, PYTHONPATH=str(ROOT))
            done = subprocess.run(
                [sys.executable, "-c", TRITON_RUN, mode, str(store)], env=env, capture_output=True, text=True
            , check=False)
        row = {"run": label}
        try:
            row.update(json.loads(done.stdout.strip().splitlines()[-1]))
        except (ValueError, IndexError):
            row["error"] = done.stderr[-2000:]
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget-s", type=float, default=170.0)
    args = parser.parse_args()
    out = Path(os.environ.get("OUT", "."))
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.budget_s
    cache = Path(tempfile.mkdtemp(prefix="kg-build-speed-gpu-"))
    os.environ["KERNELGYM_CACHE"] = str(cache)
    result: dict = {"machine": _machine(), "rows": []}

    def save() -> None:
        (out / "build_speed_gpu.json").write_text(json.dumps(result, indent=1))

    from kernelgym.build import torch_ext_split

    started = time.perf_counter()
    torch_ext_split.warm_up()
    result["warm_up_s"] = round(time.perf_counter() - started, 2)
    result["triton"] = triton_runs(cache)  # early: cheap, and independent of the budget left for builds
    save()
    for name in KERNELS:
        result["rows"].append(kernelgym_build(name, split=True))
        save()
    for name in KERNELS:
        for run in (torch_load_inline, lambda n: kernelgym_build(n, split=False)):
            if time.monotonic() > deadline - 50:  # a torch build takes 40-55 s on the H200
                break
            result["rows"].append(run(name))
            save()
    _summarize(result, out)
    save()


def _machine() -> dict:
    import torch

    info = {
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "date_utc": time.strftime("%Y-%m-%d %H:%M"),
    }
    try:
        import triton

        info["triton"] = triton.__version__
    except ImportError:
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    done = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=False)
    info["nvcc"] = done.stdout.strip().splitlines()[-1:]
    info["cpus"] = os.cpu_count()
    return info


def _summarize(result: dict, out: Path) -> None:
    lines = [
        "# build_speed_gpu",
        "",
        f"machine: {json.dumps(result['machine'])}",
        "",
        f"split-build warm-up (precompiled headers, once per machine): {result.get('warm_up_s')} s",
        "",
        "| mode | files | median build s | all |",
        "| --- | --- | --- | --- |",
    ]
    for mode in ("split", "kernelgym_torch", "torch_load_inline"):
        rows = [r for r in result["rows"] if r["mode"] == mode]
        times = [r.get("build_s") for r in rows if r.get("build_s") is not None]
        if times:
            lines.append(f"| {mode} | {len(rows)} | {statistics.median(times):.2f} | {times} |")
    lines += ["", "| triton run | first call s | process s | correct |", "| --- | --- | --- | --- |"]
    for row in result.get("triton", []):
        lines.append(
            f"| {row['run']} | {row.get('first_call_s')} | {row.get('process_s')} | "
            f"{row.get('correct', row.get('error', '')[:200])} |"
        )
    (out / "build_speed_gpu.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
