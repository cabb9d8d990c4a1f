"""Static stage: the solution contract, and the few cheats no honest solution writes (an AST pass).

Everything else is judged by what runs: timing, outputs and CPU time are measured outside the candidate's
process, so a static ban list would only reject honest code (KernelBench's own checker flagged defensive
try/except on honest completions). Style is never evidence here. Each finding is a `Reason`.
"""

from __future__ import annotations

import ast

from kernelgym.backends import Backend, detect
from kernelgym.evaluation import rules
from kernelgym.evaluation.result import StaticResult
from kernelgym.evaluation.rules import Reason, reason

MAX_SOURCE_BYTES = 1_000_000

# Replacing these in a solution is a timing cheat by intent (KernelBench's strict checks agree).
TIMER_ATTRIBUTES = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns",
                    "process_time", "synchronize", "elapsed_time", "Event", "record"}
TIMER_OWNERS = {"time", "torch.cuda", "torch.cuda.Event", "cuda", "Event"}
COMPARISON_ATTRIBUTES = {"allclose", "isclose", "equal", "assert_close", "__eq__", "__ne__"}


def static_check(source: str, backend: Backend, task_dtype: str = "float32") -> StaticResult:
    """The contract and the unambiguous cheats. `passed` is False when a rule fires; `reasons` says which."""
    if len(source.encode("utf-8", "replace")) > MAX_SOURCE_BYTES:
        return _fail(reason(rules.SOURCE_TOO_LARGE, f"the solution is over {MAX_SOURCE_BYTES // 1000} kB"))
    if not source.strip():
        return _fail(reason(rules.EMPTY_SOURCE, "the solution is empty"))
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        hint = ""
        if source.lstrip().startswith(("#include", "#pragma", "#define", "__global__", "extern \"C\"")):
            hint = ("; this looks like C++/CUDA: a solution is a Python module that defines ModelNew and "
                    "builds its kernel from there (e.g. torch.utils.cpp_extension.load_inline)")
        elif "```" in source:
            hint = ("; this looks like a Markdown reply: a solution is the Python module alone, the code "
                    "inside the fence (an env takes whole replies: kernelgym.envs.parsing.parse_reply)")
        return _fail(reason(rules.SYNTAX_ERROR, f"{exc.msg} (line {exc.lineno}){hint}"))
    except ValueError as exc:  # e.g. null bytes
        return _fail(reason(rules.SYNTAX_ERROR, str(exc)))
    findings = _contract(tree, backend) or _cheats(tree)
    return StaticResult(passed=not findings, reasons=findings)


def _fail(finding: Reason) -> StaticResult:
    return StaticResult(False, [finding])


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else node.attr
    if isinstance(node, ast.Call):
        return _dotted(node.func)
    return ""


def _model_new(tree: ast.Module) -> ast.ClassDef | str | None:
    """The class ModelNew names: its definition; the name of what it is bound to (`ModelNew = Fused`), for a
    class defined elsewhere or made at run time, whose contract only the run can check; or None."""
    classes = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    bound = None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            bound = node
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ModelNew"
                                                  for t in node.targets):
            named = node.value.id if isinstance(node.value, ast.Name) else ""
            bound = classes.get(named) or (named or "an expression")
    if bound is None:  # a definition nested elsewhere (inside a guard): the last one
        nested = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
        bound = nested[-1] if nested else None
    return bound


def _has_forward(model_new: ast.ClassDef) -> bool:
    for node in model_new.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "forward":
            return True
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == "forward" for t in targets):  # forward = _fused
            return True
    return False


def _contract(tree: ast.Module, backend: Backend) -> list[Reason]:
    model_new = _model_new(tree)
    if model_new is None:
        return [reason(rules.NO_MODEL_NEW, "the module defines no class ModelNew")]
    if isinstance(model_new, str):  # bound to a class this module does not define: the run checks it
        return [] if _defines_kernel(tree, backend) else _no_kernel(backend)
    has_forward = _has_forward(model_new)
    bases = {_dotted(b) for b in model_new.bases}
    if not has_forward and bases & {"Model", "kernelgym_task.Model"}:
        return [reason(rules.INHERITS_REFERENCE,
                       f"ModelNew derives from Model and changes nothing (line {model_new.lineno})")]
    if not has_forward and not bases - {"nn.Module", "torch.nn.Module", "Module"}:
        return [reason(rules.NO_FORWARD, f"ModelNew defines no forward (line {model_new.lineno})")]
    if not _defines_kernel(tree, backend):
        return _no_kernel(backend)
    return []


