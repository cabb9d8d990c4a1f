"""The Ray evaluator on 1, 2 and 4 (or 8) GPUs of one host: the same new candidates at each GPU count.

For each GPU count N (one call each), a local Ray cluster sees GPUs 0..N-1 and N times one GPU's share of the
host's cores (the process is pinned to those cores, so an N-GPU run has what N GPUs of a fully used host
have); `RayEvalPool` places one actor per GPU, each with its own timing slot, core slice and workers. The
candidates are judged in a private build cache, copied from one warmed once (torch's headers and the common
binders), so every candidate is new in it and every run builds the same things. Each run writes
ray_multi_gpu_<N>.json: evaluations per minute, each GPU's timing-slot busy fraction (its evaluations'
`stage_s["slot_held"]` over the run's wall time), and every candidate's verdict and timing. `--report` merges
the runs: the rate against the 1-GPU run, verdicts identical or not, timings against the 1-GPU run's.

The candidates (`--candidates`, default 100, in a fixed order): the bundled Triton solutions (40%), the
bundled lean CUDA solutions (`load_cuda`, 40%) and KernelBench-format CUDA (`load_inline`: the bundled
ReLU sources of benchmarks/, plus benchmarks/kb_format_cuda/ answers to KernelBench problems when
`--kernelbench DIR` names a checkout), each one made new by a marker in its kernel source.

On the GPU host (H200s, torch 2.11, triton 3.6; no internet), one device call per GPU count on the
`nvidia-h200-x4` kind (or `-x8`, adding `--gpus 8`), carrying `.whl` (from
`bash benchmarks/gpu/ray_wheels.sh`):

    pip install -q --no-index --find-links .whl ray; export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
    python3 benchmarks/scale/ray_multi_gpu.py --gpus 1 --out "$OUT" [--kernelbench DIR]
    # the next calls: the same with --gpus 2, then --gpus 4 (then --gpus 8 on an 8-GPU host)
    # here, over the files that came back (ray_multi_gpu_<N>.json of each call):
    python benchmarks/scale/ray_multi_gpu.py --report DIR/ray_multi_gpu_*.json --out benchmarks/results/scale

DIR is a KernelBench checkout carried along, e.g. made here by `mkdir .kb && git --git-dir=/work/.mirror/
ScalingIntelligence+KernelBench/repo archive HEAD KernelBench | tar -x -C .kb` (`.kb` ignored, in `carry`).

Each call must end within 10 minutes: the warm-up of the seed cache (at most 180 s, before the clock), then
100 candidates: about 4-5 minutes on one GPU at the 24 new candidates a minute that one H200 with 8 workers
sustained (benchmarks/results/judge_speed/cold_build_gpu.md), less on more GPUs. Nothing new starts
`--deadline-s` (540 s) after
the process started; the candidates left out are listed, and the report compares the candidates every run
finished (the table gives the count).

`--smoke` runs the whole path on the CPU with fake GPUs (`ray.init(num_gpus=N)`, cpp candidates, 1 and 2
GPUs, a few candidates): tests/distributed/test_ray_multi_gpu_bench.py runs it in CI.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAST_JUDGE = {"timing_trials": 10, "timing_budget_s": 0.5}  # --smoke: the CPU tests' fast judge
AGREE = 0.10  # timings agree when the speedups differ by less than this, or their intervals overlap


# the candidates -------------------------------------------------------------------------------------------

def _kb_format_sources() -> list[str]:
    """KernelBench-format CUDA ReLU answers shipped with the benchmarks (load_inline, the extension built at
    import)."""
    sys.path.insert(0, str(HERE.parent / "judge_trust"))
    from judge_gpu import RELU_SOLUTION

    return [RELU_SOLUTION, (HERE.parent / "kernelbench_style" / "relu_cuda_load_inline.py").read_text()]


def _own_answers(kernelbench: Path | None) -> list[dict]:
    """benchmarks/kb_format_cuda/l<level>_<id>_<name>.py with the KernelBench problem it answers."""
    if kernelbench is None:
        return []
    found = []
    for path in sorted((HERE.parent / "kb_format_cuda").glob("l[123]_*.py")):
        level, _, problem = path.stem[1:].partition("_")
        task = kernelbench / "KernelBench" / f"level{level}" / f"{problem}.py"
        if task.exists():
            found.append({"kind": "kb_format", "name": path.stem, "task_source": task.read_text(),
                          "backend": "cuda", "source": path.read_text()})
    return found


def base_candidates(smoke: bool, kernelbench: Path | None) -> dict[str, list[dict]]:
    """The distinct solutions of each kind, before they are made new."""
    from kernelgym.solutions import examples

    def bundled(backend: str, kind: str) -> list[dict]:
        return [{"kind": kind, "name": e.path.stem, "task_id": e.task_id, "backend": e.backend,
                 "source": e.source} for e in examples(backend)]

    if smoke:
        return {"cpp": bundled("cpp", "cpp")[:3]}
    relu = "bundled/L1/1_ReLU"
    kb = [{"kind": "kb_format", "name": f"relu_load_inline_{i}", "task_id": relu, "backend": "cuda",
           "source": s} for i, s in enumerate(_kb_format_sources())]
    return {"triton": bundled("triton", "triton"), "cuda": bundled("cuda", "cuda"),
            "kb_format": _own_answers(kernelbench) + kb}


def make_new(source: str, backend: str, tag: str, copy: int) -> str:
    """The solution as a candidate no cache has seen: a marker in its kernel source (C++ and CUDA), or, for
    Triton (whose build is keyed by the kernel's TTIR, which carries source lines), `copy` lines more above
    the kernel."""
    if backend == "triton":
        return f"# {tag}\n" + "#\n" * copy + source
    for anchor in ("__global__", "#include <cstdint>", 'extern "C"'):
        if anchor in source:
            return source.replace(anchor, f"/* {tag} */ {anchor}", 1)
    return source + f"\n# {tag}\n"


def candidates(count: int, smoke: bool, kernelbench: Path | None) -> list[dict]:
    """`count` candidates, the kinds interleaved (Triton, CUDA, Triton, CUDA, KernelBench-format, ...: 40%,
    40%, 20%), each kind's solutions taken in turn; the i-th is the same on every run."""
    kinds = base_candidates(smoke, kernelbench)
    pattern = ["cpp"] if smoke else ["triton", "cuda", "triton", "cuda", "kb_format"]
    used = dict.fromkeys(kinds, 0)
    out = []
    for i in range(count):
        kind = pattern[i % len(pattern)]
        pool = kinds[kind]
        base = pool[used[kind] % len(pool)]
        copy = used[kind] // len(pool)
        used[kind] += 1
        tag = f"ray_multi_gpu candidate {i}"
        out.append({**base, "id": f"{i:03d}_{base['name']}",
                    "source": make_new(base["source"], base["backend"], tag, copy)})
    return out


# one run ----------------------------------------------------------------------------------------------------

def warm_cache(folder: Path, smoke: bool) -> None:
    """torch's headers and the common binders, built once (not timed) and copied into each run's cache."""
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    if smoke:
        return
    env = {**os.environ, "KERNELGYM_CACHE": str(folder)}
    try:
        subprocess.run([sys.executable, "-m", "kernelgym.build.torch_ext_split"], env=env, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=180)
    except subprocess.TimeoutExpired:  # the first builds of every run make what is missing
        pass


HOST_CORES = sorted(os.sched_getaffinity(0))  # before any run pins this process
STARTED = time.monotonic()


def confine(gpus: int, cores_per_gpu: int, smoke: bool) -> dict:
    """What this run's cluster has: GPUs 0..N-1 and N GPUs' share of the cores (this process pinned to them,
    and with it the Ray processes it starts)."""
    if not smoke:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(gpus))
    cores = HOST_CORES[: max(1, min(len(HOST_CORES), gpus * cores_per_gpu))]
    if not smoke:
        os.sched_setaffinity(0, cores)
    return {"num_gpus": gpus, "num_cpus": gpus * cores_per_gpu, "include_dashboard": False,
            "log_to_driver": False}


