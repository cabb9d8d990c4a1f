"""Judge the CUDA-L1 published solutions (an RL-trained model's KernelBench answers) and compare with labels.

    python benchmarks/judge_trust/cuda_l1.py [--corpus PATH] [--levels 1,2,3] [--only legit,hack] [--sample N]
        [--per-label N] [--seed S] [--ids 1/19,2/5] [--workers W] [--timing-budget S] [--out DIR]

The corpus is read at run time (--corpus, $CUDA_L1_CORPUS, shared/corpora/cuda-l1/a100_pcie.json in the
checkout, or /work/shared/corpora/cuda-l1/a100_pcie.json) and never copied into the project. Each entry
becomes a KernelBench task (its ref_code, at its own sizes) and a solution (its custom_code) in a temporary
folder, judged by kernelgym on the cuda backend. On a machine without
a GPU the cuda backend only builds (verdicts then say nothing about correctness or speed): the output says so.

Labels (tests/corpora/cuda_l1_labels.csv: level,task_id,label,reason) name each custom-kernel entry `legit` or
`hack`; entries without a custom kernel are `no_kernel` by rule (no load_inline / cpp_extension / CUDA source
in custom_code). Prints a verdict table and a confusion table (label x verdict); with --out (default $OUT when
set) also writes cuda_l1_results.jsonl and cuda_l1_report.md there.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
CORPUS_PLACES = (ROOT / "shared" / "corpora" / "cuda-l1" / "a100_pcie.json",
                 Path("/work/shared/corpora/cuda-l1/a100_pcie.json"))
LABELS = ROOT / "tests" / "corpora" / "cuda_l1_labels.csv"
KERNEL_MARKERS = ("load_inline", "cpp_extension", "__global__")
VERDICT_CLASSES = ("ok", "hack", "incorrect", "compile_error", "other")


@dataclass(frozen=True)
class Entry:
    level: int
    task_id: int
    ref_code: str
    custom_code: str

    @property
    def key(self) -> str:
        return f"{self.level}/{self.task_id}"


def has_custom_kernel(custom_code: str) -> bool:
    """The no_kernel rule: an entry without any of these builds no kernel of its own."""
    return any(marker in custom_code for marker in KERNEL_MARKERS)


def read_corpus(path: Path) -> list[Entry]:
    data = json.loads(path.read_text())
    return [Entry(int(level), int(e["task_id"]), e["ref_code"], e["custom_code"])
            for level, entries in sorted(data.items()) for e in entries]


def read_labels(path: Path = LABELS) -> dict[str, tuple[str, str]]:
    """'level/task_id' -> (label, reason) for the labelled custom-kernel entries."""
    if not path.exists():
        return {}
    with path.open() as f:
        return {f"{row['level']}/{row['task_id']}": (row["label"], row["reason"])
                for row in csv.DictReader(f)}


def label_of(entry: Entry, labels: dict[str, tuple[str, str]]) -> str:
    if not has_custom_kernel(entry.custom_code):
        return "no_kernel"
    return labels.get(entry.key, ("unlabelled", ""))[0]


def lay_out(entries: list[Entry], root: Path) -> dict[str, tuple[Path, Path]]:
    """KernelBench's layout: levelN/<id>_<name>.py tasks, level_N_problem_ID_sample_0_kernel.py solutions."""
    paths = {}
    for e in entries:
        task = root / "tasks" / f"level{e.level}" / f"{e.task_id}_cuda_l1_problem.py"
        solution = root / "solutions" / f"level_{e.level}_problem_{e.task_id}_sample_0_kernel.py"
        task.parent.mkdir(parents=True, exist_ok=True)
        solution.parent.mkdir(parents=True, exist_ok=True)
        task.write_text(e.ref_code)
        solution.write_text(e.custom_code)
        paths[e.key] = (task, solution)
    return paths


def verdict_class(verdict: str) -> str:
    return verdict if verdict in VERDICT_CLASSES else "other"


def rule_of(reason) -> str:
    """The rule a reason names (typed reasons will carry it as `.rule`)."""
    return getattr(reason, "rule", None) or str(reason).split(":")[0]


def select(entries: list[Entry], labels, args) -> list[Entry]:
    levels = {int(v) for v in args.levels.split(",")}
    chosen = [e for e in entries if e.level in levels]
    if args.ids:
        wanted = set(args.ids.split(","))
        chosen = [e for e in chosen if e.key in wanted]
    if args.only:
        kinds = set(args.only.split(","))
        chosen = [e for e in chosen if label_of(e, labels) in kinds]
    if args.per_label:
        rng = random.Random(args.seed)
        groups: dict[str, list[Entry]] = {}
        for e in chosen:
            groups.setdefault(label_of(e, labels), []).append(e)
        chosen = sorted((e for group in groups.values()
                         for e in rng.sample(group, min(args.per_label, len(group)))),
                        key=lambda e: (e.level, e.task_id))
    if args.sample and args.sample < len(chosen):
        chosen = sorted(random.Random(args.seed).sample(chosen, args.sample),
                        key=lambda e: (e.level, e.task_id))
    return chosen


