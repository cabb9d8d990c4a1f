"""Soak and fault injection: N concurrent environments x M episodes each on one shared EvalPool, while faults
are injected from outside, then checks that the judge's faults were never charged to the agent.

    python benchmarks/judge_trust/soak.py --envs 8 --episodes 200 --out runs/soak          # CPU, cpp backend
    python benchmarks/judge_trust/soak.py --gpu --envs 4 --episodes 25 --max-minutes 2.5 --fault-every 3 \
        --out "$OUT"
                                                    # H200 (about 3.5 min): triton + a poisoned CUDA context

Faults (--faults, comma-separated; each at random times, on average every --fault-every seconds):
  worker     SIGKILL of a worker process in the middle of an evaluation
  reference  SIGKILL of an evaluation's reference process (a trusted process)
  candidate  SIGKILL of an evaluation's candidate process: the judge cannot tell it from the candidate's own
             death, so it is charged to the candidate (a crash) by design; counted apart
  disk       the cache folder's disk filled to the last MiB for --disk-hold-s (a tmpfs of --cache-mb, as root)
  memory     a memory hog in the judge's memory cgroup (as root, cgroup v1 or v2) that the OOM killer spares:
             the kernel kills a judge process instead, as on a host out of memory
The replayed solutions (benchmarks/judge_trust/soak_solutions.py) are honest bundled ones and ones that fail
on their own (segfault, exit, compile error, wrong output, over the memory limit, a PyTorch passthrough; on
the GPU also an out-of-bounds store that poisons the candidate's CUDA context). Each one's verdict is measured
once before the faults start; during the soak every episode must end with that verdict, or
`infrastructure_error` (not judged, reward 0), or `crash` when a candidate process was killed while it ran.

Checks: no episode lost; no fault of the judge charged to the agent; every fault of the candidate charged to
it; no process or temp file left behind; worker RSS and open fds flat. Writes soak.json and soak.md to --out;
exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from soak_faults import Injector, JudgeCgroup, Sampler, descendants, judge_processes_since, tmpfs

FAULTS = ("worker", "reference", "candidate", "disk", "memory")


@dataclass
class SoakConfig:
    envs: int = 8
    episodes: int = 200  # per env
    workers: int = 2
    gpu: bool = False
    faults: tuple[str, ...] = FAULTS
    fault_every_s: float = 4.0
    disk_hold_s: float = 2.0
    cache_mb: int = 512
    memory_headroom_mb: int = 2048  # the judge cgroup's memory limit (GPU default: 8192, for CUDA contexts)
    timing_budget_s: float = 0.5
    infra_retries: int = 2
    seed: int = 0
    out: str = "runs/soak"
    max_minutes: float | None = None  # no new episode starts after this (the figures say how many ran)


@dataclass
class Episode:
    env: int
    index: int
    solution: str
    honest: bool
    expected: str
    started: float
    ended: float = 0.0
    verdicts: list[str] = field(default_factory=list)  # every turn's, given-back ones included
    rewards: list[float] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)  # the rule of each turn's first reason (for diagnosis)
    judged: bool = True
    error: str = ""

    @property
    def verdict(self) -> str:
        return self.verdicts[-1] if self.verdicts else "lost"


def fenced(source: str) -> str:
    return f"```python\n{source}\n```"


def run_env(
    index: int, env, plan: list, expected: dict[str, str], config: SoakConfig, out: list, lock
) -> None:
    rng = random.Random(config.seed * 1000 + index)
    stop_at = time.time() + config.max_minutes * 60 if config.max_minutes else float("inf")
    for number in range(config.episodes):
        if time.time() >= stop_at:
            return
        name, task_id, source, honest = rng.choice(plan)
        episode = Episode(index, number, name, honest, expected[name], time.time())
        try:
            env.reset(options={"task_id": task_id})
            code = fenced(f"{source}\n# soak episode {index}-{number}\n")  # a fresh solution text each time
            while True:
                _, reward, terminated, truncated, info = env.step(code)
                episode.verdicts.append(info["verdict"])
                episode.rewards.append(float(reward))
                reasons = (info.get("result") or {}).get("reasons") or [""]
                episode.rules.append(str(reasons[0]).split(":")[0])
                episode.judged = bool(info.get("judged", True))
                if episode.judged or terminated or truncated:
                    break
        except Exception as exc:  # noqa: BLE001 (a lost episode is what the soak counts, not a crash of it)
            episode.error = f"{type(exc).__name__}: {exc}"
        episode.ended = time.time()
        with lock:
            out.append(episode)
            # One line per episode as it ends: a run cut short (a device call's time limit) still tells.
            line = {"episode": len(out), "env": index, "solution": name, "verdicts": episode.verdicts,
                    "s": round(episode.ended - episode.started, 1)}
            print(json.dumps(line), flush=True)


def baseline(pool, plan: list, backend: str, options: dict) -> dict[str, str]:
    """Each solution's verdict without faults (the first runs also fill the build cache)."""
    from kernelgym.tasks import bundled

    tasks = bundled()
    verdicts = {}
    for name, task_id, source, _ in plan:
        verdicts[name] = pool.evaluate(tasks.get(task_id), source, backend=backend, **options).verdict.value
        print(json.dumps({"baseline": name, "verdict": verdicts[name]}), flush=True)
    return verdicts


