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

    OUT=DIR python benchmarks/judge_speed/cold_build_gpu.py --kernelbench KB --cuda-l1 a100_pcie.json \
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

FEW_SHOT = ("add", "fuse_gelu", "tiled_matmul", "mnist2", "flash_attn")


def cases(kernelbench: Path | None, cuda_l1: Path | None, l1_count: int, l1_ids: str = "",
          own: Path | None = None) -> list[dict]:
    found = []
    if kernelbench is not None:
        folder = kernelbench / "src" / "kernelbench" / "prompts" / "few_shot"
        for name in FEW_SHOT:
            task, solution = folder / f"model_ex_{name}.py", folder / f"model_new_ex_{name}.py"
            if task.exists() and solution.exists():
                found.append({"name": f"kb_{name}", "task": task.read_text(),
                              "solution": solution.read_text()})
    if own is not None and kernelbench is not None:  # ours: l<level>_<id>_<name>.py answers that problem
        for solution in sorted(own.glob("l[123]_*.py")):
            level, _, problem = solution.stem[1:].partition("_")
            problem = problem.partition("-")[0]  # l1_12_Name-variant.py: another answer to the same problem
            task = kernelbench / "KernelBench" / f"level{level}" / f"{problem}.py"
            if task.exists():
                found.append({"name": f"own_{solution.stem}", "task": task.read_text(),
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


def variant(source: str, tag: str) -> str:
    """The same solution as a new candidate: a comment in its kernel source, so no cache has seen it."""
    return source.replace("__global__", f"/* {tag} */ __global__", 1)


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


def phase_kernelgym(all_cases: list[dict], parallel: int, timeout_s: float, cache: Path,
                    snapshot: Path) -> dict:
    from kernelgym.build import torch_ext_split

    env = dict(os.environ, KERNELGYM_CACHE=str(cache))
    os.environ["KERNELGYM_CACHE"] = str(cache)
    started = time.perf_counter()
    torch_ext_split.warm_up()
    warm_up_s = round(time.perf_counter() - started, 3)
    shutil.copytree(cache, snapshot, dirs_exist_ok=True)  # the machine's state once warmed, for the judge
    with ThreadPoolExecutor(parallel) as pool:
        rows = list(pool.map(lambda case: run_child("kernelgym", case, env, timeout_s), all_cases))
    return {"warm_up_s": warm_up_s, "rows": rows}


def triton_cases(count: int) -> list[dict]:
    """The bundled suite's Triton solutions (their tasks at the GPU size)."""
    from kernelgym import solutions

    return [{"name": f"triton_{s.path.stem}", "task_id": s.task_id, "solution": s.source}
            for s in solutions.examples("triton")[:count]]


def _row(case: dict, result, latency_s: float) -> dict:
    stage = result.stage_s
    return {"name": case["name"], "verdict": result.verdict.value, "latency_s": round(latency_s, 2),
            "wall_s": result.wall_s, "beyond_timing_s": round(result.wall_s - stage.get("timing", 0.0), 2),
            # the timing stage less its slot: the inputs made ahead and the slot's wait are done outside
            "beyond_slot_s": round(result.wall_s - stage.get("slot_held", 0.0), 2),
            "build_s": result.build.build_s if result.build else None, "speedup": result.speedup,
            "stage_s": stage, "reason": str(result.reasons[0])[:160] if result.reasons else ""}


def _one_at_a_time(pool, jobs: list[tuple[dict, object, str, str]]) -> list[dict]:
    rows = []
    for case, task, source, backend in jobs:
        started = time.perf_counter()
        result = pool.evaluate(task, source, backend=backend, size="gpu")
        rows.append(_row(case, result, time.perf_counter() - started))
        row = rows[-1]  # everything on the line: a step cut by its time limit keeps what it printed
        print(" ", row["name"], row["verdict"], row["latency_s"], "s; beyond timing", row["beyond_timing_s"],
              "s; build", row["build_s"], "s;", json.dumps(row["stage_s"]), flush=True)
    return rows


def phase_judge(all_cases: list[dict], triton: list[dict], workers: int, cache: Path,
                snapshot: Path | None, compare_spares: bool = False) -> dict:
    """Each candidate alone (the latency an env step sees): new, then the same again (warm)."""
    if snapshot is not None:  # a machine that has warmed up once: headers and the common binders made
        shutil.copytree(snapshot, cache, dirs_exist_ok=True)
    os.environ["KERNELGYM_CACHE"] = str(cache)
    from kernelgym.tasks.loaders import resolve_task, task_from_source
    from kernelgym.workers.pool import EvalPool

    cuda_jobs = [(c, task_from_source(c["task"], suite="bench", level=1, file_name=f"{i}_{c['name']}.py"),
                  c["solution"], "cuda") for i, c in enumerate(all_cases)]
    triton_jobs = [(c, resolve_task(c["task_id"]), c["solution"], "triton") for c in triton]
    out: dict = {}
    with EvalPool(workers=workers, gpu=True) as pool:
        started = time.perf_counter()
        first = pool.evaluate((cuda_jobs or triton_jobs)[0][1], "def forward(:\n", backend="cuda", size="gpu")
        out["syntax_error_first_ms"] = round(1e3 * (time.perf_counter() - started), 2)
        out["syntax_error_verdict"] = first.verdict.value
        for label in ("cold", "warm"):
            out[label] = _one_at_a_time(pool, cuda_jobs)
            out[f"triton_{label}"] = _one_at_a_time(pool, triton_jobs)
    if compare_spares:  # the same warm passes by workers that start each process when its job comes
        with EvalPool(workers=workers, gpu=True, spare_processes=False) as pool:
            out["warm_no_spares"] = _one_at_a_time(pool, cuda_jobs)
            out["triton_warm_no_spares"] = _one_at_a_time(pool, triton_jobs)
    return out


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


CURVE_STAGES = ("reference", "load", "init", "correctness", "timing_prepare", "slot_wait", "slot_held",
                "timing_inputs", "timing_map", "timing_run", "timing_check", "profile")


def _steady(done_at: list[float], workers: int) -> float | None:
    """Candidates a minute once every worker is busy and before the last ones drain: completions between
    the workers-th and the (count - workers)-th, over the time between them (None: too few candidates)."""
    times = sorted(done_at)
    first, last = workers - 1, len(times) - workers
    if last - first < workers or times[last] <= times[first]:
        return None
    return round(60 * (last - first) / (times[last] - times[first]), 1)


def phase_curve(all_cases: list[dict], worker_counts: list[int], count: int, cache: Path,
                warm_after: tuple[str, ...] = ()) -> list[dict]:
    """New KernelBench-format candidates (each case again with a fresh comment), all submitted at once to a
    pool that has judged one candidate per worker already: the steady rate an RL run sees step after step,
    not the pool's start."""
    os.environ["KERNELGYM_CACHE"] = str(cache)
    from kernelgym.tasks.loaders import task_from_source
    from kernelgym.workers.pool import EvalPool

    tasks = [task_from_source(c["task"], suite="bench", level=1, file_name=f"{i}_{c['name']}.py")
             for i, c in enumerate(all_cases)]

    def submit(pool, i: int, tag: str):
        case = i % len(tasks)
        return pool.submit(tasks[case], variant(all_cases[case]["solution"], f"{tag} c{i} {time.time_ns()}"),
                           backend="cuda", size="gpu")

    points = []
    for workers in worker_counts:
        with EvalPool(workers=workers, gpu=True) as pool:
            for future in [submit(pool, i, f"warm w{workers}") for i in range(workers)]:
                future.result()
            started = time.perf_counter()
            done_at: list[float] = []
            futures = [submit(pool, i, f"w{workers}") for i in range(count)]
            for future in futures:
                future.add_done_callback(lambda _, t0=started, out=done_at:
                                         out.append(time.perf_counter() - t0))
            results = [f.result() for f in futures]
            wall = time.perf_counter() - started
            points.append(_curve_point(workers, count, wall, results, done_at))
            print("curve", points[-1], flush=True)  # before anything else: a step cut short keeps it
            if warm_after:  # then a few cases alone in the same warmed pool: new, then again (warm)
                _one_at_a_time(pool, [(c, tasks[i], c["solution"], "cuda") for i, c in enumerate(all_cases)
                                      if c["name"] in warm_after] * 2)
    return points


def _curve_point(workers: int, count: int, wall: float, results: list, done_at: list[float]) -> dict:
    held = sum(r.stage_s.get("slot_held", 0.0) for r in results)
    verdicts: dict = {}
    for r in results:
        verdicts[r.verdict.value] = verdicts.get(r.verdict.value, 0) + 1
    stages = {name: _median([r.stage_s[name] for r in results if name in r.stage_s]) for name in CURVE_STAGES}
    return {"workers": workers, "candidates": count, "wall_s": round(wall, 1),
            "per_minute": round(60 * count / wall, 1), "steady_per_minute": _steady(done_at, workers),
            "done_at_s": [round(t, 2) for t in sorted(done_at)], "slot_busy": round(held / wall, 3),
            "median_eval_s": round(statistics.median(r.wall_s for r in results), 2),
            "median_build_s": _median([r.build.build_s for r in results if r.build and r.build.build_s]),
            "median_stage_s": stages, "verdicts": verdicts}


def table(title: str, rows: list[dict], keys: list[str]) -> str:
    lines = [f"### {title}", "| case | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for row in rows:
        lines.append(f"| {row['name']} | " + " | ".join(str(row.get(k, "")) for k in keys) + " |")
    return "\n".join(lines)


def print_judge(judge: dict) -> None:
    print(f"syntax error, first evaluation of a fresh pool: {judge['syntax_error_first_ms']} ms "
          f"({judge['syntax_error_verdict']})")
    keys = ["verdict", "latency_s", "wall_s", "beyond_timing_s", "beyond_slot_s", "build_s", "speedup",
            "stage_s", "reason"]
    for label in ("cold", "warm", "triton_cold", "triton_warm", "warm_no_spares", "triton_warm_no_spares"):
        rows = judge.get(label)
        if not rows:
            continue
        print(f"judge {label}: median latency {_median([r['latency_s'] for r in rows])} s, median beyond "
              f"timing {_median([r['beyond_timing_s'] for r in rows])} s, beyond the slot "
              f"{_median([r['beyond_slot_s'] for r in rows])} s, slot held "
              f"{_median([r['stage_s'].get('slot_held', 0.0) for r in rows])} s")
        print(table(f"judge, {label}, one at a time", rows, keys), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", type=Path, help="a KernelBench checkout (few-shot files, problems)")
    parser.add_argument("--own", type=Path, help="our own answers to KernelBench problems "
                                                 "(benchmarks/kb_format_cuda)")
    parser.add_argument("--cuda-l1", type=Path)
    parser.add_argument("--l1-count", type=int, default=10)
    parser.add_argument("--l1-ids", default="", help="CUDA-L1 entries as level/task_id, comma-separated "
                                                     "(instead of the first --l1-count)")
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--triton", type=int, default=5, help="bundled Triton solutions judged new and warm")
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--curve-workers", default="4,8,16")
    parser.add_argument("--curve-count", type=int, default=24)
    parser.add_argument("--curve-then-alone", default="", help="cases judged alone in each curve pool after "
                                                             "its rate, new then warm (comma-separated)")
    parser.add_argument("--cache", type=Path, help="kernelgym's build cache for the kernelgym phase (a "
                                                   "later call of the curve phase reuses it)")
    parser.add_argument("--phases", default="torch,kernelgym,judge")
    parser.add_argument("--compare-spares", action="store_true",
                        help="judge: the warm passes again by workers without spare processes")
    parser.add_argument("--timeout-s", type=float, default=240)
    args = parser.parse_args()
    out_dir = Path(os.environ.get("OUT", "."))
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    all_cases = cases(args.kernelbench, args.cuda_l1, args.l1_count, args.l1_ids, args.own)
    if args.only:
        all_cases = [c for c in all_cases if c["name"] in args.only.split(",")]
    phases = args.phases.split(",")
    report: dict = {"cases": [c["name"] for c in all_cases], "argv": sys.argv}
    import torch

    report["versions"] = {"torch": torch.__version__, "python": sys.version.split()[0],
                          "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                          "cores": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    save = lambda: (out_dir / "cold_build_gpu.json").write_text(json.dumps(report, indent=1))
    cache = args.cache or Path(tempfile.mkdtemp(prefix="kg-cache-"))
    snapshot = cache.with_name(cache.name + "-after-warm-up")
    if "torch" in phases:
        started = time.perf_counter()
        report["torch"] = phase_torch(all_cases, args.parallel, args.timeout_s)
        report["torch_wall_s"] = round(time.perf_counter() - started, 1)
        print(table("torch load_inline, fresh process", report["torch"],
                    ["build_s", "process_s", "forward_ms", "max_abs_err", "error"]), flush=True)
        save()
    if "kernelgym" in phases:
        started = time.perf_counter()
        report["kernelgym"] = phase_kernelgym(all_cases, args.parallel, args.timeout_s, cache, snapshot)
        report["kernelgym_wall_s"] = round(time.perf_counter() - started, 1)
        print(f"headers warm-up {report['kernelgym']['warm_up_s']} s")
        print(table("kernelgym load_inline (split build), fresh process", report["kernelgym"]["rows"],
                    ["build_s", "process_s", "forward_ms", "max_abs_err", "error"]), flush=True)
        for row in report["kernelgym"]["rows"]:  # what the split build recorded about each extension
            for build in row.get("builds", []):
                print(" ", row["name"], {k: v for k, v in build.items() if v})
        save()
    judge_cache = cache.with_name(cache.name + "-judge")
    if "judge" in phases:
        report["judge"] = phase_judge(all_cases, triton_cases(args.triton), args.workers, judge_cache,
                                      snapshot if snapshot.exists() else None, args.compare_spares)
        print_judge(report["judge"])
        save()
    if "curve" in phases:
        counts = [int(w) for w in args.curve_workers.split(",")]
        report["curve"] = phase_curve(all_cases, counts, args.curve_count, judge_cache,
                                      tuple(filter(None, args.curve_then_alone.split(","))))
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
