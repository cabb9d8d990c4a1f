"""The Ray evaluator against EvalPool on one H200: the same 20 candidates, one at a time, overhead of Ray.

Both evaluators are alive together, each with one worker on the GPU and its own empty build cache, and take
the candidates in turn (local then Ray for even candidates, Ray then local for odd ones), so both see the same
machine state. A cold pass (each candidate built by each evaluator) is followed by warm passes (the builds
cached) while the time budget lasts. Writes $OUT/ray_vs_pool.json and $OUT/ray_vs_pool.md.

On the host (no internet): Ray comes from the wheels made by benchmarks/gpu/ray_wheels.sh (carried in .whl):
    pip install -q --no-index --find-links .whl ray && python benchmarks/scale/ray_vs_pool_gpu.py --out "$OUT"
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def candidates(count: int, smoke: bool) -> list[tuple[str, str, str]]:
    """(task id, backend, source): CUDA and Triton examples taken alternately (smoke: the cpp ones)."""
    from kernelgym.solutions import examples

    if smoke:
        mixed = examples("cpp")
    else:
        mixed = [e for pair in zip(examples("cuda"), examples("triton"), strict=False) for e in pair]
    return [(e.task_id, e.backend, e.source) for e in mixed[:count]]


def private_cache(root: Path, name: str) -> str:
    path = root / name
    path.mkdir(parents=True)
    os.chmod(path, 0o755)  # the unprivileged candidate process reads its build from here
    return str(path)


def timed(pool, task, backend: str, source: str) -> dict:
    start = time.perf_counter()
    result = pool.evaluate(task, source, backend=backend, size="cpu" if backend == "cpp" else "gpu")
    return {"wall_s": time.perf_counter() - start, "verdict": result.verdict.value, "speedup": result.speedup}


def run_pass(name: str, pools: dict, items: list, out: list, deadline: float) -> bool:
    from kernelgym.tasks import bundled

    for i, (task_id, backend, source) in enumerate(items):
        if time.monotonic() > deadline:
            return False
        order = ["local", "ray"] if i % 2 == 0 else ["ray", "local"]
        row = {"pass": name, "task_id": task_id, "backend": backend}
        for which in order:
            row[which] = timed(pools[which], bundled().get(task_id), backend, source)
        out.append(row)
        print(json.dumps(row), flush=True)
    return True


def summarize(rows: list[dict]) -> dict:
    summary = {}
    for name in sorted({r["pass"] for r in rows}):
        mine = [r for r in rows if r["pass"] == name]
        local = sum(r["local"]["wall_s"] for r in mine)
        ray = sum(r["ray"]["wall_s"] for r in mine)
        ratios = [r["ray"]["wall_s"] / r["local"]["wall_s"] for r in mine]
        summary[name] = {"candidates": len(mine), "local_s": local, "ray_s": ray, "overhead": ray / local - 1,
                         "median_ratio": statistics.median(ratios),
                         "same_verdicts": all(r["local"]["verdict"] == r["ray"]["verdict"] for r in mine)}
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--candidates", type=int, default=20)
    parser.add_argument("--budget-s", type=float, default=150.0, help="no new candidate starts after this")
    parser.add_argument("--smoke", action="store_true",
                        help="cpp examples on the CPU (checks the script anywhere)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    deadline = began + args.budget_s
    import ray

    from kernelgym.distributed import RayEvalPool
    from kernelgym.workers.pool import EvalPool

    root = Path(tempfile.mkdtemp(prefix="kg-ray-vs-pool-"))
    os.chmod(root, 0o755)
    os.environ["KERNELGYM_CACHE"] = private_cache(root, "local")
    local = EvalPool(workers=1)
    ray.init(include_dashboard=False, log_to_driver=False, **({"num_cpus": 2} if args.smoke else {}))
    remote = RayEvalPool(actors=1, cache_dir=private_cache(root, "ray"))
    started = time.monotonic() - began
    info = {"ray": ray.__version__, "cluster": ray.cluster_resources(), "start_s": started,
            "actor": ray.get(remote.actors[0].info.remote())}
    items = candidates(args.candidates, args.smoke)
    rows: list[dict] = []
    try:
        passes = ["cold", "warm", "warm2"]
        for name in passes:
            if not run_pass(name, {"local": local, "ray": remote}, items, rows, deadline):
                break
    finally:
        result = {"info": info, "summary": summarize(rows), "rows": rows}
        (out / "ray_vs_pool.json").write_text(json.dumps(result, indent=2, default=str))
        lines = ["| pass | candidates | EvalPool s | Ray s | overhead | median ratio | same verdicts |",
                 "|---|---|---|---|---|---|---|"]
        for name, s in result["summary"].items():
            lines.append(f"| {name} | {s['candidates']} | {s['local_s']:.2f} | {s['ray_s']:.2f} | "
                         f"{100 * s['overhead']:+.1f}% | {s['median_ratio']:.3f} | {s['same_verdicts']} |")
        (out / "ray_vs_pool.md").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        remote.close()
        local.close()
        ray.shutdown()


if __name__ == "__main__":
    main()