def classify(episode: Episode, faults: list[dict]) -> str:
    """What an episode's outcome means, given the faults injected while it ran."""
    hit = {f["kind"] for f in faults if f["hit"] and episode.started <= f["time"] <= episode.ended}
    if episode.error or not episode.verdicts:
        return "lost"
    if episode.verdict == episode.expected:
        return "as_expected"
    if episode.verdict == "infrastructure_error":
        return "not_judged" if hit - {"candidate"} else "not_judged_without_fault"
    if episode.verdict == "crash" and "candidate" in hit:
        return "candidate_killed"
    if episode.honest:
        return f"judge_fault_charged[{','.join(sorted(hit))}]" if hit else "honest_failed_without_fault"
    return f"candidate_fault_misjudged[{','.join(sorted(hit))}]"


def checks(
    episodes: list[Episode], faults: list[dict], config: SoakConfig, leftovers: dict, trend: dict
) -> dict:
    classes = [classify(e, faults) for e in episodes]
    count = {c: classes.count(c) for c in sorted(set(classes))}
    misjudged = [e for e, c in zip(episodes, classes) if c.startswith("candidate_fault_misjudged")]
    unjudged_rewards = [
        r for e in episodes for v, r in zip(e.verdicts, e.rewards) if v == "infrastructure_error"
    ]
    charged = [e for e in episodes if not e.honest and e.expected != "ok"]
    return {
        # Every episode started finished (with --max-minutes, episodes not started are not lost, only not
        # run).
        "no_episode_lost": (len(episodes) == config.envs * config.episodes or bool(config.max_minutes))
        and not count.get("lost")
        and len({(e.env, e.index) for e in episodes}) == len(episodes),
        "no_judge_fault_charged": not any(c.startswith("judge_fault_charged") for c in count)
        and all(r == 0.0 for r in unjudged_rewards),
        # Charged: its failure verdict, or another failure after a judge process was killed under it (a
        # reference
        # killed mid-evaluation is `crash` until the pipeline answers infrastructure_error for it), never
        # `ok`.
        "every_candidate_fault_charged": all(e.verdict != "ok" for e in misjudged)
        and all(min(e.rewards, default=0.0) < 0 for e in charged if e.judged),
        "nothing_left_behind": not any(leftovers.values()),
        "worker_rss_and_fds_flat": trend["flat"],
    }, count


