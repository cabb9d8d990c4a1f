"""`kernelgym skills ...`: browse, search, grow and re-verify the skill library.

The lead mounts `app` under the main CLI; it also runs alone (`python -m kernelgym.skill_store.cli`). Every
bad input (missing file, unknown id, malformed JSON) ends in one `error: ...` line and exit code 1.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kernelgym.errors import KernelGymError

app = typer.Typer(
    help="The skill library: list, show, search, add (through the gate), verify, export, import.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console()
# A task reference such as "L2/1_Gemm_BiasAdd_ReLU" or "bundled/L1/1_ReLU": search uses the task's source.
_TASK_REF = re.compile(r"^([\w.-]+/)?L[123]/\d+_\S+$")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


@app.callback()
def main(
    ctx: typer.Context,
    db: Path | None = typer.Option(
        None, "--db", help="database (default: $KERNELGYM_SKILLS_DB or ~/.cache/kernelgym/skills.sqlite)"
    ),
) -> None:
    """The skill library; the seed skills load into a new database automatically."""
    ctx.obj = {"db": db}


@contextlib.contextmanager
def _store(ctx: typer.Context) -> Iterator:
    from kernelgym.skill_store.store import SkillStore

    try:
        store = SkillStore(ctx.obj.get("db") if ctx.obj else None)
    except KernelGymError as exc:
        _fail(str(exc))
    try:
        yield store
    except KernelGymError as exc:
        _fail(str(exc))
    finally:
        store.close()


def _id_column():
    from rich.table import Column

    return Column("id", no_wrap=True)  # ids are copied into other commands: never wrap or cut them


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


@app.command("list", epilog="Example: kernelgym skills list --status admitted --backend cpp")
def list_command(
    ctx: typer.Context,
    status: str | None = typer.Option(None, "--status", help="candidate, admitted or rejected"),
    backend: str | None = typer.Option(None, "--backend", help="cuda, triton or cpp"),
) -> None:
    """List skills (id, title, backends, bound, status, version)."""
    from kernelgym.skill_store.skill import BACKENDS, STATUSES

    if status is not None and status not in STATUSES:
        _fail(f"--status must be one of {', '.join(STATUSES)}")
    if backend is not None and backend not in BACKENDS:
        _fail(f"--backend must be one of {', '.join(BACKENDS)}")
    with _store(ctx) as store:
        skills = store.list(status=status, backend=backend)
        table = Table("title", "backends", "bound", "status", "v")
        table.columns.insert(0, _id_column())
        for s in skills:
            table.add_row(
                s.id,
                _short(s.title, 60),
                ",".join(s.applies_when.backends),
                s.applies_when.bound,
                s.status,
                str(s.version),
            )
        console.print(table)
        console.print(f"{len(skills)} skills in {store.path}")


@app.command("show", epilog="Example: kernelgym skills show argmax-index-reduction")
def show_command(
    ctx: typer.Context,
    skill_id: str = typer.Argument(..., metavar="ID"),
    as_json: bool = typer.Option(False, "--json", help="the raw record"),
) -> None:
    """Print one skill: technique, code pattern, evidence and verification history."""
    import json

    with _store(ctx) as store:
        skill = store.get(skill_id)
    if as_json:
        typer.echo(json.dumps(skill.to_dict(), indent=2, ensure_ascii=False))
        return
    aw = skill.applies_when
    console.print(f"[bold]{skill.id}[/bold] v{skill.version}: {skill.title}", highlight=False)
    console.print(
        f"status {skill.status}; provenance {skill.provenance.source}"
        + (f" ({skill.provenance.trajectory})" if skill.provenance.trajectory else ""),
        highlight=False,
    )
    console.print(
        f"applies when: {'; '.join(aw.patterns)} | bound {aw.bound} | backends {', '.join(aw.backends)}",
        highlight=False,
        markup=False,
    )
    console.print("\n" + skill.technique, markup=False)
    if skill.code_pattern:
        console.print("\n" + skill.code_pattern, markup=False, highlight=False)
    if skill.evidence:
        table = Table("task", "speedup", "hardware", "date", title="evidence")
        for e in skill.evidence:
            table.add_row(e.task_id, f"{e.speedup:.2f}x", e.hardware, e.date)
        console.print(table)
    if skill.history:
        table = Table("date", "admitted", "verdicts", "speedups", "reason", title="verification history")
        for v in skill.history:
            table.add_row(
                v.date,
                "yes" if v.admitted else "no",
                ",".join(v.verdicts),
                ",".join("-" if s is None else f"{s:.2f}" for s in v.speedups),
                v.reason,
            )
        console.print(table)
    if skill.solution is not None:
        console.print(
            f"solution: {skill.solution.backend} on {', '.join(skill.solution.task_ids)} "
            f"({len(skill.solution.source)} chars)",
            highlight=False,
        )


@app.command("search", epilog="Example: kernelgym skills search L1/1_ReLU --k 3")
def search_command(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="free text, or a task id such as L2/1_Gemm_BiasAdd_ReLU"),
    backend: str | None = typer.Option(None, "--backend", help="only skills for this backend"),
    k: int = typer.Option(5, "--k", min=1, help="how many skills"),
) -> None:
    """BM25 search of the admitted skills (a task id searches with that task's reference source)."""
    from kernelgym.skill_store.retrieval import Retriever
    from kernelgym.skill_store.skill import BACKENDS

    if backend is not None and backend not in BACKENDS:
        _fail(f"--backend must be one of {', '.join(BACKENDS)}")
    target = query
    if _TASK_REF.match(query) or (query.endswith(".py") and Path(query).is_file()):
        from kernelgym.tasks import resolve_task

        try:
            target = resolve_task(query)
        except KernelGymError as exc:
            _fail(str(exc))
    with _store(ctx) as store:
        hits = Retriever.from_store(store).search(target, backend=backend, k=k)
    if not hits:
        console.print("no matching skills")
        return
    table = Table("rank", "score", "title", "backends")
    table.columns.insert(1, _id_column())
    for rank, hit in enumerate(hits, 1):
        table.add_row(
            str(rank),
            hit.id,
            f"{hit.score:.2f}",
            _short(hit.skill.title, 60),
            ",".join(hit.skill.applies_when.backends),
        )
    console.print(table)


def _gate(runs: int, threshold: float, timeout: float | None):
    from kernelgym.skill_store.gate import Gate, GateConfig

    options = {"timeout_s": timeout} if timeout else {}
    return Gate(GateConfig(runs=runs, threshold=threshold, eval_options=options))


RunsOpt = typer.Option(3, "--runs", min=1, help="evaluations per source task (K)")
ThresholdOpt = typer.Option(1.0, "--threshold", help="every run's verified speedup must be above this")
TimeoutOpt = typer.Option(None, "--timeout", help="seconds per evaluation stage")


def _print_decision(decision) -> None:
    state = decision.state
    colour = {"admitted": "green", "rejected": "red", "skipped": "yellow", "not judged": "yellow"}[state]
    console.print(f"[{colour}]{state}[/{colour}] {decision.skill_id}: ", end="")
    console.print(decision.reason, markup=False, highlight=False)


@app.command("add", epilog="Example: kernelgym skills add candidates.jsonl --runs 3")
def add_command(
    ctx: typer.Context,
    file: Path = typer.Argument(..., help="candidate .json/.jsonl: the skill, solution_path, task_ids"),
    runs: int = RunsOpt,
    threshold: float = ThresholdOpt,
    timeout: float | None = TimeoutOpt,
) -> None:
    """Run candidate skills through the gate; each is stored as admitted or rejected (with the reason)."""
    from kernelgym.skill_store.gate import read_candidates

    if not file.is_file():
        _fail(f"no such file: {file}")
    try:
        candidates = read_candidates(file)
    except KernelGymError as exc:
        _fail(str(exc))
    gate = _gate(runs, threshold, timeout)
    rejected = 0
    with _store(ctx) as store:
        for candidate in candidates:
            with console.status(f"verifying {candidate.skill.id} ({runs} run(s) per task) ..."):
                decision = gate.submit(store, candidate)
            rejected += not decision.admitted
            _print_decision(decision)
    console.print(f"{len(candidates) - rejected}/{len(candidates)} admitted")


@app.command("verify", epilog="Example: kernelgym skills verify argmax-index-reduction")
def verify_command(
    ctx: typer.Context,
    ids: list[str] | None = typer.Argument(None, metavar="[ID]...", help="skills to re-verify (default all)"),
    runs: int = RunsOpt,
    threshold: float = ThresholdOpt,
    timeout: float | None = TimeoutOpt,
) -> None:
    """Re-verify skills that carry a solution (all of them when no id is given); status follows the result."""
    gate = _gate(runs, threshold, timeout)
    with _store(ctx) as store:
        for skill_id in ids or []:
            store.get(skill_id)  # every id checked before anything runs
        decisions = gate.reverify(store, ids or None, on_decision=_print_decision)
    checked = [d for d in decisions if not d.skipped]
    console.print(
        f"{sum(d.admitted for d in checked)}/{len(checked)} re-verified skills passed; "
        f"{len(decisions) - len(checked)} without a solution skipped"
    )


@app.command("export", epilog="Example: kernelgym skills export --out skills.jsonl")
def export_command(
    ctx: typer.Context, out: Path | None = typer.Option(None, "--out", help="file to write (default: stdout)")
) -> None:
    """Export the library as JSONL (sorted by id, stable key order: diffable)."""
    with _store(ctx) as store:
        if out is None:
            typer.echo(store.export_jsonl(), nl=False)
            return
        try:
            store.export_jsonl(out)
        except OSError as exc:
            _fail(f"cannot write {out}: {exc.strerror}")
        typer.echo(f"exported {len(store)} skills to {out}")


@app.command("import", epilog="Example: kernelgym skills import skills.jsonl")
def import_command(ctx: typer.Context, file: Path = typer.Argument(..., help="a JSONL export")) -> None:
    """Import skills from JSONL (all or nothing): new ids added, changed ones updated with a version bump."""
    if not file.is_file():
        _fail(f"no such file: {file}")
    with _store(ctx) as store:
        report = store.import_jsonl(file)
    typer.echo(f"imported {file}: {report}")


if __name__ == "__main__":
    app()
