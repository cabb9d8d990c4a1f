"""The `kernelgym` command: tasks, eval (and, as later parts land, bench, baseline, skills)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from kernelgym.errors import KernelGymError

app = typer.Typer(help="kernelgym: environments and a judge for LLM-written GPU kernels.",
                  epilog="Example: kernelgym eval --task L1/1_ReLU my_relu.py",
                  no_args_is_help=True, pretty_exceptions_enable=False)
tasks_app = typer.Typer(help="List, show and screen task suites.", no_args_is_help=True,
                        epilog="Example: kernelgym tasks list --suite kernelbench --level 4")
app.add_typer(tasks_app, name="tasks")
console = Console()


def _print_version(value: bool) -> None:
    if value:
        from kernelgym import __version__

        typer.echo(f"kernelgym {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                       help="print kernelgym's version and exit")) -> None:
    """kernelgym: environments and a judge for LLM-written GPU kernels."""


def _mount_optional() -> None:
    """Commands of the subpackages (their imports stay light: heavy libraries load when a command runs)."""
    from kernelgym.skill_store.cli import app as skills_app

    app.add_typer(skills_app, name="skills", help="The verified skill library: list, search, add, verify.",
                  epilog="Example: kernelgym skills search 'row softmax' --backend cpp")
    from kernelgym.agents.bench_cli import bench_command

    app.command("bench", epilog="Example: kernelgym bench --policy smollm2 --tasks 'L1/*'")(bench_command)
    from kernelgym.agents.davinci.train import app as train_app

    app.add_typer(train_app, name="train", help="Train the daVinci agent: `train sft|rl --config FILE`.",
                  epilog="Example: kernelgym train rl --config rl.toml")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _select(suite: str, level: int | None, kernelbench_root: str | None):
    from kernelgym.tasks import load_suite

    try:
        tasks = load_suite(suite, level=level, kernelbench_root=kernelbench_root)
        list(tasks)  # load now so a bad source fails here with a clear message
        return tasks
    except KernelGymError as exc:
        _fail(str(exc))


SuiteOpt = typer.Option("bundled", "--suite", help="bundled, backward, kernelbench, hf, or a path to problem "
                                                   "files")
ShapesOpt = typer.Option("shown", "--shapes", help="shown, or heldout: correctness also at shapes the judge "
                                                   "draws within the task's limits")
DtypeOpt = typer.Option(None, "--dtype", help="fp32, bf16 or fp16: float inputs and parameters in that dtype "
                                              "(default: the task's own)")
LevelOpt = typer.Option(None, "--level", help="only this level (1-3; kernelbench also 4, built offline)")
RootOpt = typer.Option(None, "--kernelbench-root", help="KernelBench checkout (else $KERNELBENCH_ROOT)")
JsonOpt = typer.Option(False, "--json", help="one JSON object per line")


@tasks_app.command("list", epilog="Example: kernelgym tasks list --suite kernelbench --level 4")
def tasks_list(suite: str = SuiteOpt, level: int | None = LevelOpt, kernelbench_root: str | None = RootOpt,
               as_json: bool = JsonOpt) -> None:
    """List tasks."""
    tasks = _select(suite, level, kernelbench_root)
    if level is not None and not len(tasks):  # a level the suite lacks: an error, not an empty table
        levels = sorted({t.level for t in _select(suite, None, kernelbench_root)})
        _fail(f"--level {level}: the {suite} suite has no such level; its levels: "
              f"{', '.join(map(str, levels)) or 'none'}")
    if as_json:
        for task in tasks:
            typer.echo(json.dumps(task.summary()))
        return
    table = Table("id", "level", "category", "sizes", "options")
    for task in tasks:
        marks = ["backward"] * task.backward + ["shapes"] * bool(task.shape_limits)
        table.add_row(task.id, str(task.level), task.category, ",".join(task.summary()["sizes"]),
                      ",".join(marks))
    console.print(table)
    console.print(f"{len(tasks)} tasks")


@tasks_app.command("show",
                   epilog="Example: kernelgym tasks show kernelbench/L4/7_gpt2_bs32_seq256 --size cpu")
def tasks_show(task_id: str, size: str = typer.Option("gpu", "--size"),
               kernelbench_root: str | None = RootOpt) -> None:
    """Print a task's metadata and source."""
    from kernelgym.tasks import resolve_task
    from kernelgym.tasks.cpu_size import with_cpu_size

    try:
        task = resolve_task(task_id, kernelbench_root=kernelbench_root)
        task = with_cpu_size(task) if size == "cpu" else task
        source = task.source_at(size if task.has_size(size) else "gpu")
    except KernelGymError as exc:
        _fail(str(exc))
    for key, value in task.summary().items():
        typer.echo(f"# {key}: {value}")
    typer.echo(source)


