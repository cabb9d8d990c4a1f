"""The verification gate: a skill enters the library only if the kernel it came from reproducibly wins.

A candidate is a Skill plus the solution it was distilled from and the task(s) it was solved on. The gate
re-evaluates that solution with kernelgym's judge K times per task (fresh hidden seeds each time, since
the evaluator draws new ones when no seed is given) and admits the skill only if every run is verdict "ok"
with a verified speedup above the threshold. Rejected candidates are stored too, with the reason, so a
distiller does not propose the same thing again; admitted ones carry the measured evidence.

A run the judge itself failed (verdict `infrastructure_error`) decides nothing: unless another run already
failed on its own, the decision is "not judged" and the store is left as it was (a new candidate is not
stored, an admitted skill is not demoted); run the gate again.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.errors import KernelGymError
from kernelgym.skill_store.skill import Evidence, Skill, SkillFormatError, Solution, Verification, now, today
from kernelgym.skill_store.store import SkillExistsError


@dataclass
class GateConfig:
    runs: int = 3  # K: evaluations per source task
    threshold: float = 1.0  # every run's verified speedup must be above this
    stop_early: bool = True  # stop at the first failing run: the decision cannot change after it
    demote_on_failure: bool = True  # an admitted skill that fails re-verification becomes "rejected"
    # Extra evaluation options (timeout_s, timing_trials, ...); `threshold` is forwarded as well, so the
    # judge's own "verified" (low end of the speedup's 95% interval above the threshold) uses the same bar.
    eval_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunRecord:
    task_id: str
    run: int
    verdict: str
    speedup: float | None
    verified_speedup: float | None
    reasons: list[str] = field(default_factory=list)
    device: str = ""


@dataclass
class GateDecision:
    skill_id: str
    admitted: bool
    reason: str
    runs: list[RunRecord] = field(default_factory=list)
    skipped: bool = False  # nothing to re-run (no stored solution): the skill was left as it was
    not_judged: bool = False  # the judge failed on a run (infrastructure_error): nothing decided or stored

    @property
    def state(self) -> str:
        if self.skipped:
            return "skipped"
        if self.not_judged:
            return "not judged"
        return "admitted" if self.admitted else "rejected"

    def summary(self) -> str:
        state = self.state
        return f"{self.skill_id}: {state} ({self.reason})"


@dataclass
class Candidate:
    skill: Skill
    solution: Solution

    @classmethod
    def from_dict(cls, data: Any, base_dir: Path | None = None) -> Candidate:
        """A candidate: {"skill": {...}, "solution_path" | "solution_source", "task_ids", "backend", "size"}.

        The skill's fields may also sit at the top level next to the solution keys. A relative solution_path
        is resolved against the candidate file's folder first, then the working directory.
        """
        if not isinstance(data, dict):
            raise SkillFormatError("a candidate must be a JSON object")
        gate_keys = {"solution_path", "solution_source", "task_ids", "backend", "size"}
        skill_data = data.get("skill", {k: v for k, v in data.items() if k not in gate_keys})
        if not isinstance(skill_data, dict):
            raise SkillFormatError("candidate: 'skill' must be a JSON object")
        skill_data = {k: v for k, v in skill_data.items() if k not in ("status", "history", "solution")}
        skill = Skill.from_dict({"provenance": {"source": "distilled"}, **skill_data})
        source = data.get("solution_source")
        if source is None:
            path = data.get("solution_path")
            if not isinstance(path, str) or not path:
                raise SkillFormatError(
                    f"candidate {skill.id}: give solution_path (a file) or solution_source"
                )
            resolved = _resolve(path, base_dir)
            try:
                source = resolved.read_text(encoding="utf-8")
            except OSError as exc:
                raise SkillFormatError(
                    f"candidate {skill.id}: cannot read solution {path}: {exc.strerror}"
                ) from None
        task_ids = data.get("task_ids")
        if isinstance(task_ids, str):
            task_ids = [task_ids]
        if not isinstance(task_ids, list) or not task_ids:
            raise SkillFormatError(
                f"candidate {skill.id}: task_ids must list the task(s) the solution solves"
            )
        backend = data.get("backend") or (
            skill.applies_when.backends[0] if len(skill.applies_when.backends) == 1 else "cpp"
        )
        solution = Solution(source=source, task_ids=list(task_ids), backend=backend, size=data.get("size"))
        skill.solution = solution
        skill.validate()
        return cls(skill, solution)


def read_candidates(path: str | os.PathLike) -> list[Candidate]:
    """Candidates from a .json file (one object or a list) or a .jsonl file (one object per line)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise SkillFormatError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SkillFormatError(f"{path}: not UTF-8 text") from None
    objects: list[Any] = []
    stripped = text.strip()
    if not stripped:
        raise SkillFormatError(f"{path}: empty file")
    try:
        whole = json.loads(stripped)
        objects = whole if isinstance(whole, list) else [whole]
    except json.JSONDecodeError as exc:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise SkillFormatError(
                f"{path}: bad JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
            ) from None
        for number, line in lines:
            try:
                objects.append(json.loads(line))
            except json.JSONDecodeError as line_exc:
                raise SkillFormatError(f"{path}:{number}: bad JSON ({line_exc.msg})") from None
    out = []
    for obj in objects:
        try:
            out.append(Candidate.from_dict(obj, file.parent))
        except SkillFormatError as exc:
            raise SkillFormatError(f"{path}: {exc}") from None
    return out


