"""Where tasks come from: the bundled suite, a KernelBench checkout, the Hugging Face dataset, user files."""

from __future__ import annotations

import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

from kernelgym.errors import SuiteUnavailableError, TaskFormatError, TaskNotFoundError
from kernelgym.tasks import folders, level4
from kernelgym.tasks.task import FILE_NAME, Task, task_from_source
from kernelgym.tasks.taskset import TaskSet

LEVELS = (1, 2, 3)
HF_DATASET = "ScalingIntelligence/KernelBench"


def _folder_tasks(folder: Path, suite: str, level: int) -> list[Task]:
    return [task_from_source(p.read_text(), suite=suite, level=level, file_name=p.name, path=str(p))
            for p in _problem_files(folder)]


def _problem_files(folder: Path) -> list[Path]:
    files = sorted(folder.glob("*.py"), key=lambda p: _sort_key(p.name))
    return [p for p in files if not p.name.startswith("_")]


def _sort_key(file_name: str) -> tuple[int, str]:
    match = FILE_NAME.match(file_name)
    return (int(match["pid"]), file_name) if match else (10**9, file_name)


def bundled(level: int | None = None) -> TaskSet:
    """kernelgym's own suite, shipped in the package and usable offline."""
    root = Path(str(resources.files("kernelgym") / "suites"))

    def load() -> list[Task]:
        return [t for lv in _levels(level) for t in _folder_tasks(root / f"level{lv}", "bundled", lv)]

    return TaskSet(load, "bundled" if level is None else f"bundled L{level}")


def bundled_backward(level: int | None = None) -> TaskSet:
    """kernelgym's backward suite: forward and backward tasks (`suites/backward/level<N>`), offline."""
    root = Path(str(resources.files("kernelgym") / "suites" / "backward"))

    def load() -> list[Task]:
        return [t for lv in _levels(level) if (root / f"level{lv}").is_dir()
                for t in _folder_tasks(root / f"level{lv}", "backward", lv)]

    return TaskSet(load, "backward" if level is None else f"backward L{level}")


def kernelbench_root(explicit: str | os.PathLike | None = None) -> Path:
    """The KernelBench checkout: an explicit path, else $KERNELBENCH_ROOT."""
    value = explicit or os.environ.get("KERNELBENCH_ROOT")
    if not value:
        raise SuiteUnavailableError(
            "KernelBench problems need a checkout: pass kernelbench_root=DIR (CLI: --kernelbench-root DIR) "
            "or set KERNELBENCH_ROOT to a clone of https://github.com/ScalingIntelligence/KernelBench; or "
            f"load the Hugging Face dataset {HF_DATASET} with kernelgym.tasks.from_hf_dataset(). Level 4 "
            "needs none (--level 4, KernelBench-L4-v0)"
        )
    path = Path(value).expanduser()
    # Accept both the repository root and its inner KernelBench/ folder.
    for candidate in (path / "KernelBench", path):
        if (candidate / "level1").is_dir():
            return candidate
    raise SuiteUnavailableError(f"{path} holds no KernelBench/level1..level3 folders")


def kernelbench(root: str | os.PathLike | None = None, level: int | None = None) -> TaskSet:
    """The real KernelBench problems from a checkout (`KernelBench/level1..level3/*.py`); level 4 is built
    offline from kept config data and needs no checkout (kernelgym.tasks.level4)."""
    if level == level4.LEVEL:
        return level4.tasks()
    base = kernelbench_root(root)

    def load() -> list[Task]:
        return [
            t
            for lv in _levels(level)
            if (base / f"level{lv}").is_dir()
            for t in _folder_tasks(base / f"level{lv}", "kernelbench", lv)
        ]

    return TaskSet(load, f"kernelbench {base}")


def from_hf_dataset(dataset: Any = None, level: int | None = None) -> TaskSet:
    """KernelBench from the Hugging Face Hub (splits level_1..level_3; columns code, level, name, problem_id).

    `dataset` may be a `datasets.DatasetDict` (or any mapping of split name to rows) or a dataset name/path;
    by default the Hub dataset, which `datasets` serves from its offline cache when HF_DATASETS_OFFLINE=1.
    """

    def load() -> list[Task]:
        splits = _hf_splits(dataset)
        tasks = []
        for lv in _levels(level):
            split = splits.get(f"level_{lv}")
            if split is None:
                continue
            for row in split:
                pid, name = int(row["problem_id"]), str(row["name"])
                stem = name.removesuffix(".py")
                file_name = f"{stem}.py" if FILE_NAME.match(f"{stem}.py") else f"{pid}_{stem}.py"
                tasks.append(
                    task_from_source(
                        row["code"], suite="kernelbench", level=int(row["level"]), file_name=file_name,
                        problem_id=pid,
                    )
                )
        return tasks

    return TaskSet(load, f"hf {dataset if isinstance(dataset, str) else HF_DATASET}")


def _hf_splits(dataset: Any) -> Any:
    if dataset is not None and not isinstance(dataset, str | os.PathLike):
        return dataset
    try:
        import datasets  # an optional dependency (extra `agents`)
    except ImportError:
        raise SuiteUnavailableError("loading the Hugging Face dataset needs `pip install datasets`") from None
    name = str(dataset or HF_DATASET)
    try:
        if Path(name).is_dir():
            return datasets.load_from_disk(name)
        return datasets.load_dataset(name)
    except Exception as exc:  # noqa: BLE001 - network, cache miss: one clear message
        raise SuiteUnavailableError(
            f"could not load {name} ({type(exc).__name__}: {str(exc)[:200]}); without a network, set "
            "KERNELBENCH_ROOT to a checkout instead"
        ) from None