@tasks_app.command("check", epilog="Example: kernelgym tasks check my_tasks/")
def tasks_check(source: str | None = typer.Argument(None, help="a folder of task files (or a suite name); "
                                                                 "default: --suite"),
                suite: str = SuiteOpt, level: int | None = LevelOpt, kernelbench_root: str | None = RootOpt,
                size: str | None = typer.Option(None, "--size", help="cpu or gpu (default: each size a task "
                                                                    "declares)"),
                as_json: bool = JsonOpt) -> None:
    """Check each task: its reference runs at its sizes, is quick enough at the cpu size, and passes the
    degenerate-task screen (not constant, input-independent, NaN, or matched by all zeros). One line per task
    and per file that is not a task; exits 1 when any fails."""
    from kernelgym.tasks.check import check_source

    if size not in (None, "cpu", "gpu"):
        _fail("--size must be cpu or gpu")
    try:
        checks = check_source(source or suite, level=level, kernelbench_root=kernelbench_root,
                              sizes=[size] if size else None)
    except KernelGymError as exc:
        _fail(str(exc))
    for check in checks:
        typer.echo(json.dumps(check.to_dict()) if as_json else check.line())
    failed = sum(not c.ok for c in checks)
    if not as_json:
        typer.echo(f"{len(checks) - failed}/{len(checks)} tasks ok")
    raise typer.Exit(1 if failed else 0)