def _resolve(path: str, base_dir: Path | None) -> Path:
    candidate = Path(path).expanduser()
    if not candidate.is_absolute() and base_dir is not None and (base_dir / candidate).exists():
        return base_dir / candidate
    return candidate


NOT_JUDGED = "infrastructure_error"  # the verdict of a run the judge itself failed
EvaluateFn = Callable[..., Any]  # (task, source, backend=, size=, pool=, **options) -> EvalResult


class Gate:
    """Runs candidates through the judge and records the decision in a store."""

    def __init__(
        self,
        config: GateConfig | None = None,
        *,
        pool=None,
        evaluate: EvaluateFn | None = None,
        resolve_task: Callable[[str], Any] | None = None,
    ):
        self.config = config or GateConfig()
        if self.config.runs < 1:
            raise KernelGymError("the gate needs at least one run per task")
        self.pool = pool
        self._evaluate = evaluate
        self._resolve_task = resolve_task

    def _evaluate_fn(self) -> EvaluateFn:
        if self._evaluate is None:
            import kernelgym  # the judge (torch, workers) loads only when the gate really runs

            self._evaluate = kernelgym.evaluate
        return self._evaluate

    def _task(self, task_id: str):
        if self._resolve_task is not None:
            return self._resolve_task(task_id)
        from kernelgym.tasks import resolve_task

        return resolve_task(task_id)

    # -- deciding ------------------------------------------------------------------------------------------

    def check(self, skill_id: str, solution: Solution) -> GateDecision:
        """Evaluate the solution K times on each task and decide; writes nothing."""
        tasks = [(tid, self._task(tid)) for tid in solution.task_ids]  # unknown ids fail before any run
        evaluate = self._evaluate_fn()
        options = {**self.config.eval_options, "threshold": self.config.threshold}
        runs: list[RunRecord] = []
        failure = unjudged = ""
        for task_id, task in tasks:
            for index in range(self.config.runs):
                result = evaluate(
                    task,
                    solution.source,
                    backend=solution.backend,
                    size=solution.size,
                    pool=self.pool,
                    **options,
                )
                record = _record(task_id, index, result)
                runs.append(record)
                if record.verdict == NOT_JUDGED:  # the judge's fault: says nothing about the solution
                    why = f": {record.reasons[0]}" if record.reasons else ""
                    note = f"{task_id} run {index + 1}: not judged, the judge failed{why}"
                    unjudged = unjudged or note[:400]
                    continue
                problem = self._problem(record)
                if problem and not failure:
                    failure = problem
                if failure and self.config.stop_early:
                    return GateDecision(skill_id, False, failure, runs)
        if failure:
            return GateDecision(skill_id, False, failure, runs)
        if unjudged:
            return GateDecision(skill_id, False, unjudged + "; run the gate again", runs, not_judged=True)
        speeds = [r.verified_speedup for r in runs]
        return GateDecision(
            skill_id,
            True,
            f"{len(runs)}/{len(runs)} runs ok, verified speedup {min(speeds):.2f}x-{max(speeds):.2f}x "
            f"> {self.config.threshold:g}",
            runs,
        )

    def _problem(self, r: RunRecord) -> str:
        where = f"{r.task_id} run {r.run + 1}"
        if r.verdict != "ok":
            why = f": {r.reasons[0]}" if r.reasons else ""
            return f"{where}: verdict {r.verdict}{why}"[:400]
        if r.verified_speedup is None:
            shown = f"{r.speedup:.2f}x" if r.speedup is not None else "none"
            return (
                f"{where}: speedup {shown} not verified above {self.config.threshold:g} "
                "(the low end of its 95% interval is not above the threshold, or timing was unavailable)"
            )
        if r.verified_speedup <= self.config.threshold:
            return (
                f"{where}: verified speedup {r.verified_speedup:.2f}x is not above {self.config.threshold:g}"
            )
        return ""

    # -- recording -----------------------------------------------------------------------------------------

    def submit(self, store, candidate: Candidate, decision: GateDecision | None = None) -> GateDecision:
        """Decide a new candidate and store it as admitted or rejected (an existing id is updated).
        `decision`: this candidate's check(), made already (several candidates' checks can run at once; the
        store is written one at a time)."""
        old = store.find(candidate.skill.id)
        if old is not None and old.solution is None:
            # A seed or hand-written skill has nothing the gate could re-run; a candidate must not replace it.
            raise SkillExistsError(
                f"skill id {old.id!r} belongs to a {old.provenance.source} skill; "
                "give the candidate another id"
            )
        decision = decision or self.check(candidate.skill.id, candidate.solution)
        if decision.not_judged:
            return decision
        skill = Skill.from_dict(candidate.skill.to_dict())
        skill.solution = candidate.solution
        if old is not None:  # a resubmission keeps what was learnt before
            skill.history = [*old.history]
            skill.evidence = [*old.evidence]
        store.put(_apply(skill, decision, demote=True))
        return decision

    def reverify(
        self,
        store,
        ids: Iterable[str] | None = None,
        on_decision: Callable[[GateDecision], None] | None = None,
    ) -> list[GateDecision]:
        """Re-run the gate on the given skills (all when None); each decision is written as it is made."""
        skills = [store.get(i) for i in ids] if ids else store.list()
        decisions = []
        for skill in skills:
            if skill.solution is None:
                decision = GateDecision(
                    skill.id,
                    skill.status == "admitted",
                    "no stored solution to re-run (seed or hand-written skill)",
                    skipped=True,
                )
            else:
                decision = self.check(skill.id, skill.solution)
                if not decision.not_judged:
                    store.put(_apply(skill, decision, demote=self.config.demote_on_failure))
            decisions.append(decision)
            if on_decision is not None:
                on_decision(decision)
        return decisions


