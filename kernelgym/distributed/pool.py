"""RayEvalPool: EvalPool's interface (submit, evaluate, map, close, a context manager) on a Ray cluster.

Each actor owns a single-machine EvalPool (see actor.py), so the worker's scrubbed environment and the
candidate's sandbox hold on every node. The driver keeps the queue: an actor is handed at most
`in_flight_per_actor` evaluations at a time (one judged, the next already there), the rest wait here, so a
burst of submissions never piles up inside Ray. A thread per evaluation in flight waits on its answer; nothing
polls.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field, replace

from kernelgym.distributed.config import RayPoolConfig
from kernelgym.errors import ConfigError, KernelGymError, PoolClosedError
from kernelgym.evaluation import rules
from kernelgym.evaluation.job import EvalJob
from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.evaluation.rules import reason
from kernelgym.tasks.task import Task
from kernelgym.workers.pool import make_job


def import_ray():
    try:
        import ray
    except ImportError:
        raise ConfigError("the Ray evaluator needs Ray: pip install 'kernelgym[dist]'") from None
    return ray


@dataclass
class _Slot:
    """One actor and the evaluations it holds."""

    actor: object
    node_id: str
    limit: int  # evaluations it may hold at once (back-pressure)
    workers: int
    in_flight: int = 0
    done: int = 0
    slot_held_s: float = 0.0  # seconds its evaluations held the GPU's timing slot (its busy time)
    futures: set = field(default_factory=set)


class RayEvalPool:
    """Evaluate solutions in Ray actors. Thread-safe; use as a context manager or call close()."""

    def __init__(self, config: RayPoolConfig | None = None, **overrides):
        ray = import_ray()
        self.config = config or RayPoolConfig(**overrides)
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(**_init_kwargs(self.config))
        self._slots: list[_Slot] = []
        try:
            self._start()
        except BaseException as exc:
            self._kill_actors()
            if self._owns_ray:
                ray.shutdown()
            if isinstance(exc, KernelGymError):
                raise
            raise KernelGymError(f"the Ray evaluation actors did not start: {type(exc).__name__}: "
                                 f"{exc}") from exc

    def _start(self) -> None:
        ray = import_ray()
        from kernelgym.distributed.placement import plan

        self.gpu = ray.cluster_resources().get("GPU", 0) > 0 if self.config.gpu is None else self.config.gpu
        cluster = ray.nodes()
        self._nodes = {n["NodeID"]: n for n in cluster}
        self._ranks: dict[str, int] = {}
        for node in plan(cluster, self.gpu, self.config.actors, self.config.cpus_per_actor):
            shape = self.shape(node)
            limit = self.config.in_flight_per_actor or shape.workers + 1
            self._slots.append(_Slot(self._start_actor(node), node, limit, shape.workers))
        self._pending: deque[tuple[EvalJob, Future]] = deque()
        self._lock = threading.Lock()
        # One thread waits (ray.get) on each evaluation in flight: there are never more than `capacity`.
        capacity = sum(slot.limit for slot in self._slots)
        self._waiters = ThreadPoolExecutor(max_workers=capacity, thread_name_prefix="kernelgym-ray")
        self._closed = False
        self._all: set[Future] = set()
        # Every actor placed, its EvalPool made (the first evaluation starts its worker, as in EvalPool).
        ray.get([slot.actor.info.remote() for slot in self._slots], timeout=self.config.start_timeout_s)

    @property
    def size(self) -> int:
        return sum(slot.workers for slot in self._slots)

    def shape(self, node_id: str):
        """What an actor on that node reserves (Ray CPUs, its share of the cores) and its workers."""
        from kernelgym.distributed.placement import actor_shape

        cfg = self.config
        return actor_shape(self._nodes[node_id], self.gpu, cfg.cpus_per_actor, cfg.pool.workers)

    @property
    def actors(self) -> list:
        return [slot.actor for slot in self._slots]

    def _start_actor(self, node_id: str):
        ray = import_ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from kernelgym.distributed.actor import EvalActor

        cfg = self.config
        shape = self.shape(node_id)
        # The actor's place among this node's actors picks its core slice (a GPU actor uses its GPU's index).
        rank = self._ranks[node_id] = self._ranks.get(node_id, -1) + 1
        remote = ray.remote(EvalActor).options(
            num_gpus=1 if self.gpu else 0, num_cpus=shape.cpus,
            max_restarts=-1, max_task_retries=cfg.max_attempts - 1,
            # +1: info() answers while evaluations run
            max_concurrency=(cfg.in_flight_per_actor or shape.workers + 1) + 1,
            # soft: if the node is lost, the replacement goes wherever a GPU (or CPU) is free
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=True),
        )
        pool = replace(cfg.pool, workers=shape.workers)
        return remote.remote(pool, cfg.cache_dir, self.gpu, shape.cpu_fraction, rank)

    def make_job(self, task: Task, source: str | bytes, backend: str = "cpp", size: str | None = None,
                 **options) -> EvalJob:
        return make_job(task, source, backend, size, self.config.pool.options, self.gpu, **options)

    def submit(self, task: Task, source: str | bytes, backend: str = "cpp", size: str | None = None,
               **options) -> Future[EvalResult]:
        return self.submit_job(self.make_job(task, source, backend, size, **options))

    def submit_job(self, job: EvalJob) -> Future[EvalResult]:
        future: Future[EvalResult] = Future()
        with self._lock:
            if self._closed:
                raise PoolClosedError("this RayEvalPool is closed")
            self._pending.append((job, future))
            self._all.add(future)
            self._dispatch()
        return future

    def evaluate(self, task: Task, source: str | bytes, backend: str = "cpp", size: str | None = None,
                 **options) -> EvalResult:
        return self.submit(task, source, backend, size, **options).result()

    def map(self, tasks: Iterable[Task], sources: Iterable[str | bytes], backend: str = "cpp",
            size: str | None = None, **options) -> Iterator[EvalResult]:
        """Results in the order of the inputs; all are submitted at once (the pool bounds what runs)."""
        futures = [self.submit(t, s, backend, size, **options) for t, s in zip(tasks, sources, strict=True)]
        return (f.result() for f in futures)

    def _dispatch(self) -> None:
        """Hand waiting jobs to the least loaded actors that have room (called with the lock held)."""
        while self._pending:
            # the actor with the most room (its share of its limit) takes the next evaluation
            slot = min(self._slots, key=lambda s: s.in_flight / s.limit)
            if slot.in_flight >= slot.limit:
                return
            job, future = self._pending.popleft()
            if not future.set_running_or_notify_cancel():
                self._all.discard(future)
                continue
            slot.in_flight += 1
            self._waiters.submit(self._await, slot, job, future, slot.actor.evaluate.remote(job))

    def _await(self, slot: _Slot, job: EvalJob, future: Future, ref) -> None:
        result = _result_of(job, ref, self.config.max_attempts)
        with self._lock:
            slot.in_flight -= 1
            slot.done += 1
            slot.slot_held_s += result.stage_s.get("slot_held", 0.0)
            self._all.discard(future)
            self._dispatch()
        future.set_result(result)

    def stats(self) -> list[dict]:
        """Per actor: node, workers, evaluations held now and finished, seconds its GPU's timing slot was held
        (over a stretch of wall time, the GPU's busy fraction)."""
        with self._lock:
            return [{"node_id": s.node_id, "workers": s.workers, "in_flight": s.in_flight, "done": s.done,
                     "slot_held_s": round(s.slot_held_s, 3)} for s in self._slots]

    def close(self) -> None:
        """Wait for the evaluations already submitted, then stop the actors (and Ray, if it started it)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            waiting = list(self._all)
        wait_futures(waiting)
        self._waiters.shutdown(wait=True)
        ray = import_ray()
        # A dead or stuck actor is ended by ray.kill below anyway.
        with contextlib.suppress(Exception):
            ray.get([slot.actor.shutdown.remote() for slot in self._slots], timeout=30)
        self._kill_actors()
        if self._owns_ray:
            ray.shutdown()

    def _kill_actors(self) -> None:
        ray = import_ray()
        for slot in self._slots:
            with contextlib.suppress(Exception):
                ray.kill(slot.actor, no_restart=True)

    def __enter__(self) -> RayEvalPool:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # Like EvalPool: gymnasium deep-copies env specs (a copy is the pool itself); an unpickled pool (an async
    # vector env's subprocess) is the receiving process's default pool.
    def __deepcopy__(self, memo) -> RayEvalPool:
        return self

    def __reduce__(self):
        from kernelgym.workers.pool import default_pool

        return (default_pool, ())


def _result_of(job: EvalJob, ref, attempts: int) -> EvalResult:
    """The actor's answer as an EvalResult. An actor lost `attempts` times, or a failure of Ray itself, is the
    judge's fault, never the candidate's: `infrastructure_error` (not judged, never charged), as EvalPool
    answers once its own re-runs on fresh workers are spent."""
    import ray
    from ray.exceptions import RayActorError

    try:
        return EvalResult.from_dict(ray.get(ref))
    except RayActorError as exc:
        detail = f"the evaluation's Ray actor died {attempts} time(s) ({type(exc).__name__}); not judged"
    except Exception as exc:  # noqa: BLE001 - an answer, never an exception out of the pool
        detail = f"the Ray evaluator failed ({type(exc).__name__}: {str(exc)[:300]}); not judged"
    return EvalResult(job.task_id, job.backend, job.size, Verdict.INFRASTRUCTURE_ERROR,
                      [reason(rules.INFRASTRUCTURE, detail)])


def _init_kwargs(config: RayPoolConfig) -> dict:
    import os

    kwargs = {"log_to_driver": False, **config.init_kwargs}
    if config.address is not None:
        kwargs.setdefault("address", config.address)
    elif not os.environ.get("RAY_ADDRESS"):
        kwargs.setdefault("include_dashboard", False)  # a new local cluster: no web server needed
    return kwargs
