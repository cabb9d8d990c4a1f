"""Code a newcomer can read: no import circle among the project's modules, and no file too long to hold in
one's head (the judge's own files shorter still). The task and solution files are data and are not counted.

The import graph is read from the source with ast, not by importing: an edge A -> B for each `import B` or
`from B import name` (B.name where that is a module) in A's module body, `if` and `try` blocks included
(an `if TYPE_CHECKING:` import is a circle in the design even where it never runs).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# folder -> the package it installs as (pyproject.toml's package-dir)
PACKAGES = {"kernelgym": "kernelgym", "envs": "kernelgym.envs", "agents": "kernelgym.agents",
            "skill_store": "kernelgym.skill_store"}
DATA = ("kernelgym/suites/", "kernelgym/solutions/", "kernelgym/tasks/curriculum.py")
JUDGE = ("kernelgym/evaluation/", "kernelgym/workers/")
MAX_LINES = 500
JUDGE_MAX_LINES = 400
# Circles through imports made inside functions, each kept for laziness (a module loaded only when used),
# never to break a circle: agents/davinci/rl.py loads heldout.py only when a held-out suite is configured.
LAZY_CIRCLES = [{"kernelgym.agents.davinci.heldout", "kernelgym.agents.davinci.rl"}]


def project_modules() -> dict[str, Path]:
    modules = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith(DATA[:2]):
                continue
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join([package, *parts])] = path
    return modules


def _module_level(body: list[ast.stmt]):
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If | ast.Try):
            blocks = [node.body, node.orelse, getattr(node, "finalbody", [])]
            blocks += [handler.body for handler in getattr(node, "handlers", [])]
            for block in blocks:
                yield from _module_level(block)


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: from the module's package up
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    return [f"{base}.{alias.name}" for alias in node.names] + [base]


def import_graph(function_local: bool = False) -> dict[str, set[str]]:
    """module -> the project modules it imports (the nearest enclosing module of each imported name)."""
    modules = project_modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = ([n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)] if function_local
                 else list(_module_level(tree.body)))
        for node in nodes:
            targets = _imported(node, name, path.name == "__init__.py")
            if isinstance(node, ast.ImportFrom):  # `from pkg import sub` names pkg.sub, else pkg itself
                names, base = targets[:-1], targets[-1]
                targets = [t for t in names if t in modules] or [base]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph[name].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def long_files() -> dict[str, int]:
    over = {}
    for path in project_modules().values():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(DATA):
            continue
        lines = len(path.read_text(encoding="utf-8").splitlines())
        limit = JUDGE_MAX_LINES if rel.startswith(JUDGE) else MAX_LINES
        if lines > limit:
            over[rel] = lines
    return over


def test_no_import_circle_at_module_level():
    found = circles(import_graph())
    assert not found, f"modules that import each other (move what both need below them): {found}"


def test_no_import_circle_through_imports_inside_functions():
    found = [c for c in circles(import_graph(function_local=True)) if set(c) not in LAZY_CIRCLES]
    assert not found, (f"modules that import each other, some inside a function (an import moved into a "
                       f"function hides a circle, it does not remove it): {found}")


def test_no_file_over_its_line_limit():
    over = long_files()
    assert not over, (f"files over {MAX_LINES} lines (the judge's, kernelgym/evaluation and "
                      f"kernelgym/workers, over {JUDGE_MAX_LINES}): split them by concept: {over}")