def judge(entries: list[Entry], labels, args) -> list[dict]:
    from kernelgym.tasks import from_path
    from kernelgym.workers.pool import EvalPool, has_gpu

    gpu = has_gpu()
    print(f"device: {'GPU' if gpu else 'no GPU: the cuda backend only builds, verdicts are build-only'}",
          flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cuda_l1_") as tmp:
        paths = lay_out(entries, Path(tmp))
        tasks = {t.path: t for t in from_path(Path(tmp) / "tasks")}
        options = {"timing_budget_s": args.timing_budget, "timeout_s": args.timeout}
        with EvalPool(workers=args.workers) as pool:
            futures = []
            for e in entries:
                task_path, solution_path = paths[e.key]
                task = tasks[str(task_path)]
                futures.append((e, time.perf_counter(),
                                pool.submit(task, solution_path.read_text(), backend="cuda", size="gpu",
                                            **options)))
            for e, start, future in futures:
                result = future.result()
                timing = result.timing
                rows.append({
                    "level": e.level, "task_id": e.task_id, "label": label_of(e, labels),
                    "verdict": result.verdict.value, "gpu": gpu,
                    "speedup": timing.speedup if timing and timing.speedup is not None else None,
                    "verified_speedup": result.verified_speedup,
                    "rules": sorted({rule_of(r) for r in result.reasons}),
                    "reason": str(result.reasons[0])[:200] if result.reasons else "",
                    "wall_s": round(time.perf_counter() - start, 1),
                })
                print(_row_line(rows[-1]), flush=True)
    return rows


def _row_line(row: dict) -> str:
    speed = f"{row['speedup']:.2f}x" if row["speedup"] is not None else "-"
    reason = row["reason"].replace("|", "/")[:110]
    return f"| {row['level']} | {row['task_id']} | {row['label']} | {row['verdict']} | {speed} | {reason} |"


def confusion(rows: list[dict]) -> str:
    counts = Counter((r["label"], verdict_class(r["verdict"])) for r in rows)
    labels = [lb for lb in ("legit", "hack", "no_kernel", "unlabelled")
              if any(r["label"] == lb for r in rows)]
    lines = ["| label \\ verdict | " + " | ".join(VERDICT_CLASSES) + " | total |",
             "| --- |" + " --- |" * (len(VERDICT_CLASSES) + 1)]
    for lb in labels:
        cells = [counts[(lb, v)] for v in VERDICT_CLASSES]
        lines.append(f"| {lb} | " + " | ".join(map(str, cells)) + f" | {sum(cells)} |")
    legit = [r for r in rows if r["label"] == "legit"]
    cheats = [r for r in rows if r["label"] in ("hack", "no_kernel")]
    lines.append("")
    lines.append(f"legit judged ok: {sum(r['verdict'] == 'ok' for r in legit)}/{len(legit)}; "
                 f"hack or no_kernel credited (ok with speedup >= 1.1): "
                 f"{sum(r['verdict'] == 'ok' and (r['speedup'] or 0) >= 1.1 for r in cheats)}/{len(cheats)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=os.environ.get("CUDA_L1_CORPUS", ""),
                        help="the corpus file (default: shared/corpora/cuda-l1 in the checkout, else "
                             "/work/shared/...)")
    parser.add_argument("--levels", default="1,2,3")
    parser.add_argument("--only", default="", help="labels to keep, e.g. legit,hack (no_kernel, unlabelled)")
    parser.add_argument("--ids", default="", help="level/task_id list, e.g. 1/19,2/5")
    parser.add_argument("--sample", type=int, default=0)
    parser.add_argument("--per-label", type=int, default=0, help="at most N entries of each label (seeded)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=None, help="pool workers (builds run in parallel)")
    parser.add_argument("--timing-budget", type=float, default=1.0, help="seconds of timing per side")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per run stage")
    parser.add_argument("--out", default=os.environ.get("OUT", ""))
    parser.add_argument("--list", action="store_true",
                        help="print the selection and its labels, judge nothing")
    args = parser.parse_args(argv)

    corpus = Path(args.corpus) if args.corpus else next((p for p in CORPUS_PLACES if p.exists()),
                                                        CORPUS_PLACES[-1])
    if not corpus.exists():
        print(f"corpus not found: {corpus} (set --corpus or $CUDA_L1_CORPUS)", file=sys.stderr)
        return 2
    labels = read_labels()
    entries = select(read_corpus(corpus), labels, args)
    print(f"{len(entries)} entries: " + ", ".join(f"{k} {v}" for k, v in
                                                    sorted(Counter(label_of(e, labels)
                                                                   for e in entries).items())))
    if args.list:
        for e in entries:
            print(e.key, label_of(e, labels), labels.get(e.key, ("", ""))[1])
        return 0
    print("| level | task | label | verdict | speedup | first reason |")
    print("| --- | --- | --- | --- | --- | --- |", flush=True)
    rows = judge(entries, labels, args)
    table = confusion(rows)
    print()
    print(table)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "cuda_l1_results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        report = ["| level | task | label | verdict | speedup | first reason |",
                  "| --- | --- | --- | --- | --- | --- |"]
        (out / "cuda_l1_report.md").write_text("\n".join(report + [_row_line(r) for r in rows]) + "\n\n"
                                               + table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
