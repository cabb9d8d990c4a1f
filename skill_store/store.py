"""SkillStore: the skill library in an embedded SQLite database.

WAL mode lets readers proceed while one writer writes; every write is one `BEGIN IMMEDIATE` transaction
(taken up front, so two writers queue on the busy timeout instead of deadlocking on a lock upgrade), and
SQLite's journal guarantees that a process killed mid-transaction leaves the previous committed state.

Each record is stored as its JSON (the source of truth) plus a few columns to filter on.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import IO

from kernelgym.errors import KernelGymError
from kernelgym.skill_store.skill import Skill, SkillFormatError, SkillNotFoundError, now

SCHEMA_VERSION = 1
ENV_VAR = "KERNELGYM_SKILLS_DB"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS skills (
    id TEXT PRIMARY KEY,
    status TEXT NOT NULL,
    version INTEGER NOT NULL,
    backends TEXT NOT NULL,   -- ',cuda,cpp,' so that one LIKE filters by backend
    data TEXT NOT NULL,       -- the whole record as JSON
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS skills_status ON skills(status);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class SkillExistsError(KernelGymError, ValueError):
    """`add` was given an id that the store already holds."""


class StoreError(KernelGymError):
    """The database cannot be opened or used (locked past the timeout, not a skill store, unreadable)."""


def default_db_path() -> Path:
    """$KERNELGYM_SKILLS_DB, else ~/.cache/kernelgym/skills.sqlite."""
    value = os.environ.get(ENV_VAR)
    return Path(value).expanduser() if value else Path.home() / ".cache" / "kernelgym" / "skills.sqlite"


@dataclass
class StoreConfig:
    path: str | os.PathLike | None = None  # None: default_db_path()
    busy_timeout_s: float = 30.0  # how long a writer waits for another one before giving up
    seed: bool = True  # load the bundled seed library into a database that has never been seeded
    # FULL fsyncs the WAL on each commit, so a commit also survives power loss, not just a killed process;
    # writes are rare (a few per admitted skill), so the cost does not matter.
    synchronous: str = "FULL"


@dataclass
class ImportReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{len(self.added)} added, {len(self.updated)} updated, {len(self.unchanged)} unchanged"


def seed_skills() -> list[Skill]:
    """The bundled seed library (every `seeds/*.jsonl` in the package), sorted by id."""
    root = resources.files("kernelgym.skill_store") / "seeds"
    skills: list[Skill] = []
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".jsonl"):
            skills.extend(parse_jsonl(entry.read_text(encoding="utf-8"), origin=f"seeds/{entry.name}"))
    return sorted(skills, key=lambda s: s.id)


def parse_jsonl(text: str, origin: str = "<jsonl>") -> list[Skill]:
    """Skills from JSONL text (blank lines allowed); errors name the line."""
    skills, seen = [], set()
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SkillFormatError(f"{origin}:{number}: bad JSON ({exc.msg}, column {exc.colno})") from None
        try:
            skill = Skill.from_dict(data)
        except SkillFormatError as exc:
            raise SkillFormatError(f"{origin}:{number}: {exc}") from None
        if skill.id in seen:
            raise SkillFormatError(f"{origin}:{number}: duplicate skill id {skill.id}")
        seen.add(skill.id)
        skills.append(skill)
    return skills


def dump_jsonl(skills: Iterable[Skill]) -> str:
    """One record per line, sorted by id, keys in the dataclass's order: stable, so libraries diff cleanly."""
    lines = [json.dumps(s.to_dict(), ensure_ascii=False) for s in sorted(skills, key=lambda s: s.id)]
    return "".join(line + "\n" for line in lines)


