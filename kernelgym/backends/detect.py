"""Which backend a solution is written for, read from the calls and decorators that build its kernels.

Used before judging so that a solution for another backend (C++ `load_cpp` sent to the cuda backend, a
Triton kernel sent to cpp) is a contract error that names both backends, rather than failing a later rule.
"""

from __future__ import annotations

import ast

from kernelgym.backends import Backend, get, names


def _last(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def markers(backend: Backend) -> set[str]:
    return {_last(b) for b in backend.kernel_builders} | {_last(d) for d in backend.kernel_decorators}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _imported(tree: ast.Module) -> dict[str, str]:
    """Names bound by `from M import x [as y]` (y -> M.x) and `import M as y` (y -> M), so that a bare
    `load(...)` or `ext.load(...)` can be told apart."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            bound.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
        elif isinstance(node, ast.Import):
            bound.update({a.asname: a.name for a in node.names if a.asname})
    return bound


def _marker(dotted: str) -> str:
    name = _last(dotted)
    # `load` alone is every library's reader (json.load, torch.load): only torch's extension loader counts
    return "" if name == "load" and not dotted.endswith("cpp_extension.load") else name


def _empty(value: ast.expr) -> bool:
    """`cuda_sources=None`, `[]`, `()` or `""`: no CUDA source (models write it out on CPU builds)."""
    return (isinstance(value, ast.Constant) and not value.value) or (
        isinstance(value, ast.List | ast.Tuple) and not value.elts)


def _builders() -> set[str]:
    return {marker for n in names() for marker in markers(get(n))}


def used_markers(tree: ast.Module) -> set[str]:
    """Markers of every called function and decorator (`load_inline(cuda_sources=...)` is load_cuda), and
    of a builder passed on or bound to another name (`functools.partial(load_inline, ...)`,
    `build = load_inline`): what is then called through that name is judged by what runs."""
    imported = _imported(tree)
    builders = _builders()

    def resolved(node: ast.AST) -> str:
        dotted = _dotted(node)
        head, _, rest = dotted.partition(".")
        return _marker(f"{imported[head]}.{rest}".rstrip(".") if head in imported else dotted)

    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = [resolved(node.func)]
            called += [m for m in map(resolved, node.args) if m in builders]  # partial(load_inline, ...)
            used.update(called)
            if "load_inline" in called and any(k.arg == "cuda_sources" and not _empty(k.value)
                                               for k in node.keywords):
                used.add("load_cuda")
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            if (name := resolved(node.value)) in builders:  # build = load_inline
                used.add(name)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                used.add(_last(_dotted(dec.func if isinstance(dec, ast.Call) else dec)))
    used.discard("")
    return used


def written_for(source: str) -> list[str]:
    """Backends whose kernel markers the source uses (empty when it uses none or does not parse)."""
    try:
        used = used_markers(ast.parse(source))
    except (SyntaxError, ValueError):
        return []
    return [n for n in names() if markers(get(n)) & used]


def wrong_backend(source: str, backend: str) -> str | None:
    """A contract reason when the source builds kernels only for other backends, else None."""
    try:
        used = used_markers(ast.parse(source))
    except (SyntaxError, ValueError):
        return None  # the judge reports the syntax error itself
    target = markers(get(backend))
    if "load_cuda" in used and backend == "cpp":
        used.discard("load_inline")  # load_inline with cuda_sources is a CUDA build
    if target & used:
        return None
    others = {n: sorted(markers(get(n)) & used - target) for n in names() if n != backend}
    others = {n: m for n, m in others.items() if m}
    if not others:
        return None
    found = "; ".join(f"{', '.join(m)} (the {n} backend)" for n, m in sorted(others.items()))
    expected = ", ".join(sorted(target))
    return (
        f"this solution builds its kernels with {found}, but it is judged on the {backend} "
        f"backend, whose kernels come from {expected}; rewrite it for {backend}"
    )
