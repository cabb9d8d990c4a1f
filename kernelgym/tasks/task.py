"""The Task dataclass: one KernelBench-format problem and what kernelgym needs to run it."""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from kernelgym.errors import TaskFormatError
from kernelgym.tasks.categories import guess_category

FILE_NAME = re.compile(r"^(?P<pid>\d+)_(?P<name>.+)\.py$")  # KernelBench's `<id>_<Name>.py`

# Keys of the optional top-level `KERNELGYM = {...}` dict in a task file (read with literal_eval, never run).
METADATA_NAME = "KERNELGYM"
SIZES = ("gpu", "cpu")


@dataclass(frozen=True)
class Task:
    """A reference `Model` with `get_inputs`/`get_init_inputs`, plus the metadata the evaluator uses.

    `sizes` maps a size preset to module-level constants that replace the file's own ones; the file's own
    constants are the `gpu` size (so the file stays loadable by KernelBench's tooling unchanged).
    """

    id: str
    suite: str
    level: int
    problem_id: int
    name: str
    category: str
    source: str
    path: str | None = None
    dtype: str = "float32"
    atol: float | None = None
    rtol: float | None = None
    sizes: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False, hash=False)
    # How correctness trials may redraw float inputs: "signed" (scaled and shifted), "positive" (scaled only,
    # for log/sqrt-like ops) or "none" (the task's own distribution only).
    perturb: str = "signed"
    # Held-out shapes: per size, the limits within which the judge may redraw each integer constant, as
    # [low, high] or [low, high, step] (a multiple of step). {} when the task's shapes are fixed.
    shape_limits: dict[str, dict[str, list[int]]] = field(default_factory=dict, compare=False, hash=False)
    # Forward and backward: ModelNew must also give autograd's gradients for an upstream gradient.
    backward: bool = False

    @cached_property
    def content_hash(self) -> str:
        """sha256 of the parsed module: comments and formatting do not change it."""
        return content_hash(self.source)

    def has_size(self, size: str) -> bool:
        return size == "gpu" or size in self.sizes

    def source_at(self, size: str) -> str:
        """The module source with the constants of `size` substituted (the gpu size is the file as is)."""
        if size not in SIZES:
            raise TaskFormatError(f"unknown size {size!r}; expected one of {SIZES}")
        overrides = self.sizes.get(size, {}) if size != "gpu" else {}
        return substitute_constants(self.source, overrides) if overrides else self.source

    def shape_limits_at(self, size: str) -> dict[str, list[int]]:
        """The redraw limits of `size` ({} when the task states none for it)."""
        return dict(self.shape_limits.get(size, {}))

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "suite": self.suite,
            "level": self.level,
            "problem_id": self.problem_id,
            "name": self.name,
            "category": self.category,
            "dtype": self.dtype,
            "backward": self.backward,
            "shape_variants": bool(self.shape_limits),
            "sizes": ["gpu", *[s for s in self.sizes if s != "gpu"]],
            "content_hash": self.content_hash[:16],
            "path": self.path,
        }


def content_hash(source: str) -> str:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return hashlib.sha256(source.encode("utf-8", "replace")).hexdigest()
    return hashlib.sha256(ast.dump(tree, annotate_fields=False).encode()).hexdigest()