@app.command("eval", epilog="Example: kernelgym eval --task L1/1_ReLU my_relu.py")
def eval_command(
    paths: list[Path] = typer.Argument(..., help="solution files (with --task), or folders of generations "
                                                 "(KernelBench's level_1_problem_19_sample_0_kernel.py or "
                                                 "level1/19_ReLU.py layouts; with --suite)"),
    task: str | None = typer.Option(None, "--task", help="task id or a problem file's path (judges FILES)"),
    suite: str = typer.Option("bundled", "--suite",
                              help="folder mode: bundled, backward, kernelbench, hf, or a path"),
    level: int | None = LevelOpt,
    backend: str = typer.Option("cpp", "--backend", help="cpp, triton or cuda"),
    size: str | None = typer.Option(None, "--size", help="cpu or gpu (default: from the hardware)"),
    timeout: float = typer.Option(60.0, "--timeout",
                                  help="seconds per run stage (builds have their own limit)"),
    ncu: bool = typer.Option(False, "--ncu",
                             help="GPU: Nsight Compute counters per kernel (after an ok verdict)"),
    workers: int = typer.Option(1, "--workers", help="folder mode: evaluations in parallel"),
    out: Path | None = typer.Option(None, "--out", help="folder mode: also write the JSON lines here"),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="exit 0 even when a solution is not ok"),
    shapes: str = ShapesOpt,
    dtype: str | None = DtypeOpt,
    kernelbench_root: str | None = RootOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Judge solution files for one task (--task), or folders of generations against a suite.

    Exits 1 when any solution is not `ok` (a verdict other than ok, or a file that could not be judged),
    unless --exit-zero.
    """
    from kernelgym.backends import names

    if backend not in names():
        _fail(f"unknown backend {backend!r}; choose from {', '.join(names())}")
    if size not in (None, "cpu", "gpu"):
        _fail("--size must be cpu or gpu")
    options = _task_options(shapes, dtype)
    if task is not None:
        all_ok = _eval_files(paths, task, backend, size, timeout, ncu, kernelbench_root, as_json, options)
    else:
        from kernelgym.folder_eval import FolderEvalConfig

        not_dirs = [str(p) for p in paths if not p.is_dir()]
        if not_dirs:
            _fail(f"{not_dirs[0]} is not a folder: judge files with --task TASK, folders of generations "
                  "without it")
        config = FolderEvalConfig(suite=suite, level=level, kernelbench_root=kernelbench_root,
                                  backend=backend,
                                  size=size, timeout_s=timeout, workers=workers, options=options)
        judged = [_eval_folder(p, config, out, as_json) for p in paths]  # every folder, even after a failure
        all_ok = all(judged)
    raise typer.Exit(0 if all_ok or exit_zero else 1)


def _task_options(shapes: str, dtype: str | None) -> dict:
    """--shapes and --dtype as evaluation options, checked before anything starts."""
    from kernelgym.evaluation.options import EvalOptions

    options = {"shapes": shapes, **({"dtype": dtype} if dtype else {})}
    try:
        EvalOptions.from_kwargs(**options)
    except KernelGymError as exc:
        _fail(str(exc))
    return options


def _eval_files(solutions: list[Path], task: str, backend: str, size: str | None, timeout: float, ncu: bool,
                kernelbench_root: str | None, as_json: bool, options: dict) -> bool:
    from kernelgym.evaluation.feedback import render_feedback
    from kernelgym.tasks import resolve_task
    from kernelgym.tasks.cpu_size import with_cpu_size
    from kernelgym.workers.pool import EvalPool

    try:
        the_task = resolve_task(task, kernelbench_root=kernelbench_root)
        if size == "cpu" or (size is None and backend == "cpp"):
            the_task = with_cpu_size(the_task)
    except KernelGymError as exc:
        _fail(str(exc))
    all_ok = True
    # One file: the worker's warm-ups for many evaluations would only delay this one.
    with EvalPool(workers=1, warm_up=len(solutions) > 1) as pool:
        for path in solutions:
            try:
                source = path.read_bytes()
            except OSError as exc:
                _fail(f"cannot read {path}: {exc.strerror}")
            result = pool.evaluate(the_task, source, backend=backend, size=size, timeout_s=timeout, ncu=ncu,
                                   **options)
            all_ok = all_ok and result.ok
            if as_json:
                row = {"solution": str(path), **{k: v for k, v in result.to_dict().items()
                                                  if k in ("verdict", "compiled", "correct", "speedup",
                                                           "runtime_ms", "ref_runtime_ms", "reasons",
                                                           "task_id", "backend", "size", "wall_s")}}
                row["feedback"] = render_feedback(result)
                typer.echo(json.dumps(row))
            else:
                typer.echo(f"== {path}: {result.verdict.value} ({result.wall_s:.2f} s)")
                typer.echo(render_feedback(result))
    return all_ok


def _eval_folder(folder: Path, config, out: Path | None, as_json: bool) -> bool:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from kernelgym.folder_eval import judge_folder

    status = Console(stderr=True)
    sink = open(out, "a", encoding="utf-8") if out else None  # noqa: SIM115 (closed below)
    bar = Progress(TextColumn(f"[bold]{folder.name}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.fields[last]}"), console=status, transient=as_json)
    job = bar.add_task("eval", total=None, last="")

    def on_row(row: dict) -> None:
        line = json.dumps(row, default=str)
        if as_json:
            typer.echo(line)
        if sink is not None:
            sink.write(line + "\n")
        bar.update(job, advance=1, last=f"{Path(row['solution']).name}: {row['verdict'] or 'not judged'}")

    try:
        with bar:
            outcome = judge_folder(folder, config, on_row=on_row, on_start=lambda n: bar.update(job, total=n))
    except KernelGymError as exc:
        _fail(str(exc))
    finally:
        if sink is not None:
            sink.close()
    if as_json:
        summary = {"summary": outcome.summary, "folder": str(folder), "missing": outcome.missing}
        typer.echo(json.dumps(summary))
    _print_folder_summary(folder, outcome, Console(stderr=True) if as_json else console)
    return all(r["verdict"] == "ok" for r in outcome.rows)


def _print_folder_summary(folder: Path, outcome, where: Console) -> None:
    s = outcome.summary
    gm = s["geomean_speedup"]
    table = Table("", "", title=f"kernelgym eval {folder}", show_header=False)
    judged = s["solutions"] - s["verdicts"].get("not_judged", 0)
    table.add_row("solutions judged", f"{judged} of {s['solutions']}")
    table.add_row("missing tasks", f"{s['missing_tasks']} (counted as not correct)")
    table.add_row("verdicts", ", ".join(f"{k} {n}" for k, n in s["verdicts"].items()))
    table.add_row("correct", f"{s['correct']}/{s['expected']}")
    for p, value in s["fast_p"].items():
        table.add_row(f"fast_{p}", f"{100 * value:.1f}%")
    table.add_row("fast_1 verified", f"{100 * s['fast_1_verified']:.1f}%")
    table.add_row("geomean speedup", f"{gm:.3f}x" if gm else "-")
    where.print(table)
    for row in outcome.rows:
        if row["verdict"] is None:
            where.print(f"not judged: {row['solution']}: {row['error']}")


@app.command("baseline", epilog="Example: kernelgym baseline --level 1 --size cpu")
def baseline_command(
    suite: str = SuiteOpt, level: int | None = LevelOpt, kernelbench_root: str | None = RootOpt,
    size: str | None = typer.Option(None, "--size", help="cpu or gpu (default: from the hardware)"),
    backend: str | None = typer.Option(None, "--backend", help="where to time: cpp = CPU, triton/cuda = GPU"),
    compile_: bool = typer.Option(False, "--compile", help="also time torch.compile of each reference"),
    refresh: bool = typer.Option(False, "--refresh", help="measure again even when cached"),
    workers: int = typer.Option(1, "--workers"),
    as_json: bool = JsonOpt,
) -> None:
    """Eager (and torch.compile) reference times per task, cached per hardware/software fingerprint."""
    from kernelgym.workers.pool import EvalPool, has_gpu

    tasks = _select(suite, level, kernelbench_root)
    chosen = backend or ("cuda" if has_gpu() else "cpp")
    table = Table("task", "size", "eager ms", "compile ms", "cached")
    with EvalPool(workers=workers) as pool:
        futures = [(t, pool.submit(t, "", backend=chosen, size=size, baseline_only=True,
                                   compile_baseline=compile_, refresh_baseline=refresh, timeout_s=120))
                   for t in tasks]
        for task, future in futures:
            result = future.result()
            timing = result.timing
            eager = timing.reference.median_ms if timing and timing.reference else None
            compiled = timing.compile_ms if timing else None
            if as_json:
                typer.echo(json.dumps({"id": task.id, "size": result.size, "verdict": result.verdict.value,
                                       "eager_ms": eager, "compile_ms": compiled,
                                       "cached": bool(timing and timing.compile_baseline_cached),
                                       "reasons": result.reasons}))
            else:
                cached = "yes" if timing and timing.compile_baseline_cached else "no"
                table.add_row(task.id, result.size, f"{eager:.4g}" if eager else result.verdict.value,
                              f"{compiled:.4g}" if compiled else "-", cached)
    if not as_json:
        console.print(table)


@app.command("examples", epilog="Example: kernelgym examples --backend cpp --with-cheats")
def examples_command(
    backend: str = typer.Option("cpp", "--backend"),
    suite: str = typer.Option("bundled", "--suite", help="bundled, backward or curriculum"),
    size: str | None = typer.Option(None, "--size"),
    with_cheats: bool = typer.Option(False, "--with-cheats", help="also judge the bundled cheating examples"),
    only: list[str] = typer.Option([], "--only", help="task ids to judge (default: all of the suite's)"),
    workers: int = typer.Option(2, "--workers"),
    as_json: bool = JsonOpt,
) -> None:
    """Judge a suite's example solutions for a backend (and, with --with-cheats, some cheats)."""
    from kernelgym.evaluation.rules import Reason
    from kernelgym.workers.pool import EvalPool

    wanted = {o if o.startswith(f"{suite}/") else f"{suite}/{o}" for o in only}  # L1/1_ReLU too
    entries = [e for e in _example_entries(suite, backend, with_cheats) if not only or e.task_id in wanted]
    if not entries:
        _fail(f"no example solutions of suite {suite!r} for backend {backend!r}")
    table = Table("task", "solution", "verdict", "speedup", "95% CI", "wall s")
    with EvalPool(workers=workers) as pool:
        futures = [(e, pool.submit(e.task, e.source, backend=backend, size=size)) for e in entries]
        with console.status(f"judging {len(entries)} solutions ..."):
            rows = [(e, f.result()) for e, f in futures]
    for entry, result in rows:
        if as_json:
            typer.echo(json.dumps({"solution": str(entry.path), "cheat": entry.cheat, **result.to_dict()}))
            continue
        t = result.timing
        has_ci = t and t.available and t.speedup_ci_low
        ci = f"{t.speedup_ci_low:.2f}-{t.speedup_ci_high:.2f}" if has_ci else ""
        verified = " verified" if t and t.verified else ""
        speed = f"{result.speedup:.2f}x{verified}" if result.speedup else "-"
        rule = f" ({Reason.parse(result.reasons[0]).rule})" if result.reasons else ""
        verdict = result.verdict.value + rule
        table.add_row(entry.task_id.split("/", 1)[1], entry.cheat or "example", verdict, speed, ci,
                      f"{result.wall_s:.1f}")
    if not as_json:
        console.print(table)
        honest = [r for e, r in rows if e.cheat is None]
        caught = [r for e, r in rows if e.cheat is not None and r.verdict.value in ("hack", "incorrect")]
        console.print(f"{sum(r.ok for r in honest)}/{len(honest)} examples correct, "
                      f"{sum(bool(r.verified_speedup) for r in honest)} with a verified speedup; "
                      f"{len(caught)}/{len(rows) - len(honest)} cheats rejected")


