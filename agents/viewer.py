"""`kernelgym view RUN_DIR`: one static HTML page for a bench run (open it from disk; no server, no network).

It reads what the bench wrote (run.json, results.jsonl, trajectories.jsonl, speedups.png) and shows the
run's command and environment ids, the fast_p summary, verdict counts, the plots, and per task: the best
kernel, each turn's verdict, speedup and judge feedback, the diff from the turn before, and a speedup history.
Everything (styles, the plot as a data URI, the history as inline SVG) is inside the one file.
"""

from __future__ import annotations

import base64
import difflib
import html
import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

VERDICT_COLORS = {
    "ok": "#2e7d32",
    "incorrect": "#ef6c00",
    "runtime_error": "#ad1457",
    "timeout": "#455a64",
    "crash": "#37474f",
    "hack": "#c62828",
    "compile_error": "#6a1b9a",
    "no_code": "#9e9e9e",
    "done": "#607d8b",
    "infrastructure_error": "#795548",
}
STYLE = """
body{font:14px/1.45 system-ui,sans-serif;
  margin:0 auto;max-width:1200px;padding:16px 24px;color:#222;background:#fff}
h1{font-size:24px;margin:8px 0}
h2{font-size:19px;border-bottom:1px solid #ddd;
  padding-bottom:4px;margin-top:28px}
h4{margin:14px 0 6px}
table{border-collapse:collapse;margin:8px 0}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f4f4f4}
td:first-child,th:first-child{text-align:left}
pre{background:#f7f7f7;border:1px solid #e2e2e2;padding:8px;overflow:auto;max-height:480px;font-size:12px}
.cmd{background:#102030;color:#e8f0f8}
.badge{display:inline-block;color:#fff;border-radius:4px;padding:1px 8px;font-weight:600}
.bars div{height:22px;
  color:#fff;padding-left:6px;margin:3px 0;white-space:nowrap;font-weight:600;min-width:110px}
.diff .add{background:#e6ffec;color:#116329}
.diff .del{background:#ffebe9;color:#82071e}
.diff .hunk{color:#0550ae}
details.task{border:1px solid #ddd;border-radius:6px;margin:10px 0;padding:6px 12px}
details.task>summary{font-size:15px;cursor:pointer}
.turn{border-left:4px solid #ddd;padding:2px 10px;margin:10px 0}
.muted{color:#666}
"""


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a torn last line of an interrupted run
    return rows


def load_run(run_dir: str | Path) -> dict[str, Any]:
    """What the bench wrote: run info, finished episodes, and each episode's turns (by episode id)."""
    root = Path(run_dir)
    if not (root / "results.jsonl").is_file() and not (root / "trajectories.jsonl").is_file():
        from kernelgym.errors import KernelGymError

        raise KernelGymError(f"{root} is not a bench run folder (no results.jsonl or trajectories.jsonl)")
    info = json.loads((root / "run.json").read_text()) if (root / "run.json").is_file() else {}
    turns: dict[str, list[dict[str, Any]]] = {}
    for turn in _read_jsonl(root / "trajectories.jsonl"):
        turns.setdefault(str(turn.get("episode_id")), []).append(turn)
    for episode in turns.values():
        episode.sort(key=lambda t: t.get("turn", 0))
    records = {
        r.get("key", f"{r['task_id']}#{r.get('sample', 0)}"): r for r in _read_jsonl(root / "results.jsonl")
    }
    return {"root": root, "info": info, "records": list(records.values()), "turns": turns}


def _episode_turns(run: dict[str, Any], record: dict[str, Any]) -> list[dict[str, Any]]:
    """The trajectory of a finished episode; without an episode id, the task's last logged episode."""
    if record.get("episode_id") in run["turns"]:
        return run["turns"][record["episode_id"]]
    same_task = [t for t in run["turns"].values() if t and t[0].get("task_id") == record["task_id"]]
    return same_task[-1] if same_task else []


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _badge(verdict: str) -> str:
    return (
        f'<span class="badge" style="background:{VERDICT_COLORS.get(verdict, "#777")}">{_esc(verdict)}</span>'
    )


def _speed(value: Any) -> str:
    return f"{value:.2f}x" if isinstance(value, int | float) and math.isfinite(value) and value > 0 else "-"


def _diff(before: str | None, after: str | None) -> str:
    lines = difflib.unified_diff(
        (before or "").splitlines(),
        (after or "").splitlines(),
        "previous turn",
        "this turn",
        lineterm="",
        n=2,
    )
    out = []
    for line in lines:
        kind = (
            "hunk"
            if line.startswith("@@")
            else "add"
            if line.startswith("+")
            else "del"
            if line.startswith("-")
            else ""
        )
        out.append(f'<span class="{kind}">{_esc(line)}</span>' if kind else _esc(line))
    return "\n".join(out) or "(no change)"