def _task(candidate: dict, index: int):
    from kernelgym.tasks.loaders import resolve_task, task_from_source

    if "task_source" in candidate:
        return task_from_source(candidate["task_source"], suite="bench", level=1,
                                file_name=f"{index}_{candidate['name']}.py")
    return resolve_task(candidate["task_id"])


def _row(candidate: dict, result) -> dict:
    timing = result.timing
    return {"id": candidate["id"], "kind": candidate["kind"], "verdict": result.verdict.value,
            "reason": str(result.reasons[0])[:160] if result.reasons else "",
            "speedup": result.speedup, "runtime_ms": result.runtime_ms, "wall_s": result.wall_s,
            "ci": [timing.speedup_ci_low, timing.speedup_ci_high] if timing and timing.available else None,
            "slot_held_s": result.stage_s.get("slot_held", 0.0),
            "slot_wait_s": result.stage_s.get("slot_wait")}


def judge_all(pool, items: list[dict], options: dict, deadline_s: float) -> tuple[list[dict], float]:
    """Every candidate submitted at once (the pool bounds what runs); those not started by the deadline are
    cancelled. Returns the rows in candidate order and the wall time from the first submission."""
    started = time.monotonic()
    futures = [pool.submit(_task(c, i), c["source"], backend=c["backend"], size=options.get("size"),
                           **{k: v for k, v in options.items() if k != "size"}) for i, c in enumerate(items)]
    rows, last = [], started
    for candidate, future in zip(items, futures, strict=True):
        remaining = deadline_s - (time.monotonic() - started)
        if remaining <= 0:
            future.cancel()
        try:
            result = future.result(timeout=max(remaining, 0) + 300)
        except Exception as exc:  # noqa: BLE001 - cancelled at the deadline: left out of this run
            print(json.dumps({"id": candidate["id"], "left_out": type(exc).__name__}), flush=True)
            continue
        last = max(last, time.monotonic())
        rows.append(_row(candidate, result))
        print(json.dumps({k: rows[-1][k] for k in ("id", "verdict", "speedup", "wall_s")}), flush=True)
    return rows, last - started


