"""The bundled example solutions: `<backend>/level<N>/<task file>.py`, and a few labelled cheats.

Used as test fixtures, few-shot examples, the quickstart demo and a replay policy's folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

ROOT = Path(str(resources.files("kernelgym") / "solutions"))


@dataclass(frozen=True)
class ExampleSolution:
    task_id: str
    backend: str
    path: Path
    cheat: str | None = None  # the exploit a cheating example tries, from its file name

    @property
    def source(self) -> str:
        return self.path.read_text()


def _folder(*parts: str, suite: str) -> Path:
    """`<parts>/level<N>` for the bundled suite; `<parts>/<suite>/level<N>` for another (e.g. backward)."""
    return ROOT.joinpath(*parts) if suite == "bundled" else ROOT.joinpath(*parts, suite)


def examples(backend: str, suite: str = "bundled") -> list[ExampleSolution]:
    """Honest bundled solutions for a backend, in task order."""
    found = []
    for level_dir in sorted(_folder(backend, suite=suite).glob("level*")):
        for path in sorted(level_dir.glob("*.py"), key=lambda p: int(p.name.split("_")[0])):
            found.append(ExampleSolution(f"{suite}/L{level_dir.name[5:]}/{path.stem}", backend, path))
    return found


def cheats(backend: str, suite: str = "bundled") -> list[ExampleSolution]:
    """Cheating examples (`cheats/<backend>/[<suite>/]level<N>/<task file>__<exploit>.py`) for demos."""
    found = []
    for level_dir in sorted(_folder("cheats", backend, suite=suite).glob("level*")):
        for path in sorted(level_dir.glob("*.py")):
            stem, _, exploit = path.stem.partition("__")
            found.append(ExampleSolution(f"{suite}/L{level_dir.name[5:]}/{stem}", backend, path,
                                         exploit or "cheat"))
    return found