def speedup_svg(turns: list[dict[str, Any]], width: int = 360, height: int = 90) -> str:
    """Bars of each turn's measured speedup (log scale, 1x line), coloured by the turn's verdict."""
    speeds = [_turn_speedup(t) for t in turns]
    # A symmetric log axis: 1x in the middle, the farthest speedup (at least 2x or 1/2x) near an edge.
    reach = max([1.0] + [abs(math.log2(s)) for s in speeds if s]) * 1.15
    span = height - 24
    bar_w = max(6, min(40, (width - 20) // max(1, len(turns)) - 4))
    one_y = height - 14 - span / 2
    parts = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
            f'aria-label="speedup per turn"><rect width="100%" height="100%" fill="#fafafa"/>'
        )
    ]
    for i, (turn, speed) in enumerate(zip(turns, speeds)):
        x = 10 + i * (bar_w + 4)
        h = span * (math.log2(speed) + reach) / (2 * reach) if speed else 3
        color = VERDICT_COLORS.get(str(turn.get("verdict")), "#777")
        parts.append(
            f'<rect x="{x}" y="{height - 14 - h:.1f}" width="{bar_w}" height="{max(h, 3):.1f}" '
            f'fill="{color}">'
            f"<title>turn {turn.get('turn')}: {_esc(turn.get('verdict'))} {_speed(speed)}</title></rect>"
        )
        parts.append(
            f'<text x="{x + bar_w / 2}" y="{height - 2}" font-size="10" text-anchor="middle">'
            f'{turn.get("turn")}</text>'
        )
    parts.append(
        f'<line x1="4" x2="{width - 4}" y1="{one_y:.1f}" y2="{one_y:.1f}" stroke="#333" '
        f'stroke-dasharray="4 3"/>'
        f'<text x="{width - 6}" y="{one_y - 3:.1f}" font-size="10" text-anchor="end">1x</text></svg>'
    )
    return "".join(parts)


def _turn_speedup(turn: dict[str, Any]) -> float | None:
    result = turn.get("result") or {}
    value = result.get("speedup") if result.get("correct") else None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) and value > 0 else None


def _best_turn(turns: list[dict[str, Any]]) -> dict[str, Any] | None:
    correct = [t for t in turns if (t.get("result") or {}).get("correct")]
    if not correct:
        return None
    return max(
        correct,
        key=lambda t: (
            bool(((t.get("result") or {}).get("timing") or {}).get("verified")),
            _turn_speedup(t) or 0.0,
        ),
    )


def _slug(text: str) -> str:
    return "task-" + re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


def _header(run: dict[str, Any]) -> str:
    info = run["info"]
    out = [f"<h1>kernelgym bench run <span class=muted>{_esc(run['root'].name)}</span></h1>"]
    if info.get("command"):
        out.append(f'<pre class="cmd">{_esc(info["command"])}</pre>')
    facts = [
        ("environment ids", ", ".join(info.get("env_ids") or []) or info.get("env")),
        ("policy", info.get("policy_name") or info.get("policy")),
        ("baseline", info.get("baseline")),
        ("backend", info.get("backend")),
        ("size", info.get("size")),
        ("turns", info.get("turns")),
        ("samples", info.get("samples")),
    ]
    out.append(
        "<p>"
        + " &middot; ".join(f"<b>{_esc(k)}</b>: {_esc(v)}" for k, v in facts if v not in (None, ""))
        + "</p>"
    )
    return "\n".join(out)


def _summary(summary: dict[str, Any]) -> str:
    from kernelgym.agents.report import HEADER, table_rows

    head = "".join(f"<th>{_esc(h)}</th>" for h in HEADER)
    body = "".join(
        "<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in table_rows(summary)
    )
    return f'<h2 id="summary">Summary</h2><table><tr>{head}</tr>{body}</table>'


def _verdicts(verdicts: Counter) -> str:
    most = max(verdicts.values(), default=1)
    bars = "".join(
        f'<div style="width:{max(12, 100 * n / most):.0f}%;background:{VERDICT_COLORS.get(v, "#777")}">'
        f"{_esc(v)}: {n}</div>"
        for v, n in verdicts.most_common()
    )
    return f'<h2 id="verdicts">Verdicts (every turn)</h2><div class="bars">{bars or "no turns"}</div>'


def _plots(run: dict[str, Any], histories: list[tuple[str, list[dict[str, Any]]]]) -> str:
    out = ['<h2 id="plots">Plots</h2>']
    png = run["root"] / "speedups.png"
    if png.is_file():
        data = base64.b64encode(png.read_bytes()).decode()
        out.append(
            f'<img alt="speedup histogram" src="data:image/png;base64,{data}" style="max-width:640px">'
        )
    else:
        out.append(
            "<p class=muted>No speedup histogram in this run (speedups.png is written by the bench).</p>"
        )
    out.append("<h4>Speedup history per task (bars: turns; colour: verdict; dashed: 1x)</h4><div>")
    out += [
        f'<figure style="display:inline-block;margin:4px 12px 4px 0"><a href="#{_slug(task)}">'
        f"{speedup_svg(turns, 240, 70)}</a><figcaption>{_esc(task)}</figcaption></figure>"
        for task, turns in histories
        if turns
    ]
    return "\n".join(out) + "</div>"