def _record(task_id: str, index: int, result) -> RunRecord:
    verdict = getattr(result.verdict, "value", result.verdict)
    timing = getattr(result, "timing", None)
    return RunRecord(
        task_id=task_id,
        run=index,
        verdict=str(verdict),
        speedup=result.speedup,
        verified_speedup=result.verified_speedup,
        reasons=list(result.reasons or []),
        device=str(getattr(timing, "device", "") or ""),
    )


def _apply(skill: Skill, decision: GateDecision, demote: bool) -> Skill:
    """The skill with the decision recorded: a history entry, the status, and (when admitted) evidence."""
    skill = Skill.from_dict(skill.to_dict())
    # The verified speedup where there is one, else the raw one: a rejected run still shows how close it was.
    speedups = [r.verified_speedup if r.verified_speedup is not None else r.speedup for r in decision.runs]
    skill.history.append(
        Verification(
            date=now(),
            verdicts=[r.verdict for r in decision.runs],
            speedups=speedups,
            reason=decision.reason,
            admitted=decision.admitted,
            tasks=[r.task_id for r in decision.runs],
        )
    )
    if decision.admitted:
        skill.status = "admitted"
        for task_id in dict.fromkeys(r.task_id for r in decision.runs):
            task_runs = [r for r in decision.runs if r.task_id == task_id]
            hardware = hardware_name(task_runs[0].device)
            # The slowest run is the speedup every run reproduced: the honest number to quote.
            evidence = Evidence(
                task_id=task_id,
                speedup=round(min(r.verified_speedup for r in task_runs), 4),
                hardware=hardware,
                date=today(),
            )
            skill.evidence = [e for e in skill.evidence if (e.task_id, e.hardware) != (task_id, hardware)]
            skill.evidence.append(evidence)
    elif demote or skill.status != "admitted":
        skill.status = "rejected"
    return skill


def hardware_name(device: str = "") -> str:
    """A short name of the machine the judge timed on: the GPU for cuda devices, else the CPU model."""
    if device.startswith("cuda"):
        return _gpu_name()
    # The judge reports e.g. "cpu (x86_64), 1 thread(s)": the thread count matters for a CPU speedup.
    threads = device.rsplit(", ", 1)[-1] if "thread" in device else ""
    return f"{_cpu_name()}, {threads}" if threads else _cpu_name()


@functools.cache
def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


@functools.cache
def _gpu_name() -> str:
    # nvidia-smi, not torch.cuda: initializing CUDA in this process would break forks made later.
    exe = shutil.which("nvidia-smi")
    if exe:
        try:
            out = subprocess.run(
                [exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                timeout=10, check=False,
            )
            names = [n.strip() for n in out.stdout.splitlines() if n.strip()]
            if names:
                return names[0]
        except (OSError, subprocess.SubprocessError):
            pass
    return "NVIDIA GPU"
