"""Where the actors go and what each takes: one per GPU of every node (or a few per CPU node), spread
round-robin over nodes, each reserving its share of its node's CPUs through Ray's own resources."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kernelgym.errors import ConfigError

CPU_ACTORS_PER_NODE = 2  # EvalPool's default on a machine without a GPU


@dataclass(frozen=True)
class ActorShape:
    """What one actor asks of its node."""

    cpus: float  # Ray's CPU resource the actor reserves (its builds and checks run on that many cores)
    workers: int  # the EvalPool workers inside it
    cpu_fraction: float  # its share of the node's cores (the actor pins itself to a slice that size)


def gpu_share_of_cpus(node_cpus: float, gpus: int) -> float:
    """A GPU actor's share of its node's CPUs: all of them split evenly between the node's GPUs, whole cores
    where there are at least as many cores as GPUs (Ray counts resources in steps of 1e-4)."""
    if gpus <= 0 or node_cpus <= 0:
        return 0.0
    if node_cpus >= gpus:
        return float(node_cpus // gpus)
    return math.floor(node_cpus / gpus * 1e4) / 1e4


def actor_shape(node: dict[str, Any], gpu: bool, cpus_per_actor: float | None,
                workers: int | None) -> ActorShape:
    """The shape of an actor on `node` (an entry of `ray.nodes()`). On a GPU node the actor takes its GPU's
    share of the cores and half as many workers (EvalPool's rule on one GPU machine: builds fill every core
    while the evaluations take turns on the GPU's timing slot); on a CPU node one core and one worker."""
    resources = node.get("Resources", {})
    node_cpus = float(resources.get("CPU", 0))
    if gpu:
        share = gpu_share_of_cpus(node_cpus, int(resources.get("GPU", 0)) or 1)
        cpus = share if cpus_per_actor is None else cpus_per_actor
        count = workers or max(1, int(cpus) // 2)
    else:
        cpus = 1.0 if cpus_per_actor is None else cpus_per_actor
        count = workers or 1
    fraction = min(1.0, cpus / node_cpus) if node_cpus > 0 else 1.0
    return ActorShape(cpus, count, fraction)


def node_capacity(node: dict[str, Any], gpu: bool, cpus_per_actor: float | None) -> tuple[int, int]:
    """(default actors, most actors) a node of `ray.nodes()` takes."""
    resources = node.get("Resources", {})
    cpus = float(resources.get("CPU", 0))
    if gpu:
        gpus = int(resources.get("GPU", 0))
        if cpus_per_actor:  # an explicit CPU reservation can bound a node before its GPUs do
            gpus = min(gpus, int(cpus // cpus_per_actor))
        return gpus, gpus
    most = int(cpus // (cpus_per_actor or 1.0))
    return min(CPU_ACTORS_PER_NODE, most), most


def plan(nodes: list[dict[str, Any]], gpu: bool, actors: int | None,
         cpus_per_actor: float | None = None) -> list[str]:
    """The node id of each actor. Nodes are taken in turn, so N actors spread evenly over the nodes."""
    alive = sorted((n for n in nodes if n.get("Alive")), key=lambda n: n["NodeID"])
    capacity = {n["NodeID"]: node_capacity(n, gpu, cpus_per_actor) for n in alive}
    limit = 0 if actors is None else actors
    slots = _round_robin(capacity, index=0)
    if actors is not None and actors > len(slots):
        slots = _round_robin(capacity, index=1)
    if not slots or limit > len(slots):
        kind = "GPUs" if gpu else f"slots of {cpus_per_actor or 1.0:g} CPUs"
        have = sum(most for _, most in capacity.values())
        raise ConfigError(f"the Ray cluster has {have} {kind} for evaluation actors; asked for "
                          f"{actors or 'one per'}")
    return slots if actors is None else slots[:actors]


def _round_robin(capacity: dict[str, tuple[int, int]], index: int) -> list[str]:
    most = max((c[index] for c in capacity.values()), default=0)
    return [node for k in range(most) for node, c in capacity.items() if c[index] > k]


def core_slice(available: list[int], fraction: float, rank: int) -> list[int]:
    """The actor's own slice of the cores it may use: `fraction` of them, the `rank`-th such slice (its GPU's
    index, or its place among the CPU actors of its node). Actors of one node then build and time on
    disjoint cores: a worker pins its reference and candidate by its index inside its pool, so two actors'
    first workers would otherwise share a core and time each other."""
    available = sorted(available)
    count = max(1, min(len(available), round(len(available) * fraction)))
    slices = max(1, len(available) // count)
    start = (rank % slices) * count
    return available[start:start + count]
