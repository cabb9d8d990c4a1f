"""A user's folder of task files as a suite: its name, the files that could not be read, and where it is.

A folder's tasks are named after the folder (`my_ops/L1/3_Softplus`; a `levelN` folder is named after its
parent, so `KernelBench/level2` and `KernelBench` give the same ids). Every folder that is read is
remembered (name -> absolute path) in this process and in a small JSON file, so that an id recorded in a
result, a trajectory, a skill or a checkpoint resolves back to its task in a later process
(`kernelgym.tasks.resolve_task`). Two folders of the same name: the one read last is the one resolved.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from kernelgym.tasks.task import Task

# The built-in sources: a folder of one of these names gets a suffix, so its ids never shadow theirs.
BUILT_IN = ("bundled", "backward", "kernelbench", "hf", "curriculum")
REGISTRY_ENV = "KERNELGYM_TASK_FOLDERS"  # the registry file's path (default ~/.cache/kernelgym/...)
_LEVEL_FOLDER = re.compile(r"level\d+")
_seen: dict[str, str] = {}  # this process's folders, name -> path
_reported: set[tuple[str, str]] = set()  # the bad files already warned about in this process


@dataclass(frozen=True)
class BadFile:
    """A task file that could not be read as a KernelBench problem, and why."""

    path: str
    error: str


def warn_once(bad: BadFile) -> None:
    """Warn that a file was left out, once per process (a folder is read again by every env made on it)."""
    if (bad.path, bad.error) not in _reported:
        _reported.add((bad.path, bad.error))
        warnings.warn(f"left out {bad.path}: {bad.error}", stacklevel=3)


@dataclass
class FolderRead:
    """What reading a task folder (or file) gave: its tasks, and the files it had to leave out."""

    tasks: list[Task] = field(default_factory=list)
    bad_files: list[BadFile] = field(default_factory=list)


def folder_root(path: Path) -> Path:
    """The folder that names the tasks: a file's folder, and a `levelN` folder's parent."""
    folder = path.resolve()
    folder = folder.parent if folder.is_file() else folder
    return folder.parent if _LEVEL_FOLDER.fullmatch(folder.name) else folder


def suite_name(path: Path) -> str:
    """The first part of the ids of a folder's tasks: the folder's name, made safe for an id."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", folder_root(path).name).strip("_.") or "tasks"
    return f"{name}-folder" if name in BUILT_IN else name


def registry_path() -> Path:
    if os.environ.get(REGISTRY_ENV):
        return Path(os.environ[REGISTRY_ENV])
    return Path.home() / ".cache" / "kernelgym" / "task_folders.json"


def _registry() -> dict[str, str]:
    try:
        data = json.loads(registry_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def remember(name: str, root: Path) -> None:
    """Record that tasks named `name/...` come from `root` (here, and in the registry file)."""
    path = str(root.resolve())
    _seen[name] = path
    known = _registry()
    if known.get(name) == path:
        return
    known[name] = path
    target = registry_path()
    try:  # written whole and renamed: a reader never sees half a file
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=target.parent, suffix=".tmp", delete=False) as f:
            json.dump(known, f, indent=1, sort_keys=True)
        os.replace(f.name, target)
    except OSError:
        pass  # a read-only home: ids of this folder still resolve in this process


def remembered(name: str) -> Path | None:
    """The folder whose tasks are named `name/...`, if one was read (in this process first)."""
    path = _seen.get(name) or _registry().get(name)
    return Path(path) if path else None


def is_folder_source(source: str) -> bool:
    """True for a task source that names a folder or file rather than a built-in suite."""
    return source not in BUILT_IN and Path(source).expanduser().exists()
