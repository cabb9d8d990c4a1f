"""The judge's integrity score: every corpus in tests/ through the real judge, per backend.

    python benchmarks/judge_trust/integrity.py          # the CPU corpora (cpp), into
                                                        # benchmarks/results/judge_trust/integrity.md
    python benchmarks/judge_trust/integrity.py --backend triton --backend cuda  # a GPU host: cheats, examples
    python benchmarks/judge_trust/integrity.py --backend triton --backend cuda --no-launch-evidence --json j

Counts, per backend:
- cheats credited: a cheat of tests/adversarial that a reward pays more than its honest limit (the corpus's
  own test, `assert_no_credit`, fails on it; a defused cheat over its speed limit is judged again once, as
  that test does: an honest kernel's speed on a loaded 2-core VM can exceed it in one evaluation);
- cheats judged ok: the verdict was `ok` (defused to its honest part, or a hole);
- false rejections: an honest solution (tests/legit, kernelgym's bundled examples, those of the backward
  suite) not judged `ok`. The backward suite's own cheats count too (credited: a verified speedup).
The CUDA-L1 corpus (tests/corpora/cuda_l1_labels.csv) is GPU-only: benchmarks/judge_trust/cuda_l1.py judges it
there.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import signal
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "benchmarks" / "results" / "judge_trust" / "integrity.md"


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class Row:
    corpus: str
    name: str
    task_id: str
    backend: str
    verdict: str
    speedup: float | None
    rules: str
    failure: str  # "" when the row is as it should be; else "credited", "ok cheat" or "false rejection"
    shares: str = ""


def _shares(result) -> str:
    prof = result.profile
    if prof is None or not getattr(prof, "sampled_shares", None):
        return ""
    return " ".join(f"{k} {v:.2f}" for k, v in prof.sampled_shares.items()) + f" (n={prof.samples})"


def _rules(result) -> str:
    return ", ".join(sorted({getattr(r, "rule", "") or str(r) for r in result.reasons}))


def _judge(backends: set[str], workers: int, launch_evidence: bool = True, rows: list[Row] | None = None
           ) -> list[Row]:
    """Every job through one pool; each row is appended to `rows` as it is judged (a run stopped at its time
    limit keeps the rows it has)."""
    from kernelgym.evaluation.options import EvalOptions
    from kernelgym.evaluation.result import Verdict
    from kernelgym.solutions import cheats, examples
    from kernelgym.tasks import bundled, bundled_backward
    from kernelgym.workers.pool import EvalPool

    adversarial = _module(ROOT / "tests" / "adversarial" / "test_corpus.py", "integrity_adversarial")
    legit = _module(ROOT / "tests" / "legit" / "test_legit.py", "integrity_legit")
    tasks, backward_tasks = bundled(), bundled_backward()
    jobs = []  # (corpus, name, task_id, backend, source, cheat or None)
    for cheat in adversarial.CHEATS:
        if cheat.backend in backends:
            jobs.append(("adversarial", cheat.name, cheat.task_id, cheat.backend, cheat.source, cheat))
    for honest in legit.SOLUTIONS:
        if honest.backend in backends:
            jobs.append(("legit", honest.name, honest.task_id, honest.backend, honest.source, None))
    for backend in sorted(backends):
        for example in examples(backend):
            jobs.append(("examples", f"{backend}:{example.task_id}", example.task_id, backend,
                         example.source, None))
        for example in examples(backend, "backward"):
            jobs.append(("backward", f"{backend}:{example.task_id}", example.task_id, backend,
                         example.source, None))
        for cheat in cheats(backend, "backward"):
            jobs.append(("backward-cheats", f"{backend}:{cheat.cheat}", cheat.task_id, backend, cheat.source,
                         "suite"))
    rows = [] if rows is None else rows
    options = EvalOptions(timing_budget_s=1.0, launch_evidence=launch_evidence)
    with EvalPool(workers=workers, options=options) as pool:
        def task_of(job):
            return (backward_tasks if job[0].startswith("backward") else tasks).get(job[2])

        futures = [(job, pool.submit(task_of(job), job[4], backend=job[3],
                                     size="cpu" if job[3] == "cpp" else "gpu")) for job in jobs]
        for (corpus, name, task_id, backend, source, cheat), future in futures:
            result = future.result()
            failure = ""
            if cheat == "suite":  # the backward suite's cheats: any `ok` with a verified speedup is credit
                failure = "credited" if result.verified_speedup is not None else ""
                failure = failure or ("ok cheat" if result.verdict is Verdict.OK else "")
            elif cheat is not None:
                failure = _credited(adversarial, cheat, result)
                if failure and result.verdict is Verdict.OK:  # as the corpus's test: a speed that holds again
                    result = pool.evaluate(tasks.get(task_id), source, backend=backend, size=cheat.size)
                    failure = _credited(adversarial, cheat, result)
                if not failure and result.verdict is Verdict.OK:
                    failure = "ok cheat"
            elif result.verdict is not Verdict.OK:
                failure = "false rejection"
            row = Row(corpus, name, task_id, backend, result.verdict.value, result.speedup, _rules(result),
                      failure, _shares(result))
            print(f"{corpus:12} {name:48} {row.verdict:10} {row.speedup or '-'!s:8} {failure:16} "
                  f"{row.rules[:40]:40} {row.shares}", flush=True)
            rows.append(row)
    return rows


def _credited(adversarial, cheat, result) -> str:
    try:
        adversarial.assert_no_credit(cheat, result)
    except AssertionError:
        return "credited"
    return ""


def _score(rows: list[Row]) -> list[str]:
    lines = ["| backend | cheats | cheats credited | cheats judged ok | honest | false rejections |",
             "| --- | --- | --- | --- | --- | --- |"]
    for backend in sorted({r.backend for r in rows}):
        mine = [r for r in rows if r.backend == backend]
        cheats = [r for r in mine if r.corpus in ("adversarial", "backward-cheats")]
        honest = [r for r in mine if r.corpus not in ("adversarial", "backward-cheats")]
        lines.append(f"| {backend} | {len(cheats)} | {sum(r.failure == 'credited' for r in cheats)} | "
                     f"{sum(r.verdict == 'ok' for r in cheats)} | {len(honest)} | "
                     f"{sum(r.failure == 'false rejection' for r in honest)} |")
    return lines


def _report(rows: list[Row], command: str, partial: bool = False) -> str:
    import torch

    head = [f"# Judge integrity ({datetime.date.today().isoformat()})", "",
            f"Command: `{command}`  ",
            *(["**Partial: stopped at its time limit; the rows judged until then.**  "] if partial else []),
            (f"Machine: {platform.processor() or platform.machine()}, {len(os.sched_getaffinity(0))} cores; "
             f"Python {platform.python_version()}, torch {torch.__version__}"), "", *_score(rows), "",
            ("Cheats judged ok were defused: only their honest part ran (tests/adversarial/test_corpus.py: "
             "no verified speedup and no reward above an honest solution's). Every row:"), "",
            "| corpus | solution | task | verdict | speedup | rules | problem | sampled shares |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    body = [f"| {r.corpus} | {r.name} | {r.task_id} | {r.verdict} | "
            f"{'-' if r.speedup is None else f'{r.speedup:.2f}x'} | {r.rules} | {r.failure or '-'} | "
            f"{r.shares or '-'} |" for r in rows]
    return "\n".join(head + body) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", choices=["cpp", "triton", "cuda"],
                        help="backends to judge (repeatable; default cpp)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--json", type=Path, default=None, help="also write every row here, as JSON")
    parser.add_argument("--no-launch-evidence", action="store_false", dest="launch_evidence",
                        help="GPU: judge with the in-process profile alone, as before the launches seen from "
                             "outside the candidate decided (EvalOptions.launch_evidence, on by default)")
    parser.add_argument("--launch-evidence", action="store_true", dest="launch_evidence",
                        help="the default (kept for older commands)")
    args = parser.parse_args(argv)
    rows: list[Row] = []
    command = "python benchmarks/judge_trust/integrity.py " + " ".join(argv or sys.argv[1:])

    def write(partial: bool) -> None:
        args.out.write_text(_report(rows, command, partial))
        print(f"written to {args.out}", flush=True)
        if args.json:
            args.json.write_text(json.dumps([asdict(r) for r in rows], indent=1) + "\n")
            print(f"written to {args.json}", flush=True)

    def stop(signum, frame) -> None:  # `timeout` stops it: what was judged is written before the pool stops
        write(partial=True)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        _judge(set(args.backend or ["cpp"]), args.workers, args.launch_evidence, rows)
    except KeyboardInterrupt:
        return 1
    print("\n".join(_score(rows)))
    write(partial=False)
    return 1 if any(r.failure in ("credited", "false rejection") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
