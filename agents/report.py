"""Bench report: fast_p, geometric-mean speedup, per level and category, verdicts, a plot, TensorBoard.

fast_p follows KernelBench: the share of the task set whose solution is correct AND faster than the
reference by more than p (fast_0 is plain correctness). The denominator is every (task, sample) of the
set, so a task with no finished episode, or whose episode failed, counts as not fast. An episode's
solution is its best correct turn; the speedup is the measured one (KernelBench's), and `fast_1 verified`
also requires kernelgym's confidence interval to clear the threshold. The geometric mean is over correct
episodes that have a speedup.

An episode the judge could not judge (no correct turn, and a turn whose verdict is `infrastructure_error`:
the judge failed, not the solution) is never counted as a failure: it leaves the denominator and is listed
as not judged; `kernelgym bench` runs it again on its next invocation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

PS = (0.0, 1.0, 1.5, 2.0)
INFRASTRUCTURE_ERROR = "infrastructure_error"  # the judge failed: the turn says nothing about the solution
NOT_JUDGED = ("no_code", "done", INFRASTRUCTURE_ERROR)  # turn verdicts that are not the judge's


def episode_judged(record: dict[str, Any]) -> bool:
    """False when the episode has no correct turn and the judge failed on one of its turns."""
    if record.get("correct"):
        return True
    return not any(t.get("verdict") == INFRASTRUCTURE_ERROR for t in record.get("turns", []))


def _speedup(r: dict[str, Any]) -> float | None:
    value = r.get("speedup")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) and value > 0 else None


def fast_p(records: Iterable[dict[str, Any]], n: int, p: float, *, verified: bool = False) -> float:
    """KernelBench fast_p over `n` expected episodes (missing ones count as not fast)."""
    if n <= 0:
        return 0.0
    hits = 0
    for r in records:
        if not r.get("correct"):
            continue
        if p <= 0 and not verified:
            hits += 1
            continue
        s = r.get("verified_speedup") if verified else _speedup(r)
        hits += s is not None and s > p
    return hits / n


def geomean(values: Sequence[float]) -> float | None:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


def group_stats(records: list[dict[str, Any]], n_tasks: int, samples: int) -> dict[str, Any]:
    not_judged = sum(not episode_judged(r) for r in records)
    records = [r for r in records if episode_judged(r)]
    expected = n_tasks * samples - not_judged
    speeds = [s for r in records if r.get("correct") and (s := _speedup(r)) is not None]
    return {
        "tasks": n_tasks, "expected": expected, "finished": len(records), "not_judged": not_judged,
        "correct": sum(bool(r.get("correct")) for r in records),
        "fast_p": {f"{p:g}": fast_p(records, expected, p) for p in PS},
        "fast_1_verified": fast_p(records, expected, 1.0, verified=True),
        "geomean_speedup": geomean(speeds),
        "mean_reward": (sum(r.get("total_reward", 0.0) for r in records) / len(records)) if records else None,
    }


def summarize(records: Iterable[dict[str, Any]], tasks: Sequence[dict[str, Any]] | None = None,
              samples: int = 1) -> dict[str, Any]:
    """Numbers of the report. `tasks` ({id, level, category}) is the task set (default: the records')."""
    records = list(records)
    if tasks is None:
        seen: dict[str, dict[str, Any]] = {}
        for r in records:
            seen.setdefault(r["task_id"],
                            {"id": r["task_id"], "level": r.get("level"), "category": r.get("category")})
        tasks = list(seen.values())
        samples = max([samples] + [int(r.get("sample", 0)) + 1 for r in records])
    by_id = {t["id"]: t for t in tasks}
    kept = [r for r in records if r["task_id"] in by_id and int(r.get("sample", 0)) < samples]

    def section(key: str) -> dict[str, Any]:
        groups: dict[Any, list[dict[str, Any]]] = {}
        for t in tasks:
            groups.setdefault(t.get(key), [])
        for r in kept:
            groups[by_id[r["task_id"]].get(key)].append(r)
        counts = Counter(t.get(key) for t in tasks)
        return {str(g): group_stats(rs, counts[g], samples)
                for g, rs in sorted(groups.items(), key=lambda kv: str(kv[0]))}

    turns = [t for r in kept for t in r.get("turns", [])]
    verdicts = Counter(t.get("verdict", "?") for t in turns)
    cheats = [t for t in turns if (t.get("meta") or {}).get("cheat")]
    escaped = [{"task_id": r["task_id"], "cheat": t["meta"]["cheat"], "verdict": t["verdict"]}
               for r in kept for t in r.get("turns", [])
               if (t.get("meta") or {}).get("cheat") and t.get("verdict") == "ok"]
    # Replayed honest solutions (a replay file that is not a labelled cheat) that the judge did not accept:
    # for the bundled examples these are the judge's false positives (or examples that went stale).
    honest_rejected = [{"task_id": r["task_id"], "verdict": t.get("verdict"),
                        "reason": (t.get("reasons") or [""])[0]}
                       for r in kept for t in r.get("turns", [])
                       if (t.get("meta") or {}).get("replay") and not t["meta"].get("cheat")
                       and t.get("verdict") not in ("ok", INFRASTRUCTURE_ERROR)]
    return {
        "per_task": per_task_rows(kept),
        "overall": group_stats(kept, len(tasks), samples),
        "honest_replays_rejected": honest_rejected,
        "by_level": section("level"),
        "by_category": section("category"),
        "verdicts": dict(verdicts.most_common()),
        "hacks_caught": verdicts.get("hack", 0),
        # timings on cores other processes held: their speedups are not verified (the machine was busy)
        "contended": sum(any(str(x).startswith("contended:") for x in t.get("reasons") or []) for t in turns),
        "labelled_cheats": {"submitted": len(cheats), "rejected": len(cheats) - len(escaped),
                            "accepted": escaped},
        "turns": len(turns),
        "samples": samples,
        "speedups": sorted(s for r in kept if r.get("correct") and (s := _speedup(r)) is not None),
        "not_judged": sorted(f"{r['task_id']}#{int(r.get('sample', 0))}" for r in kept
                             if not episode_judged(r)),
        "missing": sorted({f"{t['id']}#{s}" for t in tasks for s in range(samples)}
                          - {f"{r['task_id']}#{int(r.get('sample', 0))}" for r in kept}),
    }


# How far a turn got, for "best verdict" (the judge's verdicts from furthest to least far, then the rest).
VERDICT_RANK = ("ok", "incorrect", "runtime_error", "timeout", "crash", "hack", "compile_error", "no_code",
                "infrastructure_error", "done")


def _best_verdict(turns: list[dict[str, Any]]) -> str:
    verdicts = [str(t.get("verdict", "?")) for t in turns]
    ranked = [v for v in VERDICT_RANK if v in verdicts]
    return ranked[0] if ranked else (verdicts[0] if verdicts else "-")


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def per_task_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per episode: best verdict and speedup, turns, tokens and generation seconds per reply."""
    rows = []
    for r in sorted(records, key=lambda r: (r["task_id"], int(r.get("sample", 0)))):
        turns = r.get("turns", [])
        tokens = [float(t["meta"]["completion_tokens"]) for t in turns
                  if isinstance((t.get("meta") or {}).get("completion_tokens"), int | float)]
        # A turn's wall time is the reply's generation plus its evaluation.
        generation = [max(0.0, float(t.get("wall_s", 0.0)) - float(t.get("eval_s", 0.0))) for t in turns]
        rows.append({"task_id": r["task_id"], "sample": int(r.get("sample", 0)),
                     "best_verdict": _best_verdict(turns),
                     "speedup": _speedup(r) if r.get("correct") else None,
                     "verified": r.get("verified_speedup") is not None, "turns": len(turns),
                     "tokens_per_reply": _mean(tokens), "generation_s_per_reply": _mean(generation),
                     "eval_s_per_turn": _mean([float(t.get("eval_s", 0.0)) for t in turns])})
    return rows


# rendering --------------------------------------------------------------------------------------------------

def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _gm(x: float | None) -> str:
    return f"{x:.3f}x" if x is not None else "-"


HEADER = ["group", "tasks", "episodes", "correct", "fast_0", "fast_1.0", "fast_1.5", "fast_2.0",
          "fast_1 verified", "geomean speedup"]


def _row(name: str, s: dict[str, Any]) -> list[str]:
    f = s["fast_p"]
    return [name, str(s["tasks"]), f"{s['finished']}/{s['expected']}", str(s["correct"]), _pct(f["0"]),
            _pct(f["1"]), _pct(f["1.5"]), _pct(f["2"]), _pct(s["fast_1_verified"]), _gm(s["geomean_speedup"])]


def table_rows(summary: dict[str, Any]) -> list[list[str]]:
    rows = [_row("all", summary["overall"])]
    rows += [_row(f"level {k}", v) for k, v in summary["by_level"].items()]
    return rows


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def render_markdown(summary: dict[str, Any], *, title: str = "kernelgym bench",
                    meta: dict[str, Any] | None = None,
                    plot: str | None = None, notes: Sequence[str] = ()) -> str:
    out = [f"# {title}", ""]
    if meta:
        if meta.get("command"):
            out += ["Command:", "", "```bash", meta["command"], "```", ""]
        if meta.get("env_ids"):
            out += [f"Registered environment id(s): {', '.join(f'`{i}`' for i in meta['env_ids'])}", ""]
        out += [f"- {k}: `{v}`" for k, v in meta.items() if k not in ("command", "env_ids", "warnings")]
        out += [""] + [f"> **Warning:** {w}" for w in meta.get("warnings", [])]
        out += [""] if meta.get("warnings") else []
    out += ["## Summary", "", _md_table(HEADER, table_rows(summary)), ""]
    out += [("fast_p: share of all (task, sample) pairs whose best turn is correct with a measured speedup "
             "above p (KernelBench's definition; missing or failed episodes count as not fast). `fast_1 "
             "verified` also needs the judge's confidence interval above 1. Geometric mean over correct "
             "episodes."), ""]
    out += ["## By category", "", _md_table(HEADER, [_row(k, v) for k, v in summary["by_category"].items()]),
            ""]
    judged = [[k, str(v)] for k, v in summary["verdicts"].items() if k not in NOT_JUDGED]
    unjudged = [f"{k}: {summary['verdicts'][k]}" for k in NOT_JUDGED if summary["verdicts"].get(k)]
    out += ["## Verdicts (every judged turn)", "", _md_table(["verdict", "turns"], judged or [["-", "0"]]),
            ""]
    if unjudged:
        out.append(f"Turns without a verdict of the judge ({', '.join(unjudged)}): `no_code` is a reply "
                   "without a solution module (never evaluated, but the agent's failed turn: charged, "
                   "`info[\"judged\"]` True), `done` a reply that ended the episode, `infrastructure_error` "
                   "a turn the judge itself failed (not judged: given back, `info[\"judged\"]` False).")
    out.append(f"Hacks caught (turns judged `hack`): **{summary['hacks_caught']}**.")
    if summary.get("contended"):
        out.append(f"Timings marked contended (other processes held the timing's cores; not verified): "
                   f"{summary['contended']}.")
    lc = summary["labelled_cheats"]
    if lc["submitted"]:
        out.append(f"Labelled cheats submitted: {lc['submitted']}, rejected: **{lc['rejected']}**"
                   + (f", ACCEPTED: {lc['accepted']}" if lc["accepted"] else "") + ".")
    for item in summary.get("honest_replays_rejected", []):
        out.append(f"Honest replayed solution not accepted: {item['task_id']} ({item['verdict']}: "
                   f"{item['reason'][:160]}).")
    out.append("")
    if summary["missing"]:
        shown = ", ".join(summary["missing"][:20]) + (" ..." if len(summary["missing"]) > 20 else "")
        out += [f"Missing episodes ({len(summary['missing'])}, counted as not fast): {shown}", ""]
    if summary.get("not_judged"):
        shown = ", ".join(summary["not_judged"][:20]) + (" ..." if len(summary["not_judged"]) > 20 else "")
        out += [(f"Episodes not judged ({len(summary['not_judged'])}: the judge failed, left out of fast_p; "
                 f"run the bench again to judge them): {shown}"), ""]
    if summary.get("per_task"):
        out += ["## Per task", "", _md_table(TASK_HEADER, [_task_row(r) for r in summary["per_task"]]), "",
                ("Best verdict: how far the episode's furthest turn got (ok, then incorrect, runtime_error, "
                 "...). Tokens: completion tokens per reply, where the policy reports them. Generation: "
                 "seconds per reply spent in the policy; eval: seconds per turn spent judging."), ""]
    if plot:
        out += ["## Speedup distribution", "", f"![speedups]({plot})", ""]
    if notes:
        out += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(out)


TASK_HEADER = ["task", "sample", "best verdict", "speedup", "turns", "tokens / reply", "generation s / reply",
               "eval s / turn"]


def _num(x: float | None, fmt: str) -> str:
    return format(x, fmt) if x is not None else "-"


def _task_row(r: dict[str, Any]) -> list[str]:
    speed = f"{r['speedup']:.2f}x" + (" verified" if r["verified"] else "") if r["speedup"] else "-"
    return [r["task_id"], str(r["sample"]), r["best_verdict"], speed, str(r["turns"]),
            _num(r["tokens_per_reply"], ".0f"),
            _num(r["generation_s_per_reply"], ".1f"), _num(r["eval_s_per_turn"], ".1f")]


SHORT_HEADER = ["", "done", "correct", "fast_0", "fast_1", "fast_1.5", "fast_2", "fast_1 ver", "geomean"]


def print_table(summary: dict[str, Any], console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    from rich import box

    table = Table(title="kernelgym bench", box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1),
                  collapse_padding=True)
    for h in SHORT_HEADER:
        table.add_column(h, no_wrap=True, min_width=len(h), justify="left" if not h else "right")
    for row in table_rows(summary):
        table.add_row(row[0].replace("level ", "L"), *[c.replace(".0%", "%") for c in row[2:]])
    console.print(table)
    v = ", ".join(f"{k} {n}" for k, n in summary["verdicts"].items() if k not in NOT_JUDGED)
    skipped = ", ".join(f"{k} {summary['verdicts'][k]}" for k in NOT_JUDGED if summary["verdicts"].get(k))
    v += f" (no verdict of the judge: {skipped})" if skipped else ""
    lc = summary["labelled_cheats"]
    cheats = f"; labelled cheats rejected {lc['rejected']}/{lc['submitted']}" if lc["submitted"] else ""
    busy = (f"; timings marked contended (machine busy, not verified): {summary['contended']}"
            if summary.get("contended") else "")
    console.print(f"verdicts: {v or '-'}; hacks caught: {summary['hacks_caught']}{cheats}{busy}")
    for item in summary.get("honest_replays_rejected", []):
        console.print(f"honest replay not accepted: {item['task_id']} ({item['verdict']}: "
                      f"{item['reason'][:100]})")


def plot_speedups(speedups: Sequence[float], path: str | Path,
                  title: str = "speedup of correct solutions") -> str | None:
    """A histogram of log2 speedups (PNG). Returns a note instead of raising when it cannot be drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no speedup plot: matplotlib is not installed (pip install matplotlib)"
    fig, ax = plt.subplots(figsize=(6, 3.5), dpi=110)
    if speedups:
        logs = [math.log2(s) for s in speedups]
        lo, hi = math.floor(min(logs + [-1.0]) * 2) / 2, math.ceil(max(logs + [1.0]) * 2) / 2
        bins = [lo + 0.25 * i for i in range(int((hi - lo) / 0.25) + 1)]
        ax.hist(logs, bins=bins if len(bins) > 1 else 10, color="#4477aa", edgecolor="white")
        for p, style in ((1.0, "-"), (1.5, "--"), (2.0, ":")):
            ax.axvline(math.log2(p), color="#cc3311", linestyle=style, linewidth=1, label=f"{p:g}x")
        ticks = [t for t in range(math.floor(lo), math.ceil(hi) + 1)]
        ax.set_xticks(ticks, [f"{2.0 ** t:g}x" for t in ticks])
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no correct solution with a speedup", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlabel("speedup over the reference (log scale)")
    ax.set_ylabel("episodes")
    ax.set_title(f"{title} (n={len(speedups)})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


def write_tensorboard(summary: dict[str, Any], logdir: str | Path, step: int | None = None) -> str | None:
    """Scalars (fast_p, geomean, per level) and a speedup histogram; a note if tensorboard is missing."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # torch raises this when the tensorboard package is not installed
        return "no TensorBoard scalars: tensorboard is not installed (pip install tensorboard)"
    step = summary["overall"]["finished"] if step is None else step
    writer = SummaryWriter(str(logdir))
    try:
        groups = {"all": summary["overall"], **{f"level{k}": v for k, v in summary["by_level"].items()}}
        for name, s in groups.items():
            for p, value in s["fast_p"].items():
                writer.add_scalar(f"{name}/fast_{p}", value, step)
            writer.add_scalar(f"{name}/fast_1_verified", s["fast_1_verified"], step)
            if s["geomean_speedup"] is not None:
                writer.add_scalar(f"{name}/geomean_speedup", s["geomean_speedup"], step)
        writer.add_scalar("all/hacks_caught", summary["hacks_caught"], step)
        if summary["speedups"]:
            import numpy as np

            writer.add_histogram("speedup_log2", np.log2(np.array(summary["speedups"])), step)
    finally:
        writer.close()
    return None


def write_report(summary: dict[str, Any], out_dir: str | Path, *, meta: dict[str, Any] | None = None,
                 tensorboard: bool = True) -> dict[str, Any]:
    """report.md, speedups.png and tensorboard/ in `out_dir`; returns {paths..., notes}."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    plot_note = plot_speedups(summary["speedups"], out / "speedups.png")
    if plot_note:
        notes.append(plot_note)
    tb_note = "TensorBoard output turned off"
    if tensorboard:
        tb_note = write_tensorboard(summary, out / "tensorboard")
    if tb_note:
        notes.append(tb_note)
    else:
        notes.append(f"TensorBoard scalars: tensorboard --logdir {out / 'tensorboard'}")
    text = render_markdown(summary, meta=meta, plot=None if plot_note else "speedups.png", notes=notes)
    from kernelgym.agents.baselines.search import report_section

    text += report_section(out)  # search baselines (evolve, map_elites): their graphs and curves
    (out / "report.md").write_text(text)
    return {"report": str(out / "report.md"), "plot": None if plot_note else str(out / "speedups.png"),
            "tensorboard": None if tb_note else str(out / "tensorboard"), "notes": notes}