def _no_kernel(backend: Backend) -> list[Reason]:
    what = ("a @triton.jit function" if backend.kernel_decorators
            else " or ".join(b for b in backend.kernel_builders if "." not in b))
    return [reason(rules.NO_KERNEL,
                   f"no {backend.name} kernel is defined: write one and build it with {what}")]


def _defines_kernel(tree: ast.Module, backend: Backend) -> bool:
    """A call to one of the backend's builders, or a decorated kernel, anywhere in the module (whatever name,
    wrapper, getter or container the kernel is reached through later: that is judged by what runs)."""
    return bool(detect.used_markers(tree) & detect.markers(backend))


def _cheats(tree: ast.Module) -> list[Reason]:
    findings: list[Reason] = []
    names = _constant_names(tree)
    for node in ast.walk(tree):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Call) and _dotted(node.func) == "setattr" and len(node.args) >= 2:
            owner, name = node.args[0], _folded(node.args[1], names)
            if name is not None:
                targets = [ast.Attribute(value=owner, attr=name, lineno=node.lineno)]
        for target in targets:
            finding = _patch(_as_attribute(target, names))
            if finding:
                findings.append(finding)
    return list(dict.fromkeys(findings))


def _folded(node: ast.AST, names: dict[str, str]) -> str | None:
    """A string the source computes from constants alone ("perf_" + "counter", f-strings of constants,
    "".join of them, a module-level name bound once to one), or None. Cheap to follow; what it cannot fold
    is left to the runtime checks, which never trust the candidate's clock or comparisons anyway."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else None
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _folded(node.left, names), _folded(node.right, names)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [_folded(v.value if isinstance(v, ast.FormattedValue) else v, names) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" \
            and len(node.args) == 1 and isinstance(node.args[0], ast.List | ast.Tuple):
        sep = _folded(node.func.value, names)
        parts = [_folded(e, names) for e in node.args[0].elts]
        return sep.join(parts) if sep is not None and all(p is not None for p in parts) else None
    return None


def _constant_names(tree: ast.Module) -> dict[str, str]:
    """Module-level names bound exactly once in the whole module, to a string that folds."""
    from collections import Counter

    stores = Counter(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    values = {node.targets[0].id: node.value for node in tree.body
              if isinstance(node, ast.Assign) and len(node.targets) == 1
              and isinstance(node.targets[0], ast.Name) and stores[node.targets[0].id] == 1}
    names: dict[str, str] = {}
    for _ in range(3):  # names built from names
        for name, value in values.items():
            folded = _folded(value, names)
            if folded is not None:
                names[name] = folded
    return names


def _as_attribute(target: ast.AST, names: dict[str, str]) -> ast.AST:
    """`owner.__dict__[key]` and `vars(owner)[key]`, with a key that folds, are `owner.key`."""
    if not isinstance(target, ast.Subscript):
        return target
    key = _folded(target.slice, names)
    holder = target.value
    owner = None
    if isinstance(holder, ast.Attribute) and holder.attr == "__dict__":
        owner = holder.value
    elif isinstance(holder, ast.Call) and _dotted(holder.func) == "vars" and len(holder.args) == 1:
        owner = holder.args[0]
    if owner is None or key is None:
        return target
    return ast.Attribute(value=owner, attr=key, lineno=getattr(target, "lineno", 0))


def _patch(target: ast.AST) -> Reason | None:
    if not isinstance(target, ast.Attribute):
        return None
    owner = _dotted(target.value)
    line = getattr(target, "lineno", 0)
    if target.attr in TIMER_ATTRIBUTES and owner in TIMER_OWNERS:
        return reason(rules.TIMER_PATCH, f"{owner}.{target.attr} is replaced (line {line})")
    if target.attr in COMPARISON_ATTRIBUTES and owner in ("torch", "torch.testing", "torch.Tensor", "Tensor"):
        return reason(rules.COMPARISON_PATCH, f"{owner}.{target.attr} is replaced (line {line})")
    return None
