"""ReplayPolicy: replies with solution files from folders, by task id, one file per attempt.

A folder is laid out like the bundled examples: `level<N>/<task file>.py` answers task `.../L<N>/<stem>`
of any suite (`bundled/L1/1_ReLU`, `kernelbench/L1/1_ReLU`, ...), and `level<N>/<stem>__<label>.py` is
another answer for the same task (the bundled cheats are named so). A flat folder of `<stem>.py` files
matches by stem alone. Attempt k of an episode gets the task's k-th file (honest ones first, then the
labelled ones, each group in name order); when they run out the reply is the done marker, which ends the
episode without an evaluation. A task with no file gets the done marker at once (a failed episode).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgym.agents.policies.scripted import fence
from kernelgym.agents.policy import BasePolicy, PolicyInfo, PolicyObservation, Reply
from kernelgym.errors import ConfigError, did_you_mean

_LEVEL_DIR = re.compile(r"^level(\d+)$")


@dataclass(frozen=True)
class ReplayFile:
    key: str  # "L<N>/<stem>" or "<stem>" (flat folder)
    path: Path
    label: str | None = None  # the part after "__" in the file name (a cheat's exploit), else None
    cheat: bool = False

    @property
    def source(self) -> str:
        return self.path.read_text()


def scan_folder(folder: str | Path, *, cheat: bool = False) -> list[ReplayFile]:
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"replay folder {root} does not exist")
    found = []
    level_dirs = [d for d in sorted(root.iterdir()) if d.is_dir() and _LEVEL_DIR.match(d.name)]
    for d in level_dirs:
        level = _LEVEL_DIR.match(d.name).group(1)
        for path in sorted(d.glob("*.py")):
            stem, _, label = path.stem.partition("__")
            found.append(ReplayFile(f"L{level}/{stem}", path, label or None, cheat))
    if not level_dirs:
        for path in sorted(root.glob("*.py")):
            stem, _, label = path.stem.partition("__")
            found.append(ReplayFile(stem, path, label or None, cheat))
    return found


def bundled_files(backend: str, *, honest: bool = True, cheats: bool = False) -> list[ReplayFile]:
    from kernelgym.solutions import cheats as bundled_cheats
    from kernelgym.solutions import examples

    files = []
    if honest:
        files += [ReplayFile(e.task_id.split("/", 1)[1], e.path) for e in examples(backend)]
        # the backward suite's ids share their last parts with the bundled suite's: keyed by the whole id
        files += [ReplayFile(e.task_id, e.path) for e in examples(backend, "backward")]
    if cheats:
        files += [ReplayFile(e.task_id.split("/", 1)[1], e.path, e.cheat, True)
                  for e in bundled_cheats(backend)]
        files += [ReplayFile(e.task_id, e.path, e.cheat, True) for e in bundled_cheats(backend, "backward")]
    return files


def _keys_for(task_id: str) -> list[str]:
    """Lookup keys of a task id, most specific first: the whole id, then 'L1/1_ReLU', then '1_ReLU'."""
    parts = task_id.split("/")
    keys = [task_id] if len(parts) > 2 else []
    if len(parts) >= 2:
        keys.append("/".join(parts[-2:]))
    keys.append(parts[-1])
    return keys


class ReplayPolicy(BasePolicy):
    def __init__(self, files: Iterable[ReplayFile], *, name: str = "replay", done_marker: str = "DONE"):
        self.name = name
        self.done_marker = done_marker
        self.files: dict[str, list[ReplayFile]] = {}
        for f in files:
            self.files.setdefault(f.key, []).append(f)
        for group in self.files.values():
            # Honest answers first (so a short episode still plays them), then labelled ones, by name.
            group.sort(key=lambda f: (f.label is not None, f.cheat, f.path.name))
        if not self.files:
            raise ConfigError(f"replay policy {name!r} has no solution files")

    @classmethod
    def from_folders(cls, folders: Sequence[str | Path], **kwargs: Any) -> ReplayPolicy:
        files = [f for folder in folders for f in scan_folder(folder)]
        return cls(files, name="replay:" + "+".join(str(f) for f in folders), **kwargs)

    def files_for(self, task_id: str) -> list[ReplayFile]:
        for key in _keys_for(task_id):
            if key in self.files:
                return self.files[key]
        return []

    def covers(self, task_id: str) -> bool:
        return bool(self.files_for(task_id))

    def suggested_turns(self, task_ids: Iterable[str]) -> int:
        """Turns an episode needs to play every file of the task that has the most."""
        return max([len(self.files_for(t)) for t in task_ids] + [1])

    def act(self, observation: PolicyObservation, info: PolicyInfo) -> str:
        if info.get("role") == "analyst":  # asked for advice (kforge): a replay has none
            return Reply("No recommendations: this is a replay policy.", replay=None)
        task_id = str(info.get("task_id") or "")
        attempt = int(info.get("attempt", observation.get("turn", 0)))
        files = self.files_for(task_id)
        if attempt >= len(files):
            why = "no replay file for this task" if not files else "replay files used up"
            return Reply(self.done_marker + "\n", replay=None, note=why)
        f = files[attempt]
        meta: dict[str, Any] = {"replay": str(f.path)}
        if f.label:
            meta["label"] = f.label
        if f.cheat:
            meta["cheat"] = f.label or "cheat"
        return Reply(fence(f.source), **meta)


def parse_replay(spec: str) -> ReplayPolicy:
    """`replay:PART+PART...`: a backend name (its bundled examples), `cheats` (the bundled cheats of the
    backends named), or a folder path. `replay:cpp+cheats` is the examples and the cheats for cpp."""
    from kernelgym import backends

    parts = [p for p in spec.split("+") if p]
    if not parts:
        raise ConfigError("replay needs a backend name or a folder: replay:cpp, replay:cpp+cheats, "
                          "replay:PATH")
    names = set(backends.names())
    backend_parts = [p for p in parts if p in names and not Path(p).is_dir()]
    files: list[ReplayFile] = []
    for part in parts:
        if part in backend_parts:
            files += bundled_files(part)
        elif part == "cheats":
            if not backend_parts:
                raise ConfigError("replay:...+cheats needs a backend too, e.g. replay:cpp+cheats")
            for b in backend_parts:
                files += bundled_files(b, honest=False, cheats=True)
        elif Path(part).expanduser().is_dir():
            files += scan_folder(part)
        else:
            raise ConfigError(f"replay: {part!r} is not a backend ({', '.join(sorted(names))}), 'cheats' or "
                              f"a folder.{did_you_mean(part, [*names, 'cheats'])}")
    return ReplayPolicy(files, name="replay:" + spec)