def read_metadata(source: str, origin: str = "<task>") -> dict[str, Any]:
    """The task file's `KERNELGYM = {...}` literal, or {} when it has none."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TaskFormatError(f"{origin}: not valid Python ({exc.msg}, line {exc.lineno})") from None
    defined = {node.name for node in tree.body if isinstance(node, ast.ClassDef | ast.FunctionDef)}
    missing = {"Model", "get_inputs", "get_init_inputs"} - defined
    if missing:
        raise TaskFormatError(f"{origin}: no {', '.join(sorted(missing))} (a KernelBench problem defines "
                              "Model, get_inputs and get_init_inputs at the top level)")
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == METADATA_NAME
        ):
            try:
                meta = ast.literal_eval(node.value)
            except ValueError:
                raise TaskFormatError(f"{origin}: {METADATA_NAME} must be a literal dict") from None
            if not isinstance(meta, dict):
                raise TaskFormatError(f"{origin}: {METADATA_NAME} must be a dict")
            return meta
    return {}


def substitute_constants(source: str, overrides: dict[str, Any]) -> str:
    """Rewrite top-level `NAME = ...` assignments for the names in `overrides`.

    Done on the AST so that constants derived later in the file (`dim = hidden * 4`) follow the new values.
    """
    tree = ast.parse(source)
    seen: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            seen |= _substitute(node, targets, overrides)
    unknown = set(overrides) - seen
    if unknown:
        raise TaskFormatError(f"size preset names constants the file does not define: {sorted(unknown)}")
    return ast.unparse(ast.fix_missing_locations(tree))


def _literal(value: Any) -> ast.expr:
    return ast.parse(repr(value), mode="eval").body


def _substitute(node: ast.Assign | ast.AnnAssign, targets: list[ast.expr],
                overrides: dict[str, Any]) -> set[str]:
    """Overrides for `a = v`, `a = b = v` (one value for all) and `a, b = v1, v2`; the names it replaced."""
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    if names and len(names) == len(targets) and any(n in overrides for n in names):
        values = {repr(overrides.get(n)) for n in names if n in overrides}
        if len(values) == 1 and all(n in overrides for n in names):
            node.value = _literal(overrides[names[0]])
            return set(names)
        raise TaskFormatError(f"size preset sets {names} to different values, but the file assigns them "
                              "together")
    if (len(targets) == 1 and isinstance(targets[0], ast.Tuple) and isinstance(node.value, ast.Tuple)
            and len(targets[0].elts) == len(node.value.elts)):
        replaced = set()
        for i, element in enumerate(targets[0].elts):
            if isinstance(element, ast.Name) and element.id in overrides:
                node.value.elts[i] = _literal(overrides[element.id])
                replaced.add(element.id)
        return replaced
    return set()


def constant_values(source: str) -> dict[str, Any]:
    """The module's top-level `NAME = <literal>` constants (what size presets and shape variants replace)."""
    values: dict[str, Any] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return values


def draw_shape_variant(source: str, limits: dict[str, list[int]], rng) -> dict[str, int]:
    """One held-out shape: each limited constant redrawn within [low, high] (a multiple of step), away from
    its shown value wherever the limits leave another choice."""
    shown = constant_values(source)
    variant = {}
    for name, bounds in sorted(limits.items()):
        low, high, step = (*bounds, 1)[:3]
        choices = list(range(-(-low // step) * step, high + 1, step)) or [low]
        others = [v for v in choices if v != shown.get(name)]
        variant[name] = rng.choice(others or choices)
    return variant


def task_from_source(
    source: str, *, suite: str, level: int, file_name: str, path: str | None = None,
    problem_id: int | None = None
) -> Task:
    """Build a Task from a KernelBench-format module's text; the metadata literal, if any, fills the rest."""
    stem = file_name.removesuffix(".py")
    match = FILE_NAME.match(stem + ".py")
    pid = problem_id if problem_id is not None else int(match["pid"]) if match else 0
    name = match["name"] if match else stem
    short = f"{pid}_{name}" if match or problem_id is not None else stem  # a file without a number: its name
    meta = read_metadata(source, origin=path or file_name)
    sizes = dict(meta.get("sizes", {}))
    _check_sizes(sizes, path or file_name)
    shape_limits = dict(meta.get("shapes", {}))
    _check_shape_limits(shape_limits, path or file_name)
    return Task(
        id=f"{suite}/L{level}/{short}",
        suite=suite,
        level=level,
        problem_id=pid,
        name=name,
        category=str(meta.get("category") or guess_category(name, level)),
        source=source,
        path=path,
        dtype=str(meta.get("dtype", "float32")),
        atol=meta.get("atol"),
        rtol=meta.get("rtol"),
        sizes=sizes,
        perturb=str(meta.get("perturb", "signed")),
        shape_limits=shape_limits,
        backward=bool(meta.get("backward", False)),
    )


def _check_sizes(sizes: dict[str, Any], origin: str) -> None:
    for size, constants in sizes.items():
        if size not in ("cpu", "gpu") or not isinstance(constants, dict):
            raise TaskFormatError(f"{origin}: sizes must map 'cpu'/'gpu' to dicts of constants")


def _check_shape_limits(limits: dict[str, Any], origin: str) -> None:
    for size, constants in limits.items():
        if size not in ("cpu", "gpu") or not isinstance(constants, dict):
            raise TaskFormatError(f"{origin}: shapes must map 'cpu'/'gpu' to dicts of constant limits")
        for name, bounds in constants.items():
            ok = (isinstance(bounds, list | tuple) and len(bounds) in (2, 3)
                  and all(isinstance(b, int) and b >= 1 for b in bounds) and bounds[0] <= bounds[1])
            if not ok:
                raise TaskFormatError(f"{origin}: shapes[{size!r}][{name!r}] must be [low, high] or "
                                      "[low, high, step] of positive integers, low <= high")
