"""Which backend a solution is written for, read from the calls and decorators that build its kernels.

Used before judging so that a solution for another backend (C++ `load_cpp` sent to the cuda backend, a
Triton kernel sent to cpp) is a contract error that names both backends, rather than failing a later rule.
"""

from __future__ import annotations

import ast

from kernelgym.backends import Backend, get, names


def _last(dotted: str) -> str:
    return dotted.rsplit(".", 1)[-1]


def _markers(backend: Backend) -> set[str]:
    return {_last(b) for b in backend.kernel_builders} | {_last(d) for d in backend.kernel_decorators}


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _used_markers(tree: ast.Module) -> set[str]:
    """Last names of every called function and decorator (`load_inline(cuda_sources=...)` is load_cuda)."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _last(_dotted(node.func))
            used.add(name)
            if name == "load_inline" and any(k.arg == "cuda_sources" for k in node.keywords):
                used.add("load_cuda")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for dec in node.decorator_list:
                used.add(_last(_dotted(dec.func if isinstance(dec, ast.Call) else dec)))
    return used


def written_for(source: str) -> list[str]:
    """Backends whose kernel markers the source uses (empty when it uses none or does not parse)."""
    try:
        used = _used_markers(ast.parse(source))
    except (SyntaxError, ValueError):
        return []
    return [n for n in names() if _markers(get(n)) & used]


def wrong_backend(source: str, backend: str) -> str | None:
    """A contract reason when the source builds kernels only for other backends, else None."""
    try:
        used = _used_markers(ast.parse(source))
    except (SyntaxError, ValueError):
        return None  # the judge reports the syntax error itself
    target = _markers(get(backend))
    if "load_cuda" in used and backend == "cpp":
        used.discard("load_inline")  # load_inline with cuda_sources is a CUDA build
    if target & used:
        return None
    others = {n: sorted(_markers(get(n)) & used - target) for n in names() if n != backend}
    others = {n: m for n, m in others.items() if m}
    if not others:
        return None
    found = "; ".join(f"{', '.join(m)} (the {n} backend)" for n, m in sorted(others.items()))
    expected = ", ".join(sorted(target))
    return (
        f"this solution builds its kernels with {found}, but it is judged on the {backend} "
        f"backend, whose kernels come from {expected}; rewrite it for {backend}"
    )
