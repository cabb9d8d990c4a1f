"""The Skill record: one reusable optimization technique, with its evidence and verification history.

Plain dataclasses that round-trip through JSON (`to_dict` / `from_dict`). `to_dict` keeps the field order
declared here, so an exported library diffs cleanly line by line.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any

from kernelgym.errors import KernelGymError

BACKENDS = ("cuda", "triton", "cpp")
BOUNDS = ("memory", "compute", "any")
PROVENANCES = ("seed", "human", "distilled")
STATUSES = ("candidate", "admitted", "rejected")
# Ids are used on the command line and in file names: keep them to a safe, readable alphabet.
_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]{1,79}$")


class SkillFormatError(KernelGymError, ValueError):
    """A skill record (from a file, the database or a caller) is malformed."""


class SkillNotFoundError(KernelGymError, LookupError):
    """No skill with the given id is in the store."""


def today() -> str:
    return _dt.date.today().isoformat()


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class AppliesWhen:
    """When a skill is worth retrieving: free-text task patterns/keywords, the bound type, the backends."""

    patterns: list[str] = field(default_factory=list)
    bound: str = "any"
    backends: list[str] = field(default_factory=lambda: list(BACKENDS))


@dataclass
class Evidence:
    """One verified measurement that the technique helped on a task."""

    task_id: str
    speedup: float
    hardware: str = ""
    date: str = field(default_factory=today)


@dataclass
class Provenance:
    source: str = "human"  # "seed" | "human" | "distilled"
    trajectory: str | None = None  # for distilled skills: the rollout it came from


@dataclass
class Verification:
    """One run of the gate: the verdicts and speedups of every re-evaluation, and the decision's reason."""

    date: str
    verdicts: list[str]
    speedups: list[float | None]
    reason: str
    admitted: bool = False
    tasks: list[str] = field(default_factory=list)  # the task of each run, aligned with verdicts


@dataclass
class Solution:
    """The kernel a skill came from, kept so the gate can re-run it when the library is re-verified."""

    source: str
    task_ids: list[str]
    backend: str = "cpp"
    size: str | None = None  # None: the evaluator picks from the hardware


@dataclass
class Skill:
    id: str
    title: str
    applies_when: AppliesWhen
    technique: str
    code_pattern: str = ""
    evidence: list[Evidence] = field(default_factory=list)
    provenance: Provenance = field(default_factory=Provenance)
    status: str = "candidate"
    history: list[Verification] = field(default_factory=list)
    solution: Solution | None = None
    version: int = 1

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if not isinstance(self.id, str) or not _ID.match(self.id):
            raise SkillFormatError(
                f"skill id {self.id!r} must be 2-80 chars of lowercase letters, digits, '-', '_' or '.'"
            )
        for name in ("title", "technique"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise SkillFormatError(f"skill {self.id}: {name} must be a non-empty string")
        if not isinstance(self.code_pattern, str):
            raise SkillFormatError(f"skill {self.id}: code_pattern must be a string")
        aw = self.applies_when
        if aw.bound not in BOUNDS:
            raise SkillFormatError(f"skill {self.id}: bound must be one of {BOUNDS}, not {aw.bound!r}")
        if (
            not isinstance(aw.backends, list)
            or not aw.backends
            or any(b not in BACKENDS for b in aw.backends)
        ):
            raise SkillFormatError(f"skill {self.id}: backends must be a non-empty list among {BACKENDS}")
        if not isinstance(aw.patterns, list) or not all(isinstance(p, str) for p in aw.patterns):
            raise SkillFormatError(f"skill {self.id}: applies_when.patterns must be strings")
        if self.provenance.source not in PROVENANCES:
            raise SkillFormatError(f"skill {self.id}: provenance must be one of {PROVENANCES}")
        if self.status not in STATUSES:
            raise SkillFormatError(f"skill {self.id}: status must be one of {STATUSES}, not {self.status!r}")
        if self.solution is not None:
            sol = self.solution
            if not isinstance(sol.source, str) or not sol.source.strip():
                raise SkillFormatError(f"skill {self.id}: solution.source must be non-empty text")
            if not sol.task_ids or not all(isinstance(t, str) and t for t in sol.task_ids):
                raise SkillFormatError(f"skill {self.id}: solution.task_ids must list at least one task id")
            if sol.backend not in BACKENDS:
                raise SkillFormatError(f"skill {self.id}: solution.backend must be one of {BACKENDS}")
        if not isinstance(self.version, int) or isinstance(self.version, bool) or self.version < 1:
            raise SkillFormatError(f"skill {self.id}: version must be a positive integer")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Skill:
        """Build from parsed JSON; any missing required field or unknown key is a SkillFormatError."""
        if not isinstance(data, dict):
            raise SkillFormatError(f"a skill must be a JSON object, not {type(data).__name__}")
        origin = data.get("id", "<no id>")
        try:
            _no_unknown(data, cls, origin)
            aw = data.get("applies_when", {})
            _no_unknown(aw, AppliesWhen, origin)
            prov = data.get("provenance", {})
            _no_unknown(prov, Provenance, origin)
            values = dict(data)
            values["applies_when"] = AppliesWhen(**aw)
            values["provenance"] = Provenance(**prov)
            values["evidence"] = [Evidence(**_checked(e, Evidence, origin)) for e in data.get("evidence", [])]
            values["history"] = [
                Verification(**_checked(v, Verification, origin)) for v in data.get("history", [])
            ]
            if data.get("solution") is not None:
                values["solution"] = Solution(**_checked(data["solution"], Solution, origin))
            return cls(**values)
        except TypeError as exc:  # a missing or misspelt field: say which, in one line
            raise SkillFormatError(f"skill {origin}: {exc}") from None

    def text_fields(self) -> dict[str, str]:
        """The fields retrieval indexes, as text."""
        aw = self.applies_when
        return {
            "title": self.title,
            "applies_when": " ".join(
                [*aw.patterns, f"{aw.bound} bound" if aw.bound != "any" else "", *aw.backends]
            ),
            "technique": self.technique,
            "code_pattern": self.code_pattern,
        }

    def to_prompt(self) -> str:
        """The skill as a policy reads it: title, when it applies, technique, code pattern, best evidence."""
        aw = self.applies_when
        lines = [
            f"### {self.title} [{self.id}]",
            f"Applies to: {'; '.join(aw.patterns)} ({aw.bound}-bound)"
            if aw.patterns
            else f"Applies to: {aw.bound}-bound work",
            self.technique,
        ]
        if self.code_pattern:
            lines += ["```", self.code_pattern, "```"]
        if self.evidence:
            best = max(self.evidence, key=lambda e: e.speedup)
            lines.append(f"Verified: {best.speedup:.2f}x on {best.task_id} ({best.hardware}).")
        return "\n".join(lines)

    def content_key(self) -> dict[str, Any]:
        """Everything but the version: two records with the same key need no version bump."""
        data = self.to_dict()
        data.pop("version")
        return data


def _no_unknown(data: Any, kind: type, origin: str) -> None:
    if not isinstance(data, dict):
        raise SkillFormatError(f"skill {origin}: {kind.__name__} must be a JSON object")
    unknown = set(data) - {f.name for f in dataclasses.fields(kind)}
    if unknown:
        raise SkillFormatError(f"skill {origin}: unknown {kind.__name__} field(s) {sorted(unknown)}")


def _checked(data: Any, kind: type, origin: str) -> dict[str, Any]:
    _no_unknown(data, kind, origin)
    return data
