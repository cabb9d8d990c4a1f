"""Skill retrieval quality: BM25 recall@k and MRR over the labelled bundled-suite set.

    python benchmarks/agents/skill_retrieval.py [--k 5] [--labels FILE] [--out FILE.md] [--misses]

Uses the seed library (a throwaway database, so the user's library does not change the numbers) and the
labels in skill_store/bundled_labels.jsonl. Prints the numbers and writes a Markdown report with
the machine, versions and date.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from kernelgym.envs.prompt import cpu_name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--labels", default=None, help="labelled JSONL (default: the bundled set)")
    parser.add_argument("--out", default=str(Path(__file__).parents[1] / "results" / "agents"
                                             / "skill_retrieval.md"))
    parser.add_argument(
        "--bound-mismatch",
        type=float,
        default=None,
        help="score share kept by skills of the other bound type (default: RetrievalConfig's; 1 = off)",
    )
    parser.add_argument("--misses", action="store_true", help="also print every row with recall below 1")
    args = parser.parse_args()

    from importlib.metadata import version

    from kernelgym.skill_store import SkillStore
    from kernelgym.skill_store.labels import default_labels_path, evaluate_retrieval, load_labels
    from kernelgym.skill_store.retrieval import RetrievalConfig, Retriever
    from kernelgym.tasks import bundled

    labels = load_labels(args.labels)
    tasks = bundled()
    with tempfile.TemporaryDirectory() as tmp:
        store = SkillStore(Path(tmp) / "skills.sqlite")
        n_skills = len(store)
        start = time.perf_counter()
        config = RetrievalConfig()
        if args.bound_mismatch is not None:
            config.bound_mismatch = args.bound_mismatch
        retriever = Retriever.from_store(store, config)
        metrics = evaluate_retrieval(retriever, labels, tasks, k=args.k)
        elapsed = time.perf_counter() - start
        store.close()

    groups: dict[str, list] = defaultdict(list)
    for q in metrics.queries:
        groups[f"backend {q.backend}"].append(q)
        groups[f"level {q.task_id.split('/')[1]}"].append(q)

    def row(name, qs):
        n = len(qs)
        return (
            f"| {name} | {n} | {sum(q.recall for q in qs) / n:.3f} | "
            f"{sum(q.reciprocal_rank for q in qs) / n:.3f} |"
        )

    print(
        f"BM25 over {n_skills} seed skills, {metrics.n} labelled (task, backend) rows "
        f"from {len({q.task_id for q in metrics.queries})} tasks"
    )
    print(f"recall@{args.k} = {metrics.recall_at_k:.3f}   MRR = {metrics.mrr:.3f}   ({elapsed:.2f} s)")
    for name in sorted(groups):
        qs = groups[name]
        print(
            f"  {name:12s} n={len(qs):3d}  recall@{args.k}={sum(q.recall for q in qs) / len(qs):.3f}  "
            f"MRR={sum(q.reciprocal_rank for q in qs) / len(qs):.3f}"
        )
    misses = [q for q in metrics.queries if q.recall < 1.0]
    if args.misses:
        for q in misses:
            lost = [r for r in q.relevant if r not in q.retrieved]
            print(f"  miss {q.task_id} [{q.backend}] recall={q.recall:.2f} missing={lost} top={q.retrieved}")

    versions = {name: _version(version, name) for name in ("kernelgym", "rank-bm25", "torch")}
    lines = [
        "# Skill retrieval benchmark",
        "",
        f"Date: {dt.datetime.now().astimezone().isoformat(timespec='seconds')}  ",
        f"Machine: {cpu_name()} ({os.cpu_count()} cores), {platform.system()} {platform.release()}  ",
        f"Python {platform.python_version()}; " + ", ".join(f"{k} {v}" for k, v in versions.items()) + "  ",
        f"Command: `python benchmarks/agents/skill_retrieval.py --k {args.k}"
        + (f" --bound-mismatch {args.bound_mismatch:g}" if args.bound_mismatch is not None else "")
        + "`",
        "",
        (f"BM25 alone (no LLM rerank) over the {n_skills} seed skills, filtered by each row's backend; "
         f"{metrics.n} labelled (task, backend) rows over {len({q.task_id for q in metrics.queries})} "
         f"bundled tasks (`{_relative(args.labels or default_labels_path())}`). "
         f"recall@{args.k} is the mean share of a row's relevant skills found in its top {args.k}; "
         "MRR uses the rank of the first relevant skill in the full ranking."),
        "",
        (f"Retrieval settings: field weights {config.field_weights}, BM25 k1={config.k1}, b={config.b}, "
         f"bound prior {config.bound_mismatch:g} (the score share kept by a skill whose bound type is the "
         "opposite of the task's guessed one; 1 turns it off)."),
        "",
        f"| rows | n | recall@{args.k} | MRR |",
        "|---|---|---|---|",
        row("all", metrics.queries),
        *[row(name, groups[name]) for name in sorted(groups)],
        "",
        f"Rows with recall below 1: {len(misses)} of {metrics.n}.",
        "",
    ]
    Path(args.out).write_text("\n".join(lines))
    print(f"wrote {args.out}")
    return 0


def _version(version, name: str) -> str:
    try:
        return version(name)
    except Exception:  # noqa: BLE001 - a package that fails to report its version is just '?'
        return "?"


def _relative(path) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
