"""Configuration of the Ray evaluator (`kernelgym.distributed.RayEvalPool`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelgym.errors import ConfigError
from kernelgym.workers.pool import PoolConfig


@dataclass
class RayPoolConfig:
    # None: $RAY_ADDRESS, else a new local cluster; "auto": the cluster running on this node;
    # "ray://HOST:PORT":
    # Ray Client. Ignored when ray.init was already called in this process.
    address: str | None = None
    # None: one actor per GPU of the cluster; on a cluster without GPUs, min(2, CPUs) per node (EvalPool's
    # default).
    actors: int | None = None
    gpu: bool | None = None  # None: the cluster has GPUs
    # Back-pressure: evaluations handed to one actor before it answers; None: its workers + 1 (one waits
    # ready).
    in_flight_per_actor: int | None = None
    # an evaluation whose actor died is judged again by its replacement, this often in all
    max_attempts: int = 3
    # Ray's CPU resource each actor reserves. None: on a GPU cluster, the node's CPUs split evenly between
    # its GPUs (the actor pins itself to that many cores, so the GPUs of a node build on every core between
    # them); on a CPU cluster, 1.
    cpus_per_actor: float | None = None
    # KERNELGYM_CACHE of the actors (the content-addressed build cache). None: each node's default folder,
    # shared
    # by the actors of that node. On several nodes, mount one shared folder at the same path on each and name
    # it.
    cache_dir: str | None = None
    # The single-machine pool inside each actor (its workers, sandbox and default EvalOptions). Its workers
    # None: on a GPU, half the actor's CPUs (EvalPool's rule on one GPU machine); on the CPU, 1.
    pool: PoolConfig = field(default_factory=PoolConfig)
    init_kwargs: dict[str, Any] = field(default_factory=dict)  # more ray.init arguments (e.g. num_cpus=2)
    start_timeout_s: float = 300.0  # for every actor to be placed and its worker started

    def __post_init__(self) -> None:
        if self.actors is not None and self.actors < 1:
            raise ConfigError(f"actors must be at least 1, not {self.actors}")
        if self.in_flight_per_actor is not None and self.in_flight_per_actor < 1:
            raise ConfigError(f"in_flight_per_actor must be at least 1, not {self.in_flight_per_actor}")
        if self.max_attempts < 1:
            raise ConfigError(f"max_attempts must be at least 1, not {self.max_attempts}")
        if self.cpus_per_actor is not None and self.cpus_per_actor <= 0:
            raise ConfigError(f"cpus_per_actor must be positive, not {self.cpus_per_actor}")


def parse_evaluator(spec: str) -> str | None:
    """`ray` -> None (RAY_ADDRESS or a local cluster); `ray://auto` -> "auto"; `ray://HOST:PORT` -> itself
    (Ray Client). Anything else is a ConfigError."""
    spec = spec.strip()
    if spec == "ray":
        return None
    if spec.startswith("ray://") and len(spec) > len("ray://"):
        rest = spec[len("ray://"):]
        return rest if rest in ("auto", "local") else spec
    raise ConfigError(f"--evaluator takes 'local', 'ray' or 'ray://ADDRESS', not {spec!r}")
