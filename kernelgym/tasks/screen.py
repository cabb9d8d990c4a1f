"""The degenerate-task screen: references whose output a trivial answer could match.

Flags a task whose output is NaN/Inf, constant (the same for different inputs), nearly constant across its
elements, independent of one of its inputs, or so small that an all-zeros answer passes the tolerance.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

import torch

from kernelgym.evaluation.compare import tolerance
from kernelgym.tasks.task import Task


@dataclass
class ScreenResult:
    task_id: str
    flags: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def passed(self) -> bool:
        return not self.flags and not self.error

    def to_dict(self) -> dict:
        return {"id": self.task_id, "passed": self.passed, "flags": self.flags, "error": self.error}


def _load(task: Task, size: str) -> types.ModuleType:
    module = types.ModuleType("kernelgym_screen")
    # screening runs the task's own reference module, trusted like any task
    exec(compile(task.source_at(size), task.path or task.id, "exec"), module.__dict__)  # noqa: S102
    return module


def _outputs(model, inputs) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(*inputs)
    items = list(out) if isinstance(out, tuple | list) else [out]
    tensors = [o for o in items if isinstance(o, torch.Tensor)]
    return [o.detach().double() if o.is_floating_point() else o.detach() for o in tensors]


def screen_task(task: Task, size: str = "cpu") -> ScreenResult:
    result = ScreenResult(task.id)
    size = size if task.has_size(size) else "gpu"
    try:
        module = _load(task, size)
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        torch.manual_seed(1)
        base_inputs = list(module.get_inputs())
        torch.manual_seed(2)
        other_inputs = list(module.get_inputs())
        base = _outputs(model, base_inputs)
        other = _outputs(model, other_inputs)
    except Exception as exc:  # noqa: BLE001 - a task that fails to run is a screening finding, not a crash
        result.error = f"{type(exc).__name__}: {exc}"[:300]
        return result
    atol, rtol = tolerance(task.dtype, task.atol, task.rtol)
    for k, (a, b) in enumerate(zip(base, other)):
        label = f"output {k}" if len(base) > 1 else "output"
        if a.is_floating_point() and not bool(torch.isfinite(a).all()):
            result.flags.append(f"non_finite: {label} has NaN/Inf values")
            continue
        if a.shape == b.shape and torch.allclose(a, b, atol=atol, rtol=rtol):
            result.flags.append(f"constant_output: {label} is the same for different inputs")
        elif (a.is_floating_point() and a.numel() > 1
              and float(a.std()) <= 1e-3 * float(a.abs().mean()) + atol):
            result.flags.append(f"nearly_constant: {label} barely varies across its elements")
        if a.is_floating_point() and torch.allclose(torch.zeros_like(a), a, atol=atol, rtol=rtol):
            result.flags.append(f"zeros_pass: an all-zeros {label} is within atol={atol:g}")
    # Each input must matter: redraw one input at a time and see the output move.
    for i, (x, y) in enumerate(zip(base_inputs, other_inputs)):
        if not isinstance(x, torch.Tensor) or torch.equal(x, y):
            continue
        mixed = [y if j == i else v for j, v in enumerate(base_inputs)]
        try:
            changed = _outputs(model, mixed)
        except Exception:  # noqa: BLE001, S112 - inputs the model rejects say nothing about this input
            continue
        if all(a.shape == c.shape and torch.allclose(a, c, atol=atol, rtol=rtol)
               for a, c in zip(base, changed)):
            result.flags.append(f"ignores_input: the output does not depend on input {i}")
    return result
