"""The evaluator named on a command line: `local` (an EvalPool on this machine) or `ray[://ADDRESS]`."""

from __future__ import annotations


def make_evaluator(spec: str = "local", workers: int | None = None, **ray_options):
    """`local` -> EvalPool(workers); `ray`, `ray://auto`, `ray://HOST:PORT` -> RayEvalPool on that cluster
    (`workers`, when given, is its number of actors)."""
    spec = (spec or "local").strip()
    if spec == "local":
        from kernelgym.workers.pool import EvalPool

        return EvalPool(workers=workers)
    from kernelgym.distributed.config import parse_evaluator
    from kernelgym.distributed.pool import RayEvalPool

    return RayEvalPool(address=parse_evaluator(spec), actors=workers, **ray_options)
