"""A new KernelBench-format CUDA candidate on the GPU: torch's own `load_inline` beside kernelgym's.

Cases are real files read at run time, never copied into the project: KernelBench's few-shot solutions
(--kernelbench, a KernelBench checkout) and CUDA-L1 entries whose answer builds a `load_inline` kernel
(--cuda-l1, the corpus JSON). Phases, in one run:

1. torch: each solution imported in a fresh process with an empty TORCH_EXTENSIONS_DIR (what KernelBench's
   harness does), ModelNew constructed; seconds to a built model, then its forward timed with CUDA events.
2. kernelgym: the same, with kernelgym's `load_inline` (the split build) and one cache shared by the cases
   (its precompiled headers made first and timed apart); kernel times compared with phase 1's.
3. judge: every case through an EvalPool on a cold build cache (headers warm), then again warm: seconds per
   evaluation, candidates a minute, verdicts, and the GPU timing slot's busy fraction.

    OUT=DIR python benchmarks/cold_build_gpu.py --kernelbench KB --cuda-l1 a100_pcie.json \
        [--l1-count 10] [--parallel 8] [--workers 8] [--phases torch,kernelgym,judge]

Writes DIR/cold_build_gpu.json (everything) and prints a table per phase.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FEW_SHOT = ("add", "fuse_gelu", "tiled_matmul", "mnist2", "flash_attn")


def cases(kernelbench: Path | None, cuda_l1: Path | None, l1_count: int, l1_ids: str = "") -> list[dict]:
    found = []
    if kernelbench is not None:
        folder = kernelbench / "src" / "kernelbench" / "prompts" / "few_shot"
        for name in FEW_SHOT:
            task, solution = folder / f"model_ex_{name}.py", folder / f"model_new_ex_{name}.py"
            if task.exists() and solution.exists():
                found.append({"name": f"kb_{name}", "task": task.read_text(),
                              "solution": solution.read_text()})
    if cuda_l1 is not None:
        corpus = json.loads(cuda_l1.read_text())
        picked = 0
        for level in ("1", "2", "3"):
            for entry in corpus.get(level, []):
                code = entry["custom_code"]
                wanted = f"{level}/{entry['task_id']}" in l1_ids.split(",") if l1_ids else picked < l1_count
                if "load_inline" in code and "__global__" in code and wanted:
                    found.append({"name": f"l1_{level}_{entry['task_id']}", "task": entry["ref_code"],
                                  "solution": code})
                    picked += 1
    return found


# one case in a fresh process ------------------------------------------------------------------------------

CHILD = r"""
import json, os, sys, time, types
import torch
mode, folder = sys.argv[1], sys.argv[2]
built = []
if mode == "kernelgym":
    from torch.utils import cpp_extension
    from kernelgym import kernels
from kernelgym.build import torch_ext
    cpp_extension.load_inline, cpp_extension.load = torch_ext.load_inline, torch_ext.load
    def record(request):
        started = time.perf_counter()
        folder = torch_ext.build(request)
        steps = folder / "build.json"
        built.append({"s": round(time.perf_counter() - started, 3),
                      **(json.loads(steps.read_text()) if steps.exists() else {})})
        return folder
    kernels.remote_extension_builder = record
def module(name, path):
    spec = __import__("importlib.util").util.spec_from_file_location(name, path)
    mod = __import__("importlib.util").util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