@dataclass(frozen=True)
class _Example:
    task: object  # a Task
    source: str
    path: str  # where the solution came from (a file, or the generator that wrote it)
    cheat: str | None = None

    @property
    def task_id(self) -> str:
        return self.task.id


def _example_entries(suite: str, backend: str, with_cheats: bool) -> list[_Example]:
    """A suite's honest example solutions (and the bundled cheats), each with its task."""
    if suite == "curriculum":
        from kernelgym.tasks.curriculum import curriculum

        return [_Example(c.task, c.solutions[backend], f"curriculum.{backend}_solution({c.op.name})")
                for c in curriculum() if backend in c.solutions]
    from kernelgym.solutions import cheats, examples
    from kernelgym.tasks import bundled, bundled_backward

    if suite not in ("bundled", "backward"):
        _fail(f"unknown suite {suite!r}: bundled, backward or curriculum")
    tasks = bundled() if suite == "bundled" else bundled_backward()
    found = examples(backend, suite=suite) + (cheats(backend) if with_cheats and suite == "bundled" else [])
    return [_Example(tasks.get(e.task_id), e.source, str(e.path), e.cheat) for e in found]


@app.command("view", epilog="Example: kernelgym view runs/bench/my_run --out my_run.html")
def view_command(
    run_dir: Path = typer.Argument(..., help="a bench run folder (the --out of kernelgym bench)"),
    out: Path | None = typer.Option(None, "--out", help="the page's path (default RUN_DIR/view.html)"),
) -> None:
    """One static HTML page for a bench run: best kernels, diffs, feedback, speedups, verdicts, plots."""
    from kernelgym.agents.viewer import write_view

    try:
        path = write_view(run_dir, out)
    except (KernelGymError, OSError, ValueError) as exc:
        _fail(str(exc))
    typer.echo(f"wrote {path} (open it in a browser: file://{path.resolve()})")


_mount_optional()


def main() -> None:
    try:
        app()
    except KernelGymError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