def from_path(path: str | os.PathLike, level: int | None = None) -> TaskSet:
    """A user's KernelBench-format problem file, or a folder of them (level<N>/ subfolders are honoured).

    The tasks are named after the folder (kernelgym.tasks.folders). A folder's files that are not valid
    problems are left out with a warning (`read_path` lists them); a single bad file is an error.
    """
    target = Path(path).expanduser()
    if not target.exists():
        raise TaskNotFoundError(f"{target} does not exist")

    def load() -> list[Task]:
        read = read_path(target, level)
        if read.bad_files and (target.is_file() or not read.tasks):
            first = read.bad_files[0]
            raise TaskFormatError(f"{first.path}: {first.error}" if target.is_file() else
                                  f"{target} holds no valid task; {first.path}: {first.error}")
        for bad in read.bad_files:
            folders.warn_once(bad)
        folders.remember(folders.suite_name(target), folders.folder_root(target))
        return read.tasks

    return TaskSet(load, f"{folders.suite_name(target)} ({target})")


def read_path(path: str | os.PathLike, level: int | None = None) -> folders.FolderRead:
    """Every task of a problem file or folder, and the files that could not be read (with their error)."""
    target = Path(path).expanduser()
    suite = folders.suite_name(target)
    if target.is_file():
        return _read_files([target], suite, level or _level_from_path(target))
    sub = [target / f"level{lv}" for lv in LEVELS if (target / f"level{lv}").is_dir()]
    if sub:
        parts = [_read_files(_problem_files(d), suite, int(d.name[5:])) for d in sub
                 if not level or int(d.name[5:]) == level]
        return folders.FolderRead([t for p in parts for t in p.tasks],
                                  [b for p in parts for b in p.bad_files])
    return _read_files(_problem_files(target), suite, level or _level_from_path(target))


def _read_files(paths: list[Path], suite: str, level: int) -> folders.FolderRead:
    read = folders.FolderRead()
    for p in paths:
        try:
            read.tasks.append(task_from_source(p.read_text(encoding="utf-8"), suite=suite, level=level,
                                               file_name=p.name, path=str(p)))
        except (TaskFormatError, OSError, UnicodeDecodeError) as exc:
            read.bad_files.append(folders.BadFile(str(p), str(exc).removeprefix(f"{p}: ")))
    return read


def _level_from_path(path: Path) -> int:
    for part in reversed(path.parts):
        if re.fullmatch(r"level[123]", part):
            return int(part[-1])
    return 1


def _levels(level: int | None) -> tuple[int, ...]:
    return LEVELS if level is None else (level,)


def load_suite(suite: str = "bundled", *, level: int | None = None,
               kernelbench_root: str | None = None) -> TaskSet:
    """One entry point for the CLI and the environments: `bundled`, `backward`, `kernelbench`, `hf`,
    `curriculum`, or a path."""
    if suite == "bundled":
        return bundled(level)
    if suite == "backward":
        return bundled_backward(level)
    if suite == "kernelbench":
        return kernelbench(kernelbench_root, level)
    if suite == "hf":
        return from_hf_dataset(level=level)
    if suite == "curriculum":  # generated in memory (kernelgym.tasks.curriculum)
        from kernelgym.tasks.curriculum import curriculum_tasks

        tasks = curriculum_tasks()
        return tasks if level is None else tasks.filter(lambda t: t.level == level)
    return from_path(suite, level)


def resolve_task(ref: str, *, kernelbench_root: str | None = None) -> Task:
    """A task id (`bundled/L1/19_ReLU`, `L1/19_ReLU`, `kernelbench/L2/...`, `my_ops/L1/...` of a folder read
    before, here or in an earlier process; `path/to/my_ops/L1/...`) or a problem file's path."""
    if ref.endswith(".py") and Path(ref).is_file():
        return from_path(ref)[0]
    if ref.startswith("kernelbench/"):
        level = level4.LEVEL if ref.startswith(f"kernelbench/L{level4.LEVEL}/") else None
        return kernelbench(kernelbench_root, level).get(ref)
    if ref.startswith("curriculum/"):
        return load_suite("curriculum").get(ref)
    if ref.startswith("backward/"):
        return bundled_backward().get(ref)
    found = _folder_of(ref)
    if found is not None:
        folder, level, name = found  # read without warning about the folder's other files
        tasks = TaskSet.of(read_path(folder, level).tasks, f"{folders.suite_name(folder)} ({folder})")
        return tasks.get(f"{folders.suite_name(folder)}/L{level}/{name}")
    return bundled().get(ref)


def _folder_of(ref: str) -> tuple[Path, int, str] | None:
    """(folder, level, name) of a folder task's id: `NAME/L1/x` of a folder read before, or `DIR/L1/x`."""
    match = re.fullmatch(r"(?P<head>.+)/L(?P<level>\d+)/(?P<name>[^/]+)", ref)
    if match is None or match["head"] in folders.BUILT_IN:
        return None
    level, name = int(match["level"]), match["name"]
    remembered = folders.remembered(match["head"]) if "/" not in match["head"] else None
    if remembered is not None:
        if not remembered.is_dir():
            raise TaskNotFoundError(f"{ref!r} is a task of the folder {remembered}, which is gone; read the "
                                    "folder again (--suite DIR) to name its tasks")
        return remembered, level, name
    folder = Path(match["head"]).expanduser()
    return (folder, level, name) if folder.is_dir() else None
