"""kernelgym against a plain KernelBench-style evaluation on one GPU, in one run (writes a markdown report).

    python benchmarks/judge_speed/gpu_results.py [--repeats 4] [--workers 4] [--out FILE.md]

1. Wall time per evaluation, cold (a source never built) and warm (the same source again), for a
   KernelBench-format load_inline solution, the lean CUDA form and Triton.
2. For the same solutions: the speedup each path measures, their agreement, and the repeat-to-repeat
   coefficient of variation of kernelgym's speedup.
3. Throughput: a batch of new candidates through a pool of several workers on one GPU (builds overlap,
   timing holds the device lock), as evaluations per minute and the share of the wall time the timing slot
   was busy.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch
from eval_speed import fresh  # a source no cache has seen (benchmarks/ is on sys.path when run as a script)

import kernelgym
from kernelgym.solutions import examples
from kernelgym.stats import median
from kernelgym.tasks import bundled

HERE = Path(__file__).parent
KB_STYLE = HERE.parent / "kernelbench_style"  # the KernelBench-style harness and sources
HARNESS = KB_STYLE / "harness.py"


@dataclass
class Mode:
    """Where the script runs: the GPU for real, or `--smoke`: every phase with cpp solutions at the cpu size,
    so the script itself is checked on a machine without a GPU before it spends device time."""

    size: str = "gpu"
    device: str = "cuda"
    smoke: bool = False

    def backend(self, backend: str) -> str:
        return "cpp" if self.smoke else backend


MODE = Mode()
PHASES = ("wall", "agreement", "throughput", "ncu", "load_inline")
# Tasks large enough that a launch is well past launch overhead at the gpu size.
AGREEMENT = [("cuda", "L1/10_Softmax"), ("cuda", "L1/16_RMSNorm"), ("cuda", "L1/2_Matmul_Square"),
             ("triton", "L1/15_LayerNorm"), ("triton", "L2/1_Gemm_BiasAdd_ReLU")]


@dataclass
class Solution:
    label: str
    backend: str
    task_id: str
    path: Path  # the file both paths evaluate

    @property
    def source(self) -> str:
        return self.path.read_text()


def example_solution(backend: str, task_id: str) -> Solution | None:
    backend = MODE.backend(backend)
    example = next((e for e in examples(backend) if e.task_id.endswith(task_id)), None)
    return example and Solution(f"{backend} {task_id}", backend, task_id, Path(example.path))


def task_file(task_id: str) -> Path:
    path = Path(tempfile.gettempdir()) / f"kg_results_{task_id.replace('/', '_')}.py"
    path.write_text(bundled().get(task_id).source_at(MODE.size))
    return path


def kernelbench_style(solution: Solution, source: str, caches: Path) -> dict:
    """One fresh process: import, 5 correctness trials, 100 timed trials per side (CUDA events, mean)."""
    path = caches / f"solution_{uuid.uuid4().hex[:8]}.py"
    path.write_text(source)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(caches / "torch_ext"),
           "KERNELGYM_CACHE": str(caches / "kg")}
    started = time.perf_counter()
    out = subprocess.run([sys.executable, str(HARNESS), str(task_file(solution.task_id)), str(path),
                          MODE.device],
                         capture_output=True, text=True, env=env, timeout=300, check=False)
    wall = time.perf_counter() - started
    if out.returncode != 0:
        return {"wall_s": wall, "error": out.stderr[-800:]}
    return {"wall_s": wall, **json.loads(out.stdout.strip().splitlines()[-1])}


def kernelgym_eval(pool, solution: Solution, source: str, **options) -> dict:
    started = time.perf_counter()
    result = pool.evaluate(bundled().get(solution.task_id), source, backend=solution.backend, size=MODE.size,
                           **options)
    wall = time.perf_counter() - started
    timed = result.stage_s.get("timing", 0.0) + result.stage_s.get("profile", 0.0)
    timing = result.timing
    return {"wall_s": wall, "verdict": result.verdict.value, "speedup": result.speedup,
            "harness_s": wall - timed,
            "stage_s": result.stage_s, "reasons": result.reasons[:1], "ref_ms": result.ref_runtime_ms,
            "cand_ms": result.runtime_ms, "sync_cost_ms": None,  # the judge no longer times in-process
            "ref_pre_import_ms": None, "round_trip_ms": timing and timing.round_trip_ms,
            "readback_lag_ms": timing and timing.readback_lag_ms}


def wall_times(pool, solutions: list[Solution], caches: Path) -> list[dict]:
    rows = []
    for solution in solutions:
        new = fresh(solution.source)
        ours = [kernelgym_eval(pool, solution, new) for _ in range(2)]  # cold, then warm
        cache = Path(tempfile.mkdtemp(dir=caches))
        theirs = [kernelbench_style(solution, new, cache) for _ in range(2)]  # cold, then warm (same caches)
        rows.append({"solution": solution.label, "kernelgym": ours, "kernelbench_style": theirs})
        print("wall", solution.label, json.dumps(rows[-1]), flush=True)
    return rows


def agreement(pool, solutions: list[Solution], repeats: int, caches: Path) -> list[dict]:
    """Each solution `repeats` times through kernelgym's judge, as configured by default and without taking
    the calibrated synchronize cost off the timed calls (to show what that changes), then once through the
    KernelBench-style harness."""
    rows = []
    for solution in solutions:
        source = solution.source
        ours, raw = [], []
        for _ in range(repeats):  # alternating, so that a drift of the device affects both alike
            ours.append(kernelgym_eval(pool, solution, source))
            raw.append(kernelgym_eval(pool, solution, source, subtract_sync_cost=False))
        theirs = kernelbench_style(solution, source, caches)
        speedups = [r["speedup"] for r in ours if r["speedup"]]
        rows.append({"solution": solution.label, "kernelgym_speedups": speedups, "kernelbench_style": theirs,
                     "verdicts": [r["verdict"] for r in ours], "runs": ours,
                     "raw_speedups": [r["speedup"] for r in raw if r["speedup"]], "raw_runs": raw})
        print("agree", solution.label, json.dumps(rows[-1]), flush=True)
    return rows


def empty_region() -> dict:
    """The fixed cost inside one timed region: kernelgym's (L2 flush outside, whole-device sync inside) and
    events alone on the current stream (the KernelBench-style harness), around a call that does nothing."""
    from kernelgym.evaluation.timing import Timer

    if MODE.device != "cuda":
        return None
    raw = Timer("cuda", subtract_sync_cost=False)
    ours = sorted(raw.time_call(lambda: None) for _ in range(200))
    calibrated = Timer("cuda")
    sync_cost = calibrated.calibrate()
    after = sorted(calibrated.time_call(lambda: None) for _ in range(200))
    events = []
    for _ in range(200):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        end.record()
        torch.cuda.synchronize()
        events.append(begin.elapsed_time(end))
    events.sort()
    return {"kernelgym_ms": median(ours), "events_only_ms": median(events),
            "sync_cost_ms": sync_cost, "kernelgym_calibrated_ms": median(after)}


def ncu_cost(pool) -> list[dict]:
    """The opt-in Nsight Compute pass: what it adds to an evaluation. With the default sandbox the profiled
    process runs as `nobody` when kernelgym runs as root; if that gives no counters, the same without the
    privilege drop, to tell the two causes apart."""
    from kernelgym.workers.sandbox import SandboxConfig

    rows = _ncu_rows(pool, "default sandbox")
    timed_out = any("ran past" in row["note"] for row in rows)
    if not any(row["kernels"] for row in rows) and not timed_out:
        with kernelgym.EvalPool(workers=1, sandbox=SandboxConfig(drop_privileges=False)) as privileged:
            rows += _ncu_rows(privileged, "no privilege drop")
    return rows


def _ncu_rows(pool, label: str) -> list[dict]:
    rows = []
    for backend in ("cuda", "triton"):
        solution = example_solution(backend, "L1/1_ReLU")
        task = bundled().get(solution.task_id)
        plain = pool.evaluate(task, solution.source, backend=solution.backend, size=MODE.size)
        profiled = pool.evaluate(task, solution.source, backend=solution.backend, size=MODE.size, ncu=True)
        kernels = profiled.profile.kernels if profiled.profile else []
        note = profiled.profile.ncu_note if profiled.profile else "; ".join(profiled.reasons)[:300]
        rows.append({"solution": f"{solution.label} ({label})", "plain_s": plain.wall_s,
                     "ncu_s": profiled.wall_s, "ncu_stage_s": profiled.stage_s.get("ncu"),
                     "verdict": profiled.verdict.value, "note": note,
                     "kernels": [k.__dict__ for k in kernels[:3]]})
        print("ncu", json.dumps(rows[-1]), flush=True)
        if "ran past" in rows[-1]["note"]:  # the next one would most likely wait as long
            break
    return rows


def throughput(solutions: list[Solution], workers: int, copies: int) -> dict:
    """`copies` new sources of each solution (each needs its own build) through a pool of `workers`."""
    jobs = [(s, fresh(s.source)) for s in solutions for _ in range(copies)]
    with kernelgym.EvalPool(workers=workers) as pool:
        pool.evaluate(bundled().get(solutions[0].task_id), solutions[0].source, backend=solutions[0].backend,
                      size=MODE.size)  # workers up, one-time imports done
        started = time.perf_counter()
        futures = [pool.submit(bundled().get(s.task_id), src, backend=s.backend, size=MODE.size)
                   for s, src in jobs]
        results = [f.result() for f in futures]
        wall = time.perf_counter() - started
    slot_s = sum(r.stage_s.get("timing", 0.0) + r.stage_s.get("profile", 0.0) for r in results)
    serial_s = sum(r.wall_s for r in results)
    return {"workers": workers, "evaluations": len(results), "wall_s": wall,
            "per_minute": 60 * len(results) / wall, "timing_slot_busy": slot_s / wall,
            "sum_of_evaluation_walls_s": serial_s, "verdicts": [r.verdict.value for r in results]}


def _fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def report(args, data: dict) -> str:
    walls, agree, through, ncu_rows = data["wall"], data["agreement"], data["throughput"], data["ncu"]
    lines = [
        "# kernelgym vs a KernelBench-style evaluation on one GPU",
        "",
        (f"- date: {datetime.date.today()}; machine: {_machine()}, {os.cpu_count()} cores; "
         f"python {platform.python_version()}, torch {torch.__version__}, triton {_triton_version()}, "
         f"kernelgym {kernelgym.__version__}"),
        (f"- command: `python benchmarks/judge_speed/gpu_results.py --repeats {args.repeats} "
         f"--workers {args.workers} "
         f"--phases {args.phases}` "
         "(through `bash benchmarks/gpu/gpu_run.sh results` on the H200 host)"),
        ("- KernelBench-style: `benchmarks/kernelbench_style/harness.py`, a fresh process per evaluation "
         "that imports the solution next to the reference, runs 5 correctness trials, then 100 timed trials "
         "per side with CUDA events (mean); its caches (torch extensions, kernelgym's native builds) start "
         "empty for the cold run."),
        ("- kernelgym: one warm pool of 1 worker; the full judge (static check, reference process, sandboxed "
         "candidate, 5 correctness trials, interleaved timing with L2 flush and whole-device sync, spot "
         "checks, profile). Harness = wall time less the timing and profile stages."),
        "",
        "## Wall time per evaluation (seconds)",
        "",
        ("| solution | kernelgym cold | kernelgym warm | kernelgym warm harness | KB-style cold | "
         "KB-style warm | kernelgym verdict |"),
        "|---|---|---|---|---|---|---|",
    ]
    for row in walls:
        ours, theirs = row["kernelgym"], row["kernelbench_style"]
        lines.append(f"| {row['solution']} | {_fmt(ours[0]['wall_s'])} | {_fmt(ours[1]['wall_s'])} | "
                     f"{_fmt(ours[1]['harness_s'])} | {_kb(theirs[0])} | {_kb(theirs[1])} | "
                     f"{ours[1]['verdict']} |")
    lines += ["", "Stages of the cold kernelgym evaluations: " + "; ".join(
        f"{row['solution']}: {json.dumps(row['kernelgym'][0]['stage_s'])}" for row in walls), ""]
    lines += [
        "## Speedup agreement and repeatability",
        "",
        (f"kernelgym: median over {args.repeats} evaluations of the same file (each with fresh hidden "
         "inputs); CV = standard deviation / mean of those speedups. KB-style: one run, mean times."),
        "",
        ("| solution | kernelgym speedup | CV | KB-style speedup | difference | "
         "without sync-cost subtraction (CV) | KB-style correct |"),
        "|---|---|---|---|---|---|---|",
    ]
    diffs, cvs = [], []
    for row in agree:
        sp = row["kernelgym_speedups"]
        ours = median(sp, default=None)
        cv = statistics.pstdev(sp) / statistics.mean(sp) if len(sp) > 1 else None
        theirs = row["kernelbench_style"].get("speedup")
        diff = (ours / theirs - 1) if ours and theirs else None
        if diff is not None:
            diffs.append(abs(diff))
        if cv is not None:
            cvs.append(cv)
        raw = row.get("raw_speedups") or []
        raw_cv = statistics.pstdev(raw) / statistics.mean(raw) if len(raw) > 1 else None
        lines.append(f"| {row['solution']} | {_fmt(ours, 3)} | {_fmt(cv and 100 * cv, 2)}% | "
                     f"{_fmt(theirs, 3)} | {_fmt(diff and 100 * diff, 1)}% | "
                     f"{_fmt(median(raw, default=None), 3)} ({_fmt(raw_cv and 100 * raw_cv, 2)}%) | "
                     f"{row['kernelbench_style'].get('correct', 'error')} |")
    lines += ["", ("Times per side (ms; kernelgym: medians over the repeats of each evaluation's median, "
                   "with the reference alone before the candidate's import and the calibrated sync cost; "
                   "KB-style: means):"), "",
              ("| solution | kernelgym reference | kernelgym candidate | reference before import | sync cost "
               "| KB-style reference | KB-style candidate |"), "|---|---|---|---|---|---|---|"]
    for row in agree:
        runs, theirs = row.get("runs", []), row["kernelbench_style"]
        lines.append(f"| {row['solution']} | {_fmt(median([r['ref_ms'] for r in runs], default=None), 4)} | "
                     f"{_fmt(median([r['cand_ms'] for r in runs], default=None), 4)} | "
                     f"{_fmt(median([r['ref_pre_import_ms'] for r in runs], default=None), 4)} | "
                     f"{_fmt(median([r['sync_cost_ms'] for r in runs], default=None), 4)} | "
                     f"{_fmt(theirs.get('ref_ms'), 4)} | {_fmt(theirs.get('new_ms'), 4)} |")
    empty = data.get("empty_region")
    if empty:
        lines += ["", ("Fixed cost of an empty timed region (median of 200): kernelgym "
                       f"{1e3 * empty['kernelgym_ms']:.1f} us (whole-device sync inside), events alone "
                       f"{1e3 * empty['events_only_ms']:.1f} us; calibrated sync cost "
                       f"{1e3 * empty['sync_cost_ms']:.1f} us, after which an empty region measures "
                       f"{1e3 * empty['kernelgym_calibrated_ms']:.1f} us.")]
    if diffs:
        lines += ["", (f"Median |difference| {100 * median(diffs):.1f}%, largest {100 * max(diffs):.1f}%; "
                       f"within 5% for {sum(d <= 0.05 for d in diffs)}/{len(diffs)}. "
                       f"Median CV {100 * median(cvs):.2f}%, largest {100 * max(cvs):.2f}%; "
                       f"at most 2% for {sum(c <= 0.02 for c in cvs)}/{len(cvs)}.")]
    if through:
        lines += [
            "",
            "## Throughput on one GPU",
            "",
            (f"{through['evaluations']} new candidates (each its own build) through a pool of "
             f"{through['workers']} workers: {through['wall_s']:.1f} s wall, **{through['per_minute']:.1f} "
             "evaluations per minute**; the timing slot (device lock, held for timing and profiling) was "
             f"busy {100 * through['timing_slot_busy']:.0f}% of the wall time. The same evaluations one at a "
             f"time would take about {through['sum_of_evaluation_walls_s']:.1f} s (sum of their walls). "
             f"Verdicts: {_counts(through['verdicts'])}."),
            "",
        ]
    lines += ["", "## Nsight Compute pass (opt-in: `ncu=True`)", "",
              "| solution | evaluation s | with ncu s | ncu stage s | note | first kernel |",
              "|---|---|---|---|---|---|"]
    for row in ncu_rows:
        first = row["kernels"][0] if row["kernels"] else {}
        summary = (f"{first.get('kernel', '')[:40]}: mem {_fmt(first.get('memory_throughput_pct'), 0)}%, sm "
                   f"{_fmt(first.get('compute_throughput_pct'), 0)}%, occ "
                   f"{_fmt(first.get('achieved_occupancy_pct'), 0)}%, "
                   f"{_fmt(first.get('registers_per_thread'), 0)} regs") if first else "-"
        lines.append(f"| {row['solution']} | {_fmt(row['plain_s'])} | {_fmt(row['ncu_s'])} | "
                     f"{_fmt(row['ncu_stage_s'])} | {row['note'].replace('|', '/')} | {summary} |")
    return "\n".join(lines) + "\n"


def _machine() -> str:
    if MODE.device == "cuda":
        return torch.cuda.get_device_name()
    return f"{platform.processor() or platform.machine()} (--smoke: cpp solutions at the cpu size)"


def _kb(run: dict) -> str:
    return f"{run['wall_s']:.2f}" + (" (failed)" if "error" in run else "")


def _counts(verdicts: list[str]) -> str:
    return ", ".join(f"{v} {verdicts.count(v)}" for v in sorted(set(verdicts)))


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except ImportError:
        return "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--copies", type=int, default=2,
                        help="new sources per solution in the throughput batch")
    parser.add_argument("--out", default=str(HERE.parent / "results" / "judge_speed" / "gpu_results.md"))
    parser.add_argument("--smoke", action="store_true",
                        help="no GPU: every phase with cpp solutions at the cpu size")
    parser.add_argument("--phases", default=",".join(PHASES),
                        help=f"comma-separated subset of {','.join(PHASES)}")
    args = parser.parse_args()
    global MODE
    MODE = Mode("cpu", "cpu", smoke=True) if args.smoke else Mode()
    if not args.smoke and not torch.cuda.is_available():
        sys.exit("gpu_results.py needs a CUDA GPU (or --smoke)")
    caches = Path(tempfile.mkdtemp(prefix="kg-results-"))
    kb_file = "relu_cpp_load_inline.py" if args.smoke else "relu_cuda_load_inline.py"
    load_inline = Solution(f"{MODE.backend('cuda')} L1/1_ReLU (KernelBench format, load_inline)",
                           MODE.backend("cuda"), "L1/1_ReLU", KB_STYLE / kb_file)
    agree_set = [s for s in (example_solution(b, t) for b, t in AGREEMENT) if s is not None]
    if args.smoke:  # every phase once: each more solution is one more of torch's own builds (~30 s, 2 cores)
        agree_set = agree_set[:1]
    relu = [example_solution(b, "L1/1_ReLU") for b in ("cuda", "triton")]
    data = {"wall": [], "agreement": [], "throughput": None, "ncu": [], "empty_region": None}

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every phase: a run cut short still leaves what it measured
        Path(args.out).with_suffix(".json").write_text(json.dumps(data, indent=1))
        Path(args.out).write_text(report(args, data))

    phases = set(args.phases.split(","))
    if phases - set(PHASES):
        sys.exit(f"unknown phase(s) {sorted(phases - set(PHASES))}; known: {', '.join(PHASES)}")
    # Cheapest and most important first; ncu (may run into its limit) and the KernelBench-format build last.
    data["empty_region"] = empty_region()
    print("empty_region", json.dumps(data["empty_region"]), flush=True)
    with kernelgym.EvalPool(workers=1) as pool:
        # warm up
        pool.evaluate(bundled().get("L1/1_ReLU"), relu[0].source, backend=relu[0].backend, size=MODE.size)
        if "wall" in phases:
            data["wall"] += wall_times(pool, relu[:1] if args.smoke else relu, caches)
            save()
        if "agreement" in phases:
            data["agreement"] = agreement(pool, agree_set, args.repeats, caches)
            save()
    if "throughput" in phases:
        data["throughput"] = throughput(agree_set, args.workers, args.copies)
        print("throughput", json.dumps(data["throughput"]), flush=True)
        save()
    if "ncu" in phases:
        with kernelgym.EvalPool(workers=1) as pool:
            data["ncu"] = ncu_cost(pool)
        save()
    if "load_inline" in phases:
        with kernelgym.EvalPool(workers=1) as pool:
            data["wall"] += wall_times(pool, [load_inline], caches)
        save()
    print(Path(args.out).read_text())


if __name__ == "__main__":
    main()
