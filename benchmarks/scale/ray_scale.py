"""Scale study of the Ray evaluator: throughput against the number of GPU actors N (1 to 64).

Two parts:
1. measured, on this machine: RayEvalPool's own dispatch path (driver queue, actor calls, ObjectRef callbacks)
   with fake actors that sleep for service times drawn from the H200 measurements (scaled down), and with
   zero service time (what the driver alone sustains);
2. simulated (discrete events): N GPU actors on nodes of 8 GPUs, each evaluation's stages drawn from the H200
   measurements (benchmarks/results/archive/results_h200_run_{b,c,d}.json and the cold per-example table of
   benchmarks/results/archive/gpu_results_h200.md), the
   timing slot exclusive per GPU, builds holding a CPU core of their node, and the driver serving every
   dispatch and every answer one at a time at the cost measured in part 1.

    python benchmarks/scale/ray_scale.py   # ray_scale.json and ray_scale.png into benchmarks/results/scale
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import re
import statistics
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
# the service times: the H200 runs of 2026-12-02 (gpu_results.py, the judge before issue 13), archived
ARCHIVE = HERE.parent / "results" / "archive"
GPUS_PER_NODE = 8
NS = (1, 2, 4, 8, 16, 32, 64)


# the H200 measurements --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Service:
    """One evaluation's stages in seconds: build (a CPU core), host (no shared resource), gpu (reference and
    correctness kernels), slot (timing and profile, holding the GPU's timing slot)."""

    backend: str
    build: float
    host: float
    gpu: float
    slot: float

    @property
    def total(self) -> float:
        return self.build + self.host + self.gpu + self.slot


def _stage_records() -> list[tuple[str, dict, float]]:
    """(backend, stage_s, wall_s) of every kernelgym evaluation in the H200 runs' raw output."""
    found: list[tuple[str, dict, float]] = []

    def walk(node, label: str) -> None:
        if isinstance(node, dict):
            if "stage_s" in node and "wall_s" in node:
                found.append((label.split()[0], node["stage_s"], node["wall_s"]))
            for value in node.values():
                walk(value, node.get("solution", label))
        elif isinstance(node, list):
            for value in node:
                walk(value, label)

    for run in "bcd":
        walk(json.loads((ARCHIVE / f"results_h200_run_{run}.json").read_text()), "")
    return [r for r in found if "load_inline" not in json.dumps(r)]


def _cold_rows() -> list[tuple[str, str]]:
    """(backend, task id) of each row of _cold_table(), in its order."""
    text = (ARCHIVE / "gpu_results_h200.md").read_text().split("## Every example", 1)[1].split("\n## ", 1)[0]
    ids = re.findall(r"^\| (L\d/\S+) \| [\d.]+x", text, re.MULTILINE)
    return [(backend, task) for task in ids for backend in ("triton", "cuda")]


def _cold_table() -> list[tuple[str, float, float]]:
    """(backend, wall_s, build_s) of every example's cold evaluation (gpu_results_h200.md, 'Every example',
    run D)."""
    text = (ARCHIVE / "gpu_results_h200.md").read_text().split("## Every example", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in text.splitlines():
        m = re.match(r"\| L\d/\S+ \| [\d.]+x \| ([\d.]+) \| [\d.]+x \| ([\d.]+) \(([\d.]+)", line)
        if m:
            rows.append(("triton", float(m.group(1)), 0.06))
            rows.append(("cuda", float(m.group(2)), float(m.group(3))))
    return rows


def service_samples() -> tuple[list[Service], list[Service]]:
    """Cold services (a new candidate: its build runs) and warm ones (the build is in the shared cache).

    Cold: each example's measured wall and build; the rest of its wall is split into host, gpu and slot in the
    proportions that the stage breakdowns of the same backend show. Warm: the stage breakdowns themselves."""
    records = _stage_records()
    warm, share = [], {}
    for backend in ("cuda", "triton"):
        mine = [(s, w) for b, s, w in records if b == backend and s["build"] < 0.5]
        for s, w in mine:
            host = s["start"] + max(0.0, w - sum(s.values()))
            warm.append(Service(backend, s["build"], host, s["reference"] + s["correctness"],
                                s["timing"] + s["profile"]))
        parts = [(x.host, x.gpu, x.slot) for x in warm if x.backend == backend]
        total = sum(map(sum, parts))
        share[backend] = [sum(p[i] for p in parts) / total for i in range(3)]
    cold = []
    for backend, wall, build in _cold_table():
        rest = wall - build
        h, g, t = share[backend]
        cold.append(Service(backend, build, rest * h, rest * g, rest * t))
    return cold, warm


# part 1: the real dispatch path with fake actors ------------------------------------------------------------

class FakeActor:
    """Stands in for EvalActor: sleeps for the service time the job carries, answers a canned result."""

    def __init__(self, *_):
        import threading

        import kernelgym.evaluation.pipeline  # noqa: F401 - what EvalActor has loaded before its first job
        self.answer = {"task_id": "t", "backend": "cuda", "size": "gpu", "verdict": "ok", "reasons": []}
        self.worker = threading.Lock()  # one evaluation at a time, as EvalActor's one-worker EvalPool

    def evaluate(self, job) -> dict:
        with self.worker:
            time.sleep(float(job.task_id))  # the job carries its own service time (see measure())
        return self.answer

    def info(self) -> dict:
        return {}

    def shutdown(self) -> None:
        pass


def measure(actors: list[int], scale: float, evaluations: int, seed: int) -> list[dict]:
    """Throughput of RayEvalPool with fake actors; service times = cold samples x `scale` (0: driver only)."""
    import ray

    from kernelgym.distributed import RayEvalPool
    from kernelgym.distributed import pool as pool_mod
    from kernelgym.evaluation.options import EvalOptions
    from kernelgym.evaluation.pipeline import EvalJob

    cold, _ = service_samples()
    rng = random.Random(seed)
    rows = []
    original = pool_mod.RayEvalPool._start_actor

    def fake_actor(self, node_id):
        limit = self.config.in_flight_per_actor or 2  # a fake actor's one worker + 1
        return ray.remote(FakeActor).options(num_cpus=0, max_concurrency=limit + 1).remote()

    pool_mod.RayEvalPool._start_actor = fake_actor
    try:
        for n in actors:
            with RayEvalPool(actors=n, gpu=False, cpus_per_actor=0.001) as pool:
                jobs = [EvalJob(repr(rng.choice(cold).total * scale), "", "float32", None, None, "", "",
                                "cuda", "gpu", EvalOptions()) for _ in range(evaluations)]
                for future in [pool.submit_job(job) for job in jobs[: 4 * n]]:  # warm up every actor
                    future.result()
                start = time.perf_counter()
                futures = [pool.submit_job(job) for job in jobs]
                for f in futures:
                    f.result()
                wall = time.perf_counter() - start
                busy = sum(float(j.task_id) for j in jobs)
                rows.append({"actors": n, "scale": scale, "evaluations": evaluations, "wall_s": wall,
                             "per_s": evaluations / wall, "ideal_per_s": n * evaluations / busy if busy
                             else None})
    finally:
        pool_mod.RayEvalPool._start_actor = original
    return rows


# part 2: the discrete-event simulation ----------------------------------------------------------------------

class _Resource:
    """Capacity-limited, first come first served."""

    def __init__(self, sim: _Sim, capacity: int):
        self.sim, self.free, self.waiting = sim, capacity, deque()

    def acquire(self, then) -> None:
        if self.free > 0:
            self.free -= 1
            then()
        else:
            self.waiting.append(then)

    def release(self) -> None:
        if self.waiting:
            self.sim.after(0.0, self.waiting.popleft())
        else:
            self.free += 1


class _Sim:
    def __init__(self):
        self.now, self._events, self._seq = 0.0, [], 0

    def after(self, delay: float, action) -> None:
        self._seq += 1
        heapq.heappush(self._events, (self.now + delay, self._seq, action))

    def run(self) -> None:
        while self._events:
            self.now, _, action = heapq.heappop(self._events)
            action()


@dataclass
class Scenario:
    name: str
    workers_per_gpu: int = 1  # worker processes per GPU actor (EvalPool's workers inside the actor)
    build_cores_per_node: int = 128  # CPU cores of a node that builds may use at once (an 8x H200 host: 128)
    cache_hit_rate: float = 0.0  # share of evaluations whose build is already in the shared cache
    driver_s: float = 0.0  # the driver's serial cost per evaluation (half at dispatch, half at the answer)
    # False: reference and correctness kernels of a GPU's workers overlap freely (only timing holds the slot);
    # True: they take turns on the GPU as well (the pessimistic bound).
    gpu_exclusive: bool = False


def simulate(n_gpus: int, scenario: Scenario, cold: list[Service], warm: list[Service], evaluations: int,
             seed: int, in_order: bool = False) -> dict:
    """Throughput of N GPU actors on `evaluations` evaluations, kept queued (a saturated evaluator).
    in_order: the i-th evaluation is cold[i] (a fixed list), not a random draw."""
    rng = random.Random(seed)
    fixed = iter(cold)
    sim = _Sim()
    nodes = (n_gpus + GPUS_PER_NODE - 1) // GPUS_PER_NODE
    cores = [_Resource(sim, scenario.build_cores_per_node) for _ in range(nodes)]
    slots = [_Resource(sim, 1) for _ in range(n_gpus)]
    driver = _Resource(sim, 1)
    in_flight_limit = scenario.workers_per_gpu + 1  # RayPoolConfig.in_flight_per_actor's role
    workers = [_Resource(sim, scenario.workers_per_gpu) for _ in range(n_gpus)]
    held = [0] * n_gpus
    queue = deque(range(evaluations))
    busy = {"build": 0.0, "driver": 0.0}
    done = []

    def draw() -> Service:
        if in_order:
            return next(fixed)
        if rng.random() < scenario.cache_hit_rate:
            return rng.choice(warm)
        return rng.choice(cold)

    def dispatch() -> None:
        while queue:
            gpu = min(range(n_gpus), key=held.__getitem__)
            if held[gpu] >= in_flight_limit:
                return
            queue.popleft()
            held[gpu] += 1
            driver_work(lambda g=gpu: workers[g].acquire(lambda g=g: start(g, draw())))

    def driver_work(then) -> None:
        cost = scenario.driver_s / 2

        def run():
            busy["driver"] += cost
            sim.after(cost, lambda: (driver.release(), then()))

        driver.acquire(run)

    def start(gpu: int, s: Service) -> None:
        node = cores[gpu // GPUS_PER_NODE]

        def built():
            node.release()
            if scenario.gpu_exclusive:
                sim.after(s.host, lambda: slots[gpu].acquire(lambda: sim.after(s.gpu + s.slot, finished)))
            else:
                sim.after(s.host + s.gpu, lambda: slots[gpu].acquire(lambda: sim.after(s.slot, finished)))

        def finished():
            slots[gpu].release()
            workers[gpu].release()
            driver_work(lambda: answered(gpu))

        busy["build"] += s.build
        node.acquire(lambda: sim.after(s.build, built))

    def answered(gpu: int) -> None:
        held[gpu] -= 1
        done.append(sim.now)
        dispatch()

    dispatch()
    sim.run()
    skip = min(len(done) // 10, 4 * n_gpus)  # leave out the start, while the pipeline fills
    span = done[-1] - done[skip]
    return {"gpus": n_gpus, "per_s": (len(done) - skip - 1) / span if span > 0 else None,
            "makespan_s": sim.now, "driver_busy": busy["driver"] / sim.now,
            "build_cores_busy": busy["build"] / sim.now / (nodes * scenario.build_cores_per_node)}


SCENARIOS = [
    Scenario("1 worker per GPU (the default)"),
    Scenario("2 workers per GPU", workers_per_gpu=2),
    Scenario("2 workers per GPU, GPU stages take turns", workers_per_gpu=2, gpu_exclusive=True),
    Scenario("2 workers per GPU, 8 build cores per 8-GPU node", workers_per_gpu=2, build_cores_per_node=8),
    Scenario("2 workers per GPU, 4 build cores per 8-GPU node", workers_per_gpu=2, build_cores_per_node=4),
    Scenario("2 workers per GPU, half the builds cached", workers_per_gpu=2, cache_hit_rate=0.5),
]


def driver_limited(driver_s: float, cold: list[Service], warm: list[Service], evaluations: int,
                   seed: int) -> list:
    """The driver's cost that makes it the limit: the same 64-GPU scenario at 10x, 100x and 1000x its cost."""
    rows = []
    for factor in (1, 10, 100, 1000):
        scenario = Scenario(f"driver x{factor}", workers_per_gpu=2, driver_s=driver_s * factor)
        rows.append({"factor": factor, "driver_s": driver_s * factor,
                     **simulate(64, scenario, cold, warm, evaluations, seed)})
    return rows


def run_b_check(cold: list[Service], warm: list[Service], seed: int) -> dict:
    """The model against the one concurrent measurement on the H200 (gpu_results_h200.md, run B): 10 new
    candidates, two of each of five solutions, through 4 workers on one GPU, 17.0 s wall."""
    table = {row: s for row, s in zip(_cold_rows(), cold, strict=True)}
    picked = [table[k]
              for k in (("cuda", "L1/10_Softmax"), ("cuda", "L1/16_RMSNorm"), ("cuda", "L1/2_Matmul_Square"),
                                 ("triton", "L1/15_LayerNorm"), ("triton", "L2/1_Gemm_BiasAdd_ReLU"))] * 2
    result = {"measured_wall_s": 17.0, "one_at_a_time_s": sum(s.total for s in picked)}
    for exclusive in (False, True):
        walls = []
        for k in range(20):  # the order in which the 10 reach the workers varies
            order = random.Random(seed + k).sample(picked, len(picked))
            scenario = Scenario("run B", workers_per_gpu=4, gpu_exclusive=exclusive)
            walls.append(simulate(1, scenario, order, order, len(order), seed, in_order=True)["makespan_s"])
        key = "gpu_stages_take_turns" if exclusive else "gpu_stages_overlap"
        result[key] = {"median_s": statistics.median(walls), "range_s": [min(walls), max(walls)]}
    return result


def plot(path: Path, study: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.2))
    for name, rows in study["simulated"].items():
        style = ":" if "slower" in name else "-"
        ax.plot([r["gpus"] for r in rows], [r["per_s"] for r in rows], marker="o", linestyle=style,
                label=name)
    cap = 1.0 / study["driver_s"]
    ax.axhline(cap, color="k", linestyle="--", linewidth=1,
               label=f"driver alone (measured here): {cap:.0f} evaluations/s")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("GPU actors N")
    ax.set_ylabel("evaluations per second")
    ax.set_title("Ray evaluator, simulated with H200 stage times (new candidates unless noted)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7.5, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(HERE.parent / "results" / "scale"))
    parser.add_argument("--evaluations", type=int, default=4000, help="per simulated point")
    parser.add_argument("--measure-actors", default="1,2,4,8", help="fake actors for the measured part")
    parser.add_argument("--scale", type=float, default=0.05, help="service times x this in the measured part")
    parser.add_argument("--no-measure", action="store_true",
                        help="simulate only, keeping the measured part of an earlier --out/ray_scale.json")
    parser.add_argument("--driver-s", type=float, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    cold, warm = service_samples()
    study: dict = {"samples": {"cold": len(cold), "warm": len(warm),
                               "cold_mean_s": statistics.mean(s.total for s in cold),
                               "cold_build_mean_s": statistics.mean(s.build for s in cold),
                               "warm_mean_s": statistics.mean(s.total for s in warm)}}
    earlier = out / "ray_scale.json"
    if args.no_measure and earlier.exists():
        kept = json.loads(earlier.read_text())
        study.update({k: kept[k] for k in ("measured_driver_only", "measured") if k in kept})
    if not args.no_measure:
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        counts = [int(x) for x in args.measure_actors.split(",")]
        study["measured_driver_only"] = measure(counts, 0.0, 1000, args.seed)
        study["measured"] = measure(counts, args.scale, 200, args.seed)
        ray.shutdown()
    # The driver's cost: the fastest the real dispatch path went with service time zero (whatever the actors).
    driver_s = args.driver_s or 1.0 / max(r["per_s"] for r in study["measured_driver_only"])
    slow_driver = Scenario("2 workers per GPU, a driver 100x slower (0.1 s per evaluation)",
                           workers_per_gpu=2, driver_s=100 * driver_s)
    study["driver_s"] = driver_s
    study["simulated"] = {}
    for scenario in SCENARIOS:
        scenario.driver_s = driver_s
        study["simulated"][scenario.name] = [simulate(n, scenario, cold, warm, args.evaluations, args.seed)
                                             for n in NS]
    study["simulated"][slow_driver.name] = [simulate(n, slow_driver, cold, warm, args.evaluations, args.seed)
                                            for n in NS]
    study["driver_limited_64"] = driver_limited(driver_s, cold, warm, args.evaluations, args.seed)
    study["run_b_check"] = run_b_check(cold, warm, args.seed)
    if "measured" in study:  # the simulation at the measured points, for comparison
        one = Scenario("check", driver_s=driver_s)
        scaled = [Service(s.backend, 0.0, s.total * args.scale, 0.0, 0.0) for s in cold]
        for row in study["measured"]:
            row["simulated_per_s"] = simulate(row["actors"], one, scaled, scaled, 2000, args.seed)["per_s"]
    (out / "ray_scale.json").write_text(json.dumps(study, indent=2))
    plot(out / "ray_scale.png", study)
    print(json.dumps({k: v for k, v in study.items() if k != "simulated"}, indent=2))
    for name, rows in study["simulated"].items():
        print(name, " ".join(f"{r['gpus']}:{r['per_s']:.2f}" for r in rows))


if __name__ == "__main__":
    main()