out = {}
try:
    task = module("task", os.path.join(folder, "task.py"))
    torch.manual_seed(0)
    init = task.get_init_inputs()
    torch.cuda.init()
    started = time.perf_counter()
    solution = module("solution", os.path.join(folder, "solution.py"))
    model = solution.ModelNew(*init).cuda()
    out["build_s"] = round(time.perf_counter() - started, 3)
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    torch.manual_seed(0)
    reference = task.Model(*init).cuda()
    with torch.no_grad():
        expected = reference(*inputs)
        got = model(*inputs)
        torch.cuda.synchronize()
        out["max_abs_err"] = float((got.float() - expected.float()).abs().max())
        times = []
        for i in range(25):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record(); model(*inputs); end.record(); torch.cuda.synchronize()
            if i >= 5:
                times.append(start.elapsed_time(end))
    out["forward_ms"] = sorted(times)[len(times) // 2]
except BaseException as exc:  # a case that fails is a row of the table, not the end of the run
    out["error"] = f"{type(exc).__name__}: {str(exc)[-400:]}"
out["builds"] = built
print("RESULT " + json.dumps(out))
"""


def run_child(mode: str, case: dict, env: dict, timeout_s: float) -> dict:
    folder = Path(tempfile.mkdtemp(prefix=f"case-{case['name']}-"))
    (folder / "task.py").write_text(case["task"])
    (folder / "solution.py").write_text(case["solution"])
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, mode, str(folder)], capture_output=True,
                              text=True, timeout=timeout_s, env=env, cwd=folder, check=False)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")), None)
        result = json.loads(line[7:]) if line else {"error": (done.stderr or done.stdout)[-400:]}
    except subprocess.TimeoutExpired:
        result = {"error": f"ran past {timeout_s} s"}
    result["process_s"] = round(time.perf_counter() - started, 3)
    result["name"] = case["name"]
    shutil.rmtree(folder, ignore_errors=True)
    return result


def phase_torch(all_cases: list[dict], parallel: int, timeout_s: float) -> list[dict]:
    def one(case):
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=tempfile.mkdtemp(prefix="torch-ext-"))
        return run_child("torch", case, env, timeout_s)

    with ThreadPoolExecutor(parallel) as pool:
        return list(pool.map(one, all_cases))


def phase_kernelgym(all_cases: list[dict], parallel: int, timeout_s: float, cache: Path) -> dict:
    from kernelgym.build import torch_ext_split

    env = dict(os.environ, KERNELGYM_CACHE=str(cache))
    os.environ["KERNELGYM_CACHE"] = str(cache)
    started = time.perf_counter()
    torch_ext_split.warm_up()
    warm_up_s = round(time.perf_counter() - started, 3)
    with ThreadPoolExecutor(parallel) as pool:
        rows = list(pool.map(lambda case: run_child("kernelgym", case, env, timeout_s), all_cases))
    return {"warm_up_s": warm_up_s, "rows": rows}


def phase_judge(all_cases: list[dict], workers: int, cache: Path, headers_from: Path | None) -> dict:
    os.environ["KERNELGYM_CACHE"] = str(cache)
    if headers_from is not None:  # a cold build cache whose precompiled headers are already made
        for part in ("torch_light", "torch_pch"):
            if (headers_from / part).exists():
                shutil.copytree(headers_from / part, cache / part, dirs_exist_ok=True)
    from kernelgym.tasks.loaders import task_from_source
    from kernelgym.workers.pool import EvalPool

    tasks = [task_from_source(c["task"], suite="bench", level=1, file_name=f"{i}_{c['name']}.py")
             for i, c in enumerate(all_cases)]
    out = {}
    with EvalPool(workers=workers, gpu=True) as pool:
        pool.evaluate(tasks[0], "syntax error(", backend="cuda", size="gpu")  # the workers are up
        for label in ("cold", "warm"):
            started = time.perf_counter()
            futures = [pool.submit(t, c["solution"], backend="cuda", size="gpu")
                       for t, c in zip(tasks, all_cases, strict=True)]
            results = [f.result() for f in futures]
            wall = time.perf_counter() - started
            timing_s = sum(r.stage_s.get("timing", 0.0) for r in results)
            out[label] = {
                "wall_s": round(wall, 2), "per_minute": round(60 * len(results) / wall, 1),
                "slot_busy": round(timing_s / wall, 3),  # one GPU: its timing slot's share of the wall time
                "rows": [{"name": c["name"], "verdict": r.verdict.value, "wall_s": r.wall_s,
                          "stage_s": r.stage_s, "build_s": r.build.build_s if r.build else None,
                          "speedup": r.speedup, "reason": (str(r.reasons[0])[:160] if r.reasons else "")}
                         for c, r in zip(all_cases, results)],
            }
    return out


def table(title: str, rows: list[dict], keys: list[str]) -> str:
    lines = [f"### {title}", "| case | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for row in rows:
        lines.append(f"| {row['name']} | " + " | ".join(str(row.get(k, "")) for k in keys) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path)
    parser.add_argument("--cuda-l1", type=Path)
    parser.add_argument("--l1-count", type=int, default=10)
    parser.add_argument("--l1-ids", default="", help="CUDA-L1 entries as level/task_id, comma-separated "
                                                     "(instead of the first --l1-count)")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--phases", default="torch,kernelgym,judge")
    parser.add_argument("--timeout-s", type=float, default=240)
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT", "."))
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    all_cases = cases(args.kernelbench, args.cuda_l1, args.l1_count, args.l1_ids)
    if args.only:
        all_cases = [c for c in all_cases if c["name"] in args.only.split(",")]
    phases = args.phases.split(",")
    report: dict = {"cases": [c["name"] for c in all_cases], "argv": sys.argv}
    import torch

    report["versions"] = {"torch": torch.__version__, "python": sys.version.split()[0],
                          "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                          "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    save = lambda: (out_dir / "cold_build_gpu.json").write_text(json.dumps(report, indent=1))
    cache = Path(tempfile.mkdtemp(prefix="kg-cache-"))
    if "torch" in phases:
        started = time.perf_counter()
        report["torch"] = phase_torch(all_cases, args.parallel, args.timeout_s)
        report["torch_wall_s"] = round(time.perf_counter() - started, 1)
        print(table("torch load_inline, fresh process", report["torch"],
                    ["build_s", "process_s", "forward_ms", "max_abs_err", "error"]), flush=True)
        save()
    if "kernelgym" in phases:
        started = time.perf_counter()
        report["kernelgym"] = phase_kernelgym(all_cases, args.parallel, args.timeout_s, cache)
        report["kernelgym_wall_s"] = round(time.perf_counter() - started, 1)
        print(f"headers warm-up {report['kernelgym']['warm_up_s']} s")
        print(table("kernelgym load_inline (split build), fresh process", report["kernelgym"]["rows"],
                    ["build_s", "process_s", "forward_ms", "max_abs_err", "error"]), flush=True)
        for row in report["kernelgym"]["rows"]:  # what the split build recorded about each extension
            for build in row.get("builds", []):
                print(" ", row["name"], {k: v for k, v in build.items() if v})
        save()
    if "judge" in phases:
        judge_cache = Path(tempfile.mkdtemp(prefix="kg-judge-cache-"))
        report["judge"] = phase_judge(all_cases, args.workers, judge_cache, cache if "kernelgym" in phases
                                      else None)
        for label in ("cold", "warm"):
            part = report["judge"][label]
            n = len(part["rows"])
            print(f"judge {label}: {part['wall_s']} s for {n}, {part['per_minute']} a minute, "
                  f"timing slot busy {part['slot_busy']:.0%}")
            keys = ["verdict", "wall_s", "build_s", "speedup", "stage_s", "reason"]
            print(table(f"judge, {label}", part["rows"], keys), flush=True)
        save()
    if "torch" in report and "kernelgym" in report:
        pairs = [(t, k) for t, k in zip(report["torch"], report["kernelgym"]["rows"])
                 if "build_s" in t and "build_s" in k]
        if pairs:
            speed = [t["build_s"] / k["build_s"] for t, k in pairs]
            ratio = [k["forward_ms"] / t["forward_ms"] for t, k in pairs
                     if t.get("forward_ms") and k.get("forward_ms")]
            summary = {"median_torch_build_s": statistics.median(t["build_s"] for t, _ in pairs),
                       "median_kernelgym_build_s": statistics.median(k["build_s"] for _, k in pairs),
                       "median_build_speedup": round(statistics.median(speed), 2),
                       "forward_ms_ratio_kernelgym_over_torch": [round(r, 3) for r in ratio]}
            report["summary"] = summary
            print(summary)
    save()


if __name__ == "__main__":
    main()