def _started(ray, pool, timeout_s: float = 120.0) -> list[dict]:
    """Every actor's info once all its workers run (started in the background, before the clock)."""
    deadline = time.monotonic() + timeout_s
    while True:
        infos = ray.get([actor.info.remote() for actor in pool.actors])
        if all(len(i["worker_pids"]) == i["workers"] for i in infos) or time.monotonic() > deadline:
            return infos
        time.sleep(0.5)


def run_count(gpus: int, items: list[dict], args, cache_seed: Path) -> dict:
    import ray

    from kernelgym.distributed import RayEvalPool, RayPoolConfig
    from kernelgym.workers.pool import PoolConfig

    ray.init(**confine(gpus, args.cores_per_gpu, args.smoke))
    cache = Path(tempfile.mkdtemp(prefix=f"kg-ray-{gpus}gpu-"))
    shutil.copytree(cache_seed, cache, dirs_exist_ok=True)
    os.chmod(cache, 0o755)
    options = {**FAST_JUDGE, "size": "cpu"} if args.smoke else {"size": "gpu"}
    # the headers are warm already; workers started before the clock (as a long-lived pool's are)
    config = RayPoolConfig(gpu=True, cache_dir=str(cache), pool=PoolConfig(warm_builds=False, prestart=True))
    try:
        with RayEvalPool(config) as pool:
            infos = _started(ray, pool)
            left_s = args.deadline_s - (time.monotonic() - STARTED)
            rows, wall = judge_all(pool, items, options, left_s)
            stats = pool.stats()
    finally:
        ray.shutdown()
        shutil.rmtree(cache, ignore_errors=True)
    return {"gpus": gpus, "candidates": len(items), "judged": len(rows), "wall_s": round(wall, 2),
            "per_minute": round(60 * len(rows) / wall, 2) if wall > 0 else None,
            "actors": [{"gpu_ids": i["gpu_ids"], "lock_dir": i["lock_dir"], "cores": len(i["cores"]),
                        "workers": i["workers"], "done": s["done"], "slot_held_s": s["slot_held_s"],
                        "busy_fraction": round(s["slot_held_s"] / wall, 3) if wall > 0 else None}
                       for i, s in zip(infos, stats, strict=True)],
            "rows": rows}


# the report -----------------------------------------------------------------------------------------------

def timings_agree(a: dict, b: dict) -> bool:
    """Two timings of one candidate agree: speedups within AGREE of each other, or 95% intervals that
    overlap (the run-to-run noise the judge itself reports)."""
    if a["speedup"] is None or b["speedup"] is None:
        return a["speedup"] is None and b["speedup"] is None
    if abs(b["speedup"] / a["speedup"] - 1) <= AGREE:
        return True
    if a["ci"] and b["ci"] and None not in a["ci"] + b["ci"]:
        return a["ci"][0] <= b["ci"][1] and b["ci"][0] <= a["ci"][1]
    return False


