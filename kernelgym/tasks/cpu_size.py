"""A `cpu` size for tasks that ship only their GPU size (real KernelBench problems).

The module-level integer constants that set tensor sizes (batch_size, dim, in_features, height, ...;
`N = 2048 * 2` too) are halved together `level` times, from the smallest sizes (each such constant at 8)
upwards; the first level whose reference forward pass takes `target_ms` (10 ms) or more is kept, unless it
overshoots 20-fold, then the level below it. A level that raises (a width below a kernel's) is skipped; one
whose inputs and parameters pass 1 GiB ends the search. Timing is on one thread, as the judge times by
default (`EvalOptions.threads`): two threads on a busy two-core machine add tens of ms of waiting to every
call. Constants that set structure (kernel_size, stride, groups, heads, layer counts, ...) and small ones (<
16) are kept. The chosen size then goes through the degenerate-task screen. Results are cached per task
content hash, so a task is measured once per machine.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import time
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.errors import TaskFormatError
from kernelgym.tasks.task import Task, substitute_constants

VERSION = 4  # bump when the search changes: cached sizes of an older search are measured again
# Words of a constant's name that mark structure, not size (`kernel_size`, `num_heads`, `top_k`).
STRUCTURAL = {
    "kernel",
    "stride",
    "padding",
    "pad",
    "dilation",
    "groups",
    "group",
    "heads",
    "head",
    "pool",
    "patch",
    "window",
    "clusters",
    "expansion",
    "ratio",
    "state",
    "top",
    "multiplier",
}
COUNTS = {"layers", "layer", "blocks"}  # `num_layers` is structure; `layer_sizes` is a size
SMALLEST_SCALED = 16  # constants below this are structure (channels of an image, a dim index): kept
FLOOR = 8  # a scaled constant never goes below this
MAX_LEVELS = 24
MAX_BYTES = 1 << 30  # inputs plus parameters: a level above this is never run
MAX_OVERSHOOT = 20  # the first level at or above the target is kept, unless it takes this many times it


class SizeUnavailableError(TaskFormatError):
    """No cpu size could be derived for a task (nothing to scale, or no scaled level runs)."""


@dataclass
class CpuSize:
    task_id: str
    constants: dict[str, Any] = field(default_factory=dict)
    reference_ms: float | None = None
    level: int = 0  # halvings applied
    screen_flags: list[str] = field(default_factory=list)
    error: str = ""


def size_constants(source: str) -> dict[str, Any]:
    """Top-level `NAME = <int>` or `NAME = [<int>, ...]` assignments that look like tensor sizes."""
    found: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, ast.Assign):
            continue
        for name, value_node in _assigned(node):
            value = _constant_value(value_node)
            if not _structural(name) and _is_size(value):
                found[name] = value
    return found


def _is_size(value: Any) -> bool:
    if _is_int(value):
        return value >= SMALLEST_SCALED
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(_is_int(v) for v in value)
        and max(value) >= SMALLEST_SCALED
    )


def _assigned(node: ast.Assign) -> list[tuple[str, ast.expr]]:
    """(name, value) of `a = v`, `a = b = v` and `a, b = v1, v2` (what substitute_constants can rewrite)."""
    if all(isinstance(t, ast.Name) for t in node.targets):
        return [(t.id, node.value) for t in node.targets]
    target = node.targets[0]
    if (
        len(node.targets) == 1
        and isinstance(target, ast.Tuple)
        and isinstance(node.value, ast.Tuple)
        and len(target.elts) == len(node.value.elts)
    ):
        return [(t.id, v) for t, v in zip(target.elts, node.value.elts) if isinstance(t, ast.Name)]
    return []


_ARITHMETIC = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Pow: lambda a, b: a**b,
}


def _constant_value(node: ast.AST) -> Any:
    """A literal, or integer arithmetic on literals (`N = 2048 * 2`); None for anything else."""
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _constant_value(node.left), _constant_value(node.right)
        if _is_int(left) and _is_int(right) and not (isinstance(node.op, ast.Pow) and right > 64):
            return (
                _ARITHMETIC[type(node.op)](left, right)
                if right or not isinstance(node.op, ast.FloorDiv)
                else None
            )
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _structural(name: str) -> bool:
    words = set(name.lower().split("_"))
    return bool(words & STRUCTURAL) or (
        bool(words & COUNTS) and not words & {"size", "sizes", "dim", "features"}
    )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _halve(value: int, times: int) -> int:
    for _ in range(times):
        if value < SMALLEST_SCALED or value // 2 < FLOOR:
            break
        value = value // 2 if value % 2 == 0 else (value + 1) // 2
    return value


def scaled(constants: dict[str, Any], level: int) -> dict[str, Any]:
    """Every size constant halved `level` times (never below FLOOR; small ones kept as they are)."""
    out: dict[str, Any] = {}
    for name, value in constants.items():
        if isinstance(value, list | tuple):
            out[name] = type(value)(_halve(v, level) for v in value)
        else:
            out[name] = _halve(value, level)
    return out


def _levels_needed(constants: dict[str, Any]) -> int:
    largest = max(max(v) if isinstance(v, list | tuple) else v for v in constants.values())
    return min(MAX_LEVELS, max(1, (largest // FLOOR).bit_length()))


def reference_ms(source: str, threads: int = 1) -> float:
    """Median ms of the reference's forward at this source's sizes; raises when it fails or is too big."""
    import torch

    module = types.ModuleType("kernelgym_cpu_size")
    exec(compile(source, "<cpu size>", "exec"), module.__dict__)  # noqa: S102 (the task's own reference, as in the screen)
    torch.manual_seed(0)
    inputs = list(module.get_inputs())
    nbytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
    if nbytes > MAX_BYTES:
        raise MemoryError(f"inputs of {nbytes / 2**20:.0f} MiB")
    model = module.Model(*module.get_init_inputs())
    nbytes += sum(p.numel() * p.element_size() for p in model.parameters())
    if nbytes > MAX_BYTES:
        raise MemoryError(f"inputs and parameters of {nbytes / 2**20:.0f} MiB")
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            model(*inputs)  # warm-up
            times = []
            for _ in range(5):
                start = time.perf_counter()
                model(*inputs)
                times.append((time.perf_counter() - start) * 1000)
                if sum(times) > 1000:
                    break
    finally:
        torch.set_num_threads(previous)
    return min(times)  # the least disturbed run: other processes on the machine only ever add time


def derive_cpu_size(task: Task, *, target_ms: float = 10.0, threads: int = 1) -> CpuSize:
    """Search the halving levels for the smallest one whose reference takes `target_ms` (module doc)."""
    from kernelgym.tasks.screen import screen_task

    result = CpuSize(task.id)
    try:
        constants = size_constants(task.source)
    except SyntaxError as exc:
        result.error = f"the task is not valid Python ({exc.msg})"
        return result
    if not constants:
        result.error = "it has no module-level size constants (e.g. batch_size = 128) to scale down"
        return result
    chosen: tuple[int, float] | None = None
    failures: list[str] = []
    for level in range(_levels_needed(constants), -1, -1):  # smallest sizes first
        overrides = scaled(constants, level)
        try:
            ms = reference_ms(substitute_constants(task.source, overrides), threads)
        except MemoryError as exc:
            failures.append(f"level {level}: {exc} (over the {MAX_BYTES >> 20} MiB limit)")
            break  # larger levels only grow
        except Exception as exc:  # noqa: BLE001 (a size the model cannot take, e.g. smaller than its kernel)
            failures.append(f"level {level}: {type(exc).__name__}: {str(exc)[:120]}")
            continue
        if ms >= target_ms:
            # One level can multiply the time by 2**(number of constants): past MAX_OVERSHOOT times the
            # target, the level below is kept (a quicker reference beats a far too slow one).
            if chosen is None or ms <= MAX_OVERSHOOT * target_ms:
                chosen = (level, ms)
            break
        chosen = (level, ms)
    if chosen is None:
        result.error = "no scaled size runs: " + "; ".join(failures[-3:])
        return result
    result.level, result.reference_ms = chosen[0], round(chosen[1], 3)
    result.constants = {k: v for k, v in scaled(constants, chosen[0]).items() if v != constants[k]}
    sized = dataclasses.replace(task, sizes={**task.sizes, "cpu": result.constants})
    # screened also when no halving was needed (the file's own size): else a degenerate task whose
    # reference is already quick enough, or a fast machine, would go unscreened
    result.screen_flags = list(screen_task(sized, "cpu").flags)
    return result


def _cache_path(task: Task) -> Path:
    from kernelgym.kernels import cache_root

    return cache_root() / "cpu_sizes" / f"{task.content_hash[:32]}.v{VERSION}.json"


def cpu_size(task: Task, *, refresh: bool = False) -> CpuSize:
    """The task's derived cpu size, from the cache when it was measured before."""
    path = _cache_path(task)
    if not refresh and path.is_file():
        try:
            data = json.loads(path.read_text())
            if isinstance(data.get("constants"), dict):  # tuples come back as lists: both index alike
                return CpuSize(**{**data, "task_id": task.id})
        except (ValueError, TypeError):
            pass  # a damaged entry is measured again
    result = derive_cpu_size(task)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(result)))
        tmp.replace(path)
    except OSError:
        pass  # a read-only cache only costs the measurement next time
    return result


def with_cpu_size(task: Task) -> Task:
    """`task` with a `cpu` size: its own when it has one, else a derived one; raises when none can be made."""
    if task.has_size("cpu"):
        return task
    found = cpu_size(task)
    if found.error:
        raise SizeUnavailableError(
            f"{task.id} cannot be scaled to a cpu size: {found.error}. Use size='gpu' "
            "(on a GPU), or add a KERNELGYM = {'sizes': {'cpu': {...}}} literal to the file"
        )
    if found.screen_flags:
        warnings.warn(
            f"{task.id} at its derived cpu size {found.constants}: the degenerate-task screen flags "
            f"{'; '.join(found.screen_flags)}",
            stacklevel=2,
        )
    return dataclasses.replace(task, sizes={**task.sizes, "cpu": dict(found.constants)})