def _turn_html(turn: dict[str, Any], previous: dict[str, Any] | None) -> str:
    verdict = str(turn.get("verdict"))
    result = turn.get("result") or {}
    head = (
        f'<div class="turn" style="border-color:{VERDICT_COLORS.get(verdict, "#777")}">'
        f"<b>turn {turn.get('turn')}</b> {_badge(verdict)} speedup {_speed(_turn_speedup(turn))} "
        f"&middot; reward {turn.get('reward', 0):.3f}"
    )
    reasons = "".join(f"<li>{_esc(r)}</li>" for r in result.get("reasons", [])[:4])
    parts = [head, f"<ul>{reasons}</ul>" if reasons else ""]
    if turn.get("solution") is not None and previous is None:
        parts.append(
            f'<details><summary>solution</summary><pre class="code">{_esc(turn["solution"])}</pre></details>'
        )
    elif turn.get("solution") is not None:
        parts.append(
            f'<details><summary>diff from the turn before</summary><pre class="diff">'
            f"{_diff(previous.get('solution'), turn.get('solution'))}</pre></details>"
        )
    parts.append(
        f"<details><summary>judge feedback</summary><pre>{_esc(turn.get('feedback', ''))}</pre></details>"
    )
    return "".join(parts) + "</div>"


def _task_html(record: dict[str, Any], turns: list[dict[str, Any]], is_open: bool) -> str:
    from kernelgym.agents.report import per_task_rows

    row = per_task_rows([record])[0]
    best = _best_turn(turns)
    title = (
        f"{_esc(record['task_id'])} <span class=muted>sample {row['sample']}</span> "
        f"{_badge(row['best_verdict'])} "
        f"best {_speed(row['speedup'])}{' verified' if row['verified'] else ''} &middot; {row['turns']} turns"
    )
    out = [
        (f'<details class="task" id="{_slug(record["task_id"])}"{" open" if is_open else ""}>'
         f"<summary>{title}</summary>"),
        "<h4>Speedup history</h4>",
        speedup_svg(turns),
    ]
    if best is not None:
        out.append(
            f"<h4>Best kernel (turn {best.get('turn')}, {_speed(_turn_speedup(best))})</h4>"
            f'<pre class="code">{_esc(best.get("solution") or "")}</pre>'
        )
    else:
        out.append("<h4>Best kernel</h4><p class=muted>No correct solution in this episode.</p>")
    out.append("<h4>Turns</h4>")
    out += [_turn_html(t, turns[i - 1] if i else None) for i, t in enumerate(turns)]
    return "\n".join(out) + "</details>"


def render_html(run: dict[str, Any]) -> str:
    from kernelgym.agents.report import summarize

    records = sorted(run["records"], key=lambda r: (r["task_id"], int(r.get("sample", 0))))
    tasks = run["info"].get("tasks_selected")
    summary = summarize(records, tasks, int(run["info"].get("samples") or 1)) if tasks else summarize(records)
    episodes = [(r, _episode_turns(run, r)) for r in records]
    verdicts = Counter(str(t.get("verdict")) for _, turns in episodes for t in turns)
    index = "".join(
        f'<li><a href="#{_slug(r["task_id"])}">{_esc(r["task_id"])}</a> {_badge(per_verdict)}</li>'
        for r, per_verdict in ((r, _best_verdict_of(r)) for r, _ in episodes)
    )
    body = [
        _header(run),
        _summary(summary),
        _verdicts(verdicts),
        _plots(run, [(r["task_id"], turns) for r, turns in episodes]),
        f'<h2 id="tasks">Tasks ({len(episodes)})</h2><ul>{index}</ul>',
    ]
    body += [_task_html(r, turns, i == 0) for i, (r, turns) in enumerate(episodes)]
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<title>kernelgym run {_esc(run["root"].name)}'
        f"</title><style>{STYLE}</style></head><body>" + "\n".join(body) + "</body></html>\n"
    )


def _best_verdict_of(record: dict[str, Any]) -> str:
    from kernelgym.agents.report import per_task_rows

    return per_task_rows([record])[0]["best_verdict"]


def write_view(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the run's page (default RUN_DIR/view.html) and return its path."""
    run = load_run(run_dir)
    path = Path(out) if out else run["root"] / "view.html"
    path.write_text(render_html(run), encoding="utf-8")
    return path