def compare(runs: list[dict]) -> dict:
    """Each run against the 1-GPU run (the fewest GPUs), over the candidates both finished."""
    runs = sorted(runs, key=lambda r: r["gpus"])
    base = runs[0]
    by_id = {r["id"]: r for r in base["rows"]}
    out = {}
    for run in runs:
        shared = [(by_id[r["id"]], r) for r in run["rows"] if r["id"] in by_id]
        changed = [b["id"] for a, b in shared if a["verdict"] != b["verdict"]]
        timed = [(a, b) for a, b in shared if a["speedup"] and b["speedup"]]
        ratios = [b["speedup"] / a["speedup"] for a, b in timed]
        out[run["gpus"]] = {
            "gpus": run["gpus"], "judged": run["judged"], "per_minute": run["per_minute"],
            "scale": round(run["per_minute"] / base["per_minute"], 2) if base["per_minute"] else None,
            "busy": [a["busy_fraction"] for a in run["actors"]],
            "verdicts_changed": changed, "compared": len(shared), "timed": len(timed),
            "timings_agree": sum(timings_agree(a, b) for a, b in timed),
            "median_speedup_ratio": round(statistics.median(ratios), 3) if ratios else None}
    return out


def markdown(runs: list[dict], machine: str) -> str:
    summary = compare(runs)
    intro = (f"Ray evaluator on {machine}; one actor per GPU. Rate: candidates judged per minute of wall "
             "time; busy: each GPU's timing slot held over the wall time; against the fewest-GPU run, "
             f"verdicts changed and timings agreeing (speedups within {AGREE:.0%} or 95% intervals "
             "overlapping).")
    header = ("| GPUs | judged | per minute | vs fewest | GPU busy | verdicts changed | timings agree | "
              "median speedup ratio |")
    lines = [intro, "", header, "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for s in summary.values():
        busy = ", ".join(f"{b:.2f}" for b in s["busy"] if b is not None)
        lines.append(f"| {s['gpus']} | {s['judged']} | {s['per_minute']} | {s['scale']}x | {busy} | "
                     f"{len(s['verdicts_changed'])} of {s['compared']} | "
                     f"{s['timings_agree']} of {s['timed']} | {s['median_speedup_ratio']} |")
    return "\n".join(lines) + "\n"


def write_report(runs: list[dict], out: Path, machine: str) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    report = {"machine": machine, "runs": runs, "summary": compare(runs)}
    (out / "ray_multi_gpu.json").write_text(json.dumps(report, indent=1))
    (out / "ray_multi_gpu.md").write_text(markdown(runs, machine))
    return report


# the command ----------------------------------------------------------------------------------------------

def _machine(smoke: bool) -> str:
    import platform

    if smoke:
        return f"CPU smoke run (fake GPUs), {platform.node()}, {os.cpu_count()} cores"
    import torch

    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return f"{name}, {os.cpu_count()} cores, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="1", help="GPU counts to run, comma-separated (one call each on "
                                                    "the host: each must fit its 10 minutes)")
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--kernelbench", type=Path, help="a KernelBench checkout (kb_format_cuda's problems)")
    parser.add_argument("--cores-per-gpu", type=int, default=0, help="0: the host's cores over its GPUs")
    parser.add_argument("--deadline-s", type=float, default=540.0,
                        help="nothing new starts this long after the process started (a device call: 600 s)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--report", nargs="*", type=Path, help="merge these runs' JSON files and stop")
    parser.add_argument("--smoke", action="store_true", help="CPU, fake GPUs, cpp candidates, 1 and 2 GPUs")
    args = parser.parse_args(argv)
    if args.smoke:
        args.gpus = args.gpus if args.gpus != "1" else "1,2"
        args.candidates = min(args.candidates, 4)
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if args.report:
        runs = [json.loads(p.read_text()) for p in args.report]
        return write_report([r for run in runs for r in run.get("runs", [run])], args.out,
                            runs[0].get("machine", "?"))
    counts = [int(n) for n in args.gpus.split(",")]
    if not args.cores_per_gpu:
        host_gpus = max(counts) if args.smoke else _host_gpus()
        args.cores_per_gpu = max(1, len(HOST_CORES) // host_gpus)
    items = candidates(args.candidates, args.smoke, args.kernelbench)
    seed = Path(tempfile.mkdtemp(prefix="kg-ray-seed-"))
    warm_cache(seed, args.smoke)
    machine = _machine(args.smoke)
    runs = []
    for n in counts:
        run = {**run_count(n, items, args, seed), "machine": machine, "cores_per_gpu": args.cores_per_gpu}
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"ray_multi_gpu_{n}.json").write_text(json.dumps(run, indent=1))
        runs.append(run)
    shutil.rmtree(seed, ignore_errors=True)
    return write_report(runs, args.out, machine)


def _host_gpus() -> int:
    import torch

    return max(1, torch.cuda.device_count())


if __name__ == "__main__":
    report = main()
    print(json.dumps(report["summary"], indent=1))
