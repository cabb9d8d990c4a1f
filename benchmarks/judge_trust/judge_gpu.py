"""The judge on a GPU, in one run: KernelBench's few-shot solutions, L1 19_ReLU at its shipped size, the
bundled
Triton and CUDA examples (honest: all must be ok) and the GPU cheats of tests/adversarial (none may earn).

    python benchmarks/judge_trust/judge_gpu.py --kernelbench DIR --out judge_gpu.md [--budget-s 1.0]

DIR holds files laid out from a KernelBench checkout (never committed): fewshot/task_<name>.py with
fewshot/sol_<name>.py (src/kernelbench/prompts/few_shot/model_ex_<name>.py and model_new_ex_<name>.py), and
level1/19_ReLU.py. Prints one JSON line per evaluation and writes a markdown table.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

import kernelgym
from kernelgym.solutions import examples
from kernelgym.tasks import bundled
from kernelgym.tasks.loaders import task_from_source
from kernelgym.workers.pool import PoolConfig
from kernelgym.workers.sandbox import SandboxConfig

# An honest ReLU for the shipped size (4096 x 393216 fp32): our own grid-stride kernel through load_inline.
RELU_SOLUTION = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
__global__ void relu_vec4(const float4* __restrict__ x, float4* __restrict__ y, long long n4) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 v = x[i];
        v.x = fmaxf(v.x, 0.f); v.y = fmaxf(v.y, 0.f); v.z = fmaxf(v.z, 0.f); v.w = fmaxf(v.w, 0.f);
        y[i] = v;
    }
}
torch::Tensor relu_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long long n4 = x.numel() / 4;
    relu_vec4<<<132 * 16, 256>>>((const float4*)x.data_ptr<float>(), (float4*)y.data_ptr<float>(), n4);
    return y;
}
"""
cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"
relu_ext = load_inline(name="relu_vec4_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                       functions=["relu_forward"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = relu_ext

    def forward(self, x):
        return self.ext.relu_forward(x.contiguous())
'''

FIELD = re.compile(r"^# (Task|Backend): (.+)$", re.MULTILINE)


def _row(kind: str, name: str, result, started: float) -> dict:
    return {"kind": kind, "name": name, "verdict": result.verdict.value, "speedup": result.speedup,
            "verified": result.verified_speedup, "reasons": [str(r)[:200] for r in result.reasons][:2],
            "calls_per_batch": result.timing.calls_per_batch if result.timing else None,
            "readback_lag_ms": result.timing.readback_lag_ms if result.timing else None,
            "warnings": (result.static.warnings if result.static else [])[:2],
            "wall_s": round(time.monotonic() - started, 1),
            # what a failure printed, to diagnose it from the log alone (the host is gone after the run)
            "tail": "" if result.verdict.value == "ok" else (result.output_tail or "")[-1500:]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernelbench", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=1.0)
    parser.add_argument("--parts", default="probe,fewshot,relu,examples,cheats", help="run in this order")
    parser.add_argument("--filter", default="",
                        help="a regex: only the examples and few-shot files it matches")
    args = parser.parse_args()
    parts = args.parts.split(",")
    wanted = re.compile(args.filter)
    rows: list[dict] = []
    tasks = {t.id: t for t in bundled()}
    options = {"timing_budget_s": args.budget_s}

    def record(kind, name, result, started):
        row = _row(kind, name, result, started)
        rows.append(row)
        print(json.dumps(row), flush=True)

    sandbox = SandboxConfig()
    pool = kernelgym.EvalPool(PoolConfig(workers=1, sandbox=sandbox))
    if "probe" in parts:  # the full sandbox (namespaces, no capabilities) with CUDA: fall back and say so
        ex = examples("triton")[0]
        started = time.monotonic()
        result = pool.evaluate(tasks[ex.task_id], ex.source, backend="triton", size="gpu", timeout_s=20,
                               build_timeout_s=60, **options)
        record("probe-full-sandbox", ex.task_id, result, started)
        if result.verdict.value != "ok":
            pool.close()
            sandbox = SandboxConfig(drop_privileges=False)
            pool = kernelgym.EvalPool(PoolConfig(workers=1, sandbox=sandbox))
            started = time.monotonic()
            record("probe-relaxed-sandbox", ex.task_id,
                   pool.evaluate(tasks[ex.task_id], ex.source, backend="triton", size="gpu", **options),
                   started)
    def fewshot():
        for task_file in sorted((args.kernelbench / "fewshot").glob("task_*.py")):
            name = task_file.stem.removeprefix("task_")
            if not wanted.search(name):
                continue
            task = task_from_source(task_file.read_text(), suite="kernelbench-fewshot", level=1,
                                    file_name=f"1_{name}.py")
            started = time.monotonic()
            result = pool.evaluate(task, (task_file.parent / f"sol_{name}.py").read_text(), backend="cuda",
                                   size="gpu", **options)
            record("fewshot", name, result, started)
    def relu():
        relu = args.kernelbench / "level1" / "19_ReLU.py"
        task = task_from_source(relu.read_text(), suite="kernelbench", level=1, file_name="19_ReLU.py")
        started = time.monotonic()
        record("shipped-size", "L1/19_ReLU", pool.evaluate(task, RELU_SOLUTION, backend="cuda", size="gpu",
                                                          timeout_s=300, **options), started)
    def examples_part():
        for backend in ("triton", "cuda"):
            for ex in examples(backend):
                if not wanted.search(ex.task_id):
                    continue
                started = time.monotonic()
                record(f"example-{backend}", ex.task_id,
                       pool.evaluate(tasks[ex.task_id], ex.source, backend=backend, size="gpu", **options),
                       started)
    def cheats():
        for path in sorted(Path("tests/adversarial").glob("*.py")):
            fields = dict(FIELD.findall(path.read_text()))
            if fields.get("Backend", "").strip() not in ("triton", "cuda") or fields.get("Task",
                                                                                         "").strip() == "":
                continue
            task_id = fields["Task"].strip()
            task = tasks.get(task_id) or tasks.get(f"bundled/{task_id}")
            if task is None:
                continue
            started = time.monotonic()
            record("cheat", path.stem,
                   pool.evaluate(task, path.read_text(), backend=fields["Backend"].strip(),
                                                      size="gpu", **options), started)
    steps = {"fewshot": fewshot, "relu": relu, "examples": examples_part, "cheats": cheats}
    for part in parts:
        if part in steps:
            steps[part]()
    pool.close()
    _write(args.out, rows, sandbox)
    return 0


def _write(out: Path, rows: list[dict], sandbox: SandboxConfig) -> None:
    import torch

    lines = [f"# The judge on {torch.cuda.get_device_name()} ({time.strftime('%Y-%m-%d')})", "",
             (f"torch {torch.__version__}; sandbox: {'full' if sandbox.drop_privileges else 'relaxed'}; "
              "command: `python benchmarks/judge_trust/judge_gpu.py --kernelbench kb --out judge_gpu.md`"),
             "",
             "| kind | name | verdict | speedup | verified | calls/batch | readback ms | wall s | reason |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['name']} | {r['verdict']} | {r['speedup']} | {r['verified']} | "
                     f"{r['calls_per_batch']} | {r['readback_lag_ms']} | {r['wall_s']} | "
                     f"{(r['reasons'] or [''])[0][:120]} |")
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