class SkillStore:
    """The library. Safe to share between threads (one connection behind a lock) and between processes."""

    def __init__(
        self,
        path: str | os.PathLike | None = None,
        *,
        config: StoreConfig | None = None,
        seed: bool | None = None,
    ):
        self.config = config or StoreConfig()
        self.path = Path(path or self.config.path or default_db_path()).expanduser()
        self._lock = threading.RLock()
        self._depth = 0  # nesting of transaction() blocks on this store
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                str(self.path),
                timeout=self.config.busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            self._conn.execute(f"PRAGMA busy_timeout = {int(self.config.busy_timeout_s * 1000)}")
            self._enable_wal()
            self._conn.execute(f"PRAGMA synchronous = {self.config.synchronous}")
            with self.transaction():
                for statement in _statements():
                    self._conn.execute(statement)
                self._check_schema()
                if self.config.seed if seed is None else seed:
                    self._seed_once()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open skill store {self.path}: {exc}") from None
        except OSError as exc:
            raise StoreError(f"cannot create skill store {self.path}: {exc.strerror}") from None

    def _enable_wal(self) -> None:
        # Switching a new file to WAL needs an exclusive lock, and SQLite answers "locked" at once rather than
        # through the busy handler when another process is creating the same database: retry to the timeout.
        deadline = time.monotonic() + self.config.busy_timeout_s
        delay = 0.01
        while True:
            try:
                mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
                if mode.lower() != "wal":
                    self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    # -- transactions -------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[SkillStore]:
        """Group writes into one atomic transaction; nested blocks join the outer one."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                try:
                    self._conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    raise StoreError(f"skill store {self.path} is busy: {exc}") from None
            self._depth += 1
            try:
                yield self
            except BaseException:
                self._depth -= 1
                if outer:
                    self._conn.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer:
                self._conn.execute("COMMIT")

    def _check_schema(self) -> None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            self._conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        elif int(row[0]) > SCHEMA_VERSION:
            raise StoreError(f"{self.path} has schema {row[0]}; this kernelgym reads up to {SCHEMA_VERSION}")

    def _seed_once(self) -> None:
        # Recorded in meta so that a user who deletes seed skills does not get them back on the next open.
        if self._conn.execute("SELECT 1 FROM meta WHERE key = 'seeded'").fetchone():
            return
        for skill in seed_skills():
            if self.find(skill.id) is None:
                self._write_row(skill)
        self._conn.execute("INSERT INTO meta VALUES ('seeded', ?)", (now(),))

    # -- reads ----------------------------------------------------------------------------------------------

    def find(self, skill_id: str) -> Skill | None:
        with self._lock:
            row = self._conn.execute("SELECT data FROM skills WHERE id = ?", (skill_id,)).fetchone()
        return None if row is None else _decode(row[0])

    def get(self, skill_id: str) -> Skill:
        skill = self.find(skill_id)
        if skill is None:
            raise SkillNotFoundError(f"no skill with id {skill_id!r} in {self.path}")
        return skill

    def list(self, status: str | Iterable[str] | None = None, backend: str | None = None) -> list[Skill]:
        """Skills sorted by id, optionally only those with a status (or any of several) and a backend."""
        query, args = "SELECT data FROM skills", []
        where = []
        if status is not None:
            statuses = [status] if isinstance(status, str) else list(status)
            where.append(f"status IN ({','.join('?' * len(statuses))})")
            args.extend(statuses)
        if backend is not None:
            where.append("backends LIKE ?")
            args.append(f"%,{backend},%")
        if where:
            query += " WHERE " + " AND ".join(where)
        with self._lock:
            rows = self._conn.execute(query + " ORDER BY id", args).fetchall()
        return [_decode(r[0]) for r in rows]

    def ids(self) -> list[str]:
        with self._lock:
            return [r[0] for r in self._conn.execute("SELECT id FROM skills ORDER BY id")]

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM skills").fetchone()[0]

    def __contains__(self, skill_id: object) -> bool:
        return isinstance(skill_id, str) and self.find(skill_id) is not None

    # -- writes ---------------------------------------------------------------------------------------------

    def add(self, skill: Skill) -> Skill:
        """Insert a new skill; an id already present is a SkillExistsError."""
        with self.transaction():
            if self.find(skill.id) is not None:
                raise SkillExistsError(f"skill {skill.id!r} already exists (use put to update it)")
            self._write_row(skill)
        return skill

    def put(self, skill: Skill) -> Skill:
        """Insert or update; an update that changes the content stores version = old version + 1."""
        with self.transaction():
            old = self.find(skill.id)
            if old is not None:
                if old.content_key() == skill.content_key():
                    return old
                skill = Skill.from_dict({**skill.to_dict(), "version": old.version + 1})
            self._write_row(skill)
        return skill

    def put_many(self, skills: Iterable[Skill]) -> list[Skill]:
        with self.transaction():
            return [self.put(s) for s in skills]

    def delete(self, skill_id: str) -> None:
        with self.transaction():
            if self._conn.execute("DELETE FROM skills WHERE id = ?", (skill_id,)).rowcount == 0:
                raise SkillNotFoundError(f"no skill with id {skill_id!r} in {self.path}")

    def _write_row(self, skill: Skill) -> None:
        skill.validate()
        self._conn.execute(
            "INSERT OR REPLACE INTO skills (id, status, version, backends, data, updated_at) "
            "VALUES (?,?,?,?,?,?)",
            (
                skill.id,
                skill.status,
                skill.version,
                "," + ",".join(skill.applies_when.backends) + ",",
                json.dumps(skill.to_dict(), ensure_ascii=False),
                now(),
            ),
        )

    # -- JSONL ----------------------------------------------------------------------------------------------

    def export_jsonl(self, out: str | os.PathLike | IO[str] | None = None) -> str:
        """The whole library as JSONL (sorted by id); also written to `out` (a path or text file) if given."""
        text = dump_jsonl(self.list())
        if isinstance(out, str | os.PathLike):
            target = Path(out)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, target)  # readers of the file never see half an export
        elif out is not None:
            out.write(text)
        return text

    def import_jsonl(self, source: str | os.PathLike | IO[str]) -> ImportReport:
        """Merge skills from JSONL: new ids are added as they are, changed ones updated (version bumped).

        The file is parsed and checked completely before anything is written, and written in one transaction.
        """
        if isinstance(source, io.TextIOBase) or hasattr(source, "read"):
            text, origin = source.read(), getattr(source, "name", "<stream>")
        else:
            try:
                text, origin = Path(source).read_text(encoding="utf-8"), str(source)
            except OSError as exc:
                raise StoreError(f"cannot read {source}: {exc.strerror}") from None
            except UnicodeDecodeError:
                raise SkillFormatError(f"{source}: not UTF-8 text") from None
        skills = parse_jsonl(text, origin)
        report = ImportReport()
        with self.transaction():
            for skill in skills:
                old = self.find(skill.id)
                stored = self.put(skill)
                if old is None:
                    report.added.append(skill.id)
                elif stored.version == old.version:
                    report.unchanged.append(skill.id)
                else:
                    report.updated.append(skill.id)
        return report

    # -- lifecycle ------------------------------------------------------------------------------------------

    def integrity_check(self) -> str:
        with self._lock:
            return self._conn.execute("PRAGMA integrity_check").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SkillStore:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _statements() -> list[str]:
    # executescript would COMMIT the open transaction first; run the schema statement by statement inside it.
    body = "\n".join(line.split("--")[0] for line in _SCHEMA.splitlines())
    return [s.strip() for s in body.split(";") if s.strip()]


def _decode(data: str) -> Skill:
    try:
        return Skill.from_dict(json.loads(data))
    except (json.JSONDecodeError, SkillFormatError) as exc:
        raise StoreError(f"a stored skill record is unreadable: {exc}") from None


def open_store(path: str | os.PathLike | None = None, **config) -> SkillStore:
    """The store at `path` (default: $KERNELGYM_SKILLS_DB or ~/.cache/kernelgym/skills.sqlite)."""
    return SkillStore(path, config=StoreConfig(**config))
