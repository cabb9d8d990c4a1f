"""EvalJob: one evaluation as the pool hands it to a worker. Plain data, light to import (no torch), so that
what submits jobs (the pool, the CLI, the Ray actors) starts quickly."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelgym.evaluation.options import EvalOptions


@dataclass
class EvalJob:
    """One evaluation as the pool hands it to a worker (plain data)."""

    task_id: str
    task_source: str  # at the chosen size
    dtype: str
    atol: float | None
    rtol: float | None
    perturb: str
    solution_source: str
    backend: str
    size: str
    options: EvalOptions = field(default_factory=EvalOptions)
    shape_limits: dict[str, list[int]] = field(default_factory=dict)  # at the chosen size (held-out shapes)
    backward: bool = False  # forward and backward are judged