def machine() -> dict:
    import torch

    import kernelgym

    with open("/proc/cpuinfo") as f:
        cpu = next(
            (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
            platform.processor(),
        )
    gpu = ""
    if shutil.which("nvidia-smi"):
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = ""
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpu": f"{cpu} ({os.cpu_count()} cores)",
        "gpu": gpu,
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton_version,
        "kernelgym": getattr(kernelgym, "__version__", "?"),
        "load_avg_at_end": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    config = parse(argv)
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    soak_tmp = tempfile.mkdtemp(prefix="kernelgym-soak-")
    os.environ["TMPDIR"] = tempfile.tempdir = (
        soak_tmp  # every temp folder of the run lands here, to be checked
    )
    notes: list[str] = []
    cache = tmpfs(os.path.join(soak_tmp, "cache"), config.cache_mb) if "disk" in config.faults else None
    if "disk" in config.faults and cache is None:
        notes.append("disk faults skipped: no tmpfs (needs root)")
    cache_dir = cache or os.path.join(soak_tmp, "cache")
    os.environ["KERNELGYM_CACHE"] = cache_dir
    try:
        report = soak(config, cache_dir, soak_tmp, notes)
    finally:
        if cache:
            subprocess.run(["umount", "-l", cache], check=False)
        shutil.rmtree(soak_tmp, ignore_errors=True)
    (out / "soak.json").write_text(json.dumps(report, indent=2, default=str))
    (out / "soak.md").write_text(render(report))
    print(render(report))
    return 0 if all(report["checks"].values()) else 1


def soak(config: SoakConfig, cache_dir: str, soak_tmp: str, notes: list[str]) -> dict:
    import gymnasium as gym
    from soak_solutions import solutions

    import kernelgym  # noqa: F401 (registers the ids)
    from kernelgym.workers.pool import EvalPool
    from kernelgym.workers.worker import start_time

    backend = "triton" if config.gpu else "cpp"
    options = {"timing_budget_s": config.timing_budget_s}
    plan = solutions(backend)
    pool = EvalPool(workers=config.workers, infra_retries=config.infra_retries)
    started = time.time()
    soak_started_ticks = int(start_time(os.getpid()))  # what the judge forks starts after this process
    with pool:
        expected = baseline(pool, plan, backend, options)
        cgroup = JudgeCgroup.create(config.memory_headroom_mb) if "memory" in config.faults else None
        if "memory" in config.faults and cgroup is None:
            notes.append("memory faults skipped: no writable memory cgroup (needs root)")
        kinds = [
            k
            for k in config.faults
            if (k != "disk" or os.path.ismount(cache_dir)) and (k != "memory" or cgroup)
        ]
        sampler = Sampler(pool, cgroup)
        episodes: list[Episode] = []
        sampler.progress = lambda: len(episodes)
        injector = Injector(pool, kinds, config, cache_dir, cgroup, sampler)
        envs = [
            gym.make(
                "KernelGym-L1-v0",
                backend=backend,
                size="gpu" if config.gpu else "cpu",
                pool=pool,
                max_turns=1,
                eval_options=options,
            )
            for _ in range(config.envs)
        ]
        lock = threading.Lock()
        threads = [
            threading.Thread(target=run_env, args=(i, env, plan, expected, config, episodes, lock))
            for i, env in enumerate(envs)
        ]
        sampler.start(), injector.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        injector.stop(), sampler.stop()
        soak_s = time.time() - started
        stale = [str(p) for p in Path(pool.work_root).glob("worker-*/eval-*")]
        infra = {
            "rejudged": pool.infra.rejudged,
            "not_judged": pool.infra.not_judged,
            "causes": dict(pool.infra.causes),
        }
        work_root = pool.work_root
        for env in envs:
            env.close()
    time.sleep(2.0)  # the pool is closed: give the kernel a moment to reap
    leftovers = {
        "eval_folders_before_close": stale,
        "forked_processes_alive": sampler.forked_alive(),
        "descendants_alive": descendants(os.getpid()),
        "judge_processes_alive": judge_processes_since(soak_started_ticks),
        "work_root_left": [work_root] if os.path.exists(work_root) else [],
        "temp_files_left": sorted(
            str(p) for p in Path(soak_tmp).rglob("*") if not str(p).startswith(cache_dir)
        ),
        "cache_temp_files": sorted(str(p) for p in Path(cache_dir).rglob("*") if ".tmp" in p.name),
    }
    if cgroup:
        cgroup.remove()
    trend = sampler.trend()
    passed, count = checks(episodes, injector.faults, config, leftovers, trend)
    return {
        "config": asdict(config),
        "machine": machine(),
        "command": " ".join([sys.executable, *sys.argv]),
        "soak_s": round(soak_s, 1),
        "expected_verdicts": expected,
        "episodes": len(episodes),
        "outcomes": count,
        "faults": injector.summary(),
        "pool": infra,
        "trend": trend,
        "leftovers": leftovers,
        "checks": passed,
        "notes": notes,
        "fault_log": injector.faults,
        "given_back_turns": sum(v == "infrastructure_error" for e in episodes for v in e.verdicts),
        "unexpected": [
            asdict(e) | {"class": classify(e, injector.faults)}
            for e in episodes
            if classify(e, injector.faults) not in ("as_expected", "not_judged", "candidate_killed")
        ][:50],
    }


def render(r: dict) -> str:
    c = r["config"]
    lines = [
        (f"# Soak: {c['envs']} envs x {c['episodes']} episodes, faults {', '.join(c['faults'])}"),
        "",
        "```bash",
        r["command"],
        "```",
        "",
        f"- machine: {r['machine']}",
        f"- wall: {r['soak_s']} s, episodes finished: {r['episodes']} of {c['envs'] * c['episodes']} planned"
        + (f" (no episode started after {c['max_minutes']} min)" if c.get("max_minutes") else ""),
        f"- expected verdicts (measured without faults): {r['expected_verdicts']}",
        f"- outcomes: {r['outcomes']}",
        f"- turns not judged and given back by the env: {r['given_back_turns']}",
        (
            f"- pool: re-judged {r['pool']['rejudged']}, answered not judged {r['pool']['not_judged']}, "
            f"causes {r['pool']['causes']}"
        ),
        "",
        "## Faults injected",
        "",
        "| kind | injected | hit a process/target |",
        "|---|---|---|",
    ]
    lines += [f"| {k} | {v['injected']} | {v['hit']} |" for k, v in r["faults"].items()]
    t = r["trend"]
    lines += ["", "## Trend", "", f"- {t['text']}", "", "## Leftovers", ""]
    lines += [f"- {k}: {len(v)}" + (f" ({v[:5]})" if v else "") for k, v in r["leftovers"].items()]
    lines += ["", "## Checks", ""] + [f"- {k}: {'PASS' if v else 'FAIL'}" for k, v in r["checks"].items()]
    if r["notes"]:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in r["notes"]]
    if r["unexpected"]:
        lines += ["", "## Unexpected episodes (first 50)", ""]
        lines += [
            f"- {e['class']}: {e['solution']} expected {e['expected']}, got {e['verdicts']} "
            f"({', '.join(e['rules'])}) rewards {e['rewards']} {e['error']}"
            for e in r["unexpected"]
        ]
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None) -> SoakConfig:
    d = SoakConfig()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", type=int, default=d.envs)
    p.add_argument("--episodes", type=int, default=d.episodes, help="per env")
    p.add_argument(
        "--workers", type=int, default=None, help="pool workers (default: 2 on the CPU, 1 per GPU)"
    )
    p.add_argument(
        "--gpu", action="store_true", help="triton backend on the GPU, with a poisoned CUDA context"
    )
    p.add_argument("--faults", default=",".join(FAULTS))
    p.add_argument("--fault-every", type=float, default=d.fault_every_s, help="mean seconds between faults")
    p.add_argument("--disk-hold-s", type=float, default=d.disk_hold_s)
    p.add_argument("--cache-mb", type=int, default=d.cache_mb)
    p.add_argument("--memory-headroom-mb", type=int, default=None, help="the judge cgroup's memory limit")
    p.add_argument("--timing-budget-s", type=float, default=d.timing_budget_s)
    p.add_argument("--infra-retries", type=int, default=d.infra_retries)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out", default=d.out)
    p.add_argument("--max-minutes", type=float, default=None, help="start no episode after this many minutes")
    a = p.parse_args(argv)
    faults = tuple(f.strip() for f in a.faults.split(",") if f.strip())
    unknown = set(faults) - set(FAULTS)
    if unknown:
        p.error(f"unknown fault(s) {sorted(unknown)}; known: {', '.join(FAULTS)}")
    workers = a.workers or (1 if a.gpu else 2)
    headroom = a.memory_headroom_mb or (8192 if a.gpu else d.memory_headroom_mb)
    return SoakConfig(
        a.envs,
        a.episodes,
        workers,
        a.gpu,
        faults,
        a.fault_every,
        a.disk_hold_s,
        a.cache_mb,
        headroom,
        a.timing_budget_s,
        a.infra_retries,
        a.seed,
        a.out,
        a.max_minutes,
    )


if __name__ == "__main__":
    sys.exit(main())
