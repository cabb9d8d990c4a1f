"""Where the actors go: one per GPU of every node, or a few per CPU node, spread round-robin over nodes."""

from __future__ import annotations

from typing import Any

from kernelgym.errors import ConfigError

CPU_ACTORS_PER_NODE = 2  # EvalPool's default on a machine without a GPU


def node_capacity(node: dict[str, Any], gpu: bool, cpus_per_actor: float) -> tuple[int, int]:
    """(default actors, most actors) a node of `ray.nodes()` takes."""
    resources = node.get("Resources", {})
    if gpu:
        gpus = int(resources.get("GPU", 0))
        return gpus, gpus
    most = int(resources.get("CPU", 0) // cpus_per_actor)
    return min(CPU_ACTORS_PER_NODE, most), most


def plan(nodes: list[dict[str, Any]], gpu: bool, actors: int | None,
         cpus_per_actor: float = 1.0) -> list[str]:
    """The node id of each actor. Nodes are taken in turn, so N actors spread evenly over the nodes."""
    alive = sorted((n for n in nodes if n.get("Alive")), key=lambda n: n["NodeID"])
    capacity = {n["NodeID"]: node_capacity(n, gpu, cpus_per_actor) for n in alive}
    limit = 0 if actors is None else actors
    slots = _round_robin(capacity, index=0)
    if actors is not None and actors > len(slots):
        slots = _round_robin(capacity, index=1)
    if not slots or limit > len(slots):
        kind = "GPUs" if gpu else f"slots of {cpus_per_actor:g} CPUs"
        have = sum(most for _, most in capacity.values())
        raise ConfigError(f"the Ray cluster has {have} {kind} for evaluation actors; asked for "
                          f"{actors or 'one per'}")
    return slots if actors is None else slots[:actors]


def _round_robin(capacity: dict[str, tuple[int, int]], index: int) -> list[str]:
    most = max((c[index] for c in capacity.values()), default=0)
    return [node for k in range(most) for node, c in capacity.items() if c[index] > k]
