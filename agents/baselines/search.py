"""What the search baselines (evolve, map_elites) share: the graph of judged candidates, the judge-call
budget, deduplication, the checkpoint that makes a search resumable, and its drawing.

Every candidate is a node: its source, its parent, the operator that made it, the judge's verdict and
speedup, and its fitness = the verified speedup (0 when not correct or not verified). A candidate whose
normalised source is already in the graph is not judged again. Only judged candidates spend the budget
(a reply without code, or a duplicate, does not); `max_proposals` bounds the replies asked for.

The state is written (atomically) after every judge call to `<state_dir>/<baseline>/<task>__<sample>.json`;
by default `state_dir` is the `search/` folder next to the environment's trajectory log, i.e. inside the
bench's --out folder. A rerun of the same bench finds the file and continues the search where it stopped
(the judge calls already made are kept and not made again); a finished search is returned as it is.
The same file is the search graph of the task; `draw_graph` renders it to a PNG beside it.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.agents.baselines import templates
from kernelgym.agents.baselines.common import EpisodeRecord, TurnRecord, max_turns, step


@dataclass
class Node:
    id: int
    parent: int | None
    operator: str  # "seed", "rewrite", "tune", ...
    source_hash: str
    source: str
    verdict: str = ""
    correct: bool = False
    speedup: float | None = None  # measured, correct only
    verified: bool = False
    call: int | None = None  # the judge call (1-based) that judged it; None: never judged
    descriptor: dict[str, Any] = field(default_factory=dict)  # behaviour read from the judge's result
    feedback: str = ""
    visits: int = 0  # replies asked for with this node as the parent
    extra: dict[str, Any] = field(default_factory=dict)  # the operator's notes (prompt id, parameters, ...)

    @property
    def fitness(self) -> float:
        """The verified speedup; 0 for a failed, slower or unverified candidate."""
        return float(self.speedup) if self.correct and self.verified and self.speedup else 0.0

    @property
    def rank(self) -> tuple[float, float]:
        """Order for choosing: fitness first, then the measured speedup of a correct candidate (a tie-break
        that keeps a search moving on a noisy machine where little verifies)."""
        return self.fitness, float(self.speedup or 0.0) if self.correct else 0.0

    @property
    def score(self) -> float:
        """One number for optimizers: the fitness, else a tenth of the measured speedup of a correct
        candidate (always below any verified one, which is above 1)."""
        return self.fitness or 0.1 * self.rank[1]


@dataclass
class SearchState:
    baseline: str
    task_id: str
    sample: int
    budget: int = 0
    calls: int = 0  # judge calls made
    proposals: int = 0  # replies asked for (judged, duplicates, and replies without code)
    nodes: list[Node] = field(default_factory=list)
    turns: list[dict[str, Any]] = field(default_factory=list)  # TurnRecord dicts, one per judge call
    curve: list[dict[str, Any]] = field(default_factory=list)  # after each call: best verified and measured
    extra: dict[str, Any] = field(default_factory=dict)  # the baseline's own state (archive, prompts, study)
    finished: bool = False
    stop_reason: str = ""
    wall_s: float = 0.0
    level: int | None = None
    category: str | None = None

    def best(self) -> Node | None:
        judged = [n for n in self.nodes if n.correct]
        return max(judged, key=lambda n: n.rank) if judged else None

    def by_hash(self, digest: str) -> Node | None:
        return next((n for n in self.nodes if n.source_hash == digest), None)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for node, out in zip(self.nodes, data["nodes"]):
            out["fitness"] = node.fitness
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchState:
        names = set(Node.__dataclass_fields__)
        nodes = [Node(**{k: v for k, v in n.items() if k in names}) for n in data.get("nodes", [])]
        fields_ = set(cls.__dataclass_fields__) - {"nodes"}
        return cls(nodes=nodes, **{k: v for k, v in data.items() if k in fields_})


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", text).strip("_") or "task"


def state_path(env, state_dir: str | None, baseline: str, task_id: str, sample: int) -> Path | None:
    """Where a task's search is kept; None when neither `state_dir` nor a trajectory log gives a folder."""
    if state_dir is None:
        log = getattr(env.unwrapped.config, "trajectory_path", None)
        if not log:
            return None
        state_dir = str(Path(log).parent / "search")
    return Path(state_dir) / baseline / f"{_slug(task_id)}__{sample}.json"


def save_state(state: SearchState, path: Path | None) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(state.to_dict(), indent=1, default=str))
    os.replace(tmp, path)  # a kill mid-write leaves the previous state whole


def load_state(path: Path | None) -> SearchState | None:
    if path is None or not path.exists():
        return None
    try:
        return SearchState.from_dict(json.loads(path.read_text()))
    except (json.JSONDecodeError, TypeError, KeyError):
        return None  # unreadable: the search starts again (the file is replaced at the first call)


def descriptor(result: dict[str, Any], source: str) -> dict[str, Any]:
    """Behaviour of a judged candidate: memory- or compute-bound, the roofline fraction (binned), the
    number of its own kernel launches per forward, and the largest block/tile constant it sets."""
    timing = result.get("timing") or {}
    profile = result.get("profile") or {}
    fraction = timing.get("roofline_fraction")
    tiles = [
        int(p.value)
        for p in templates.find_params(source)
        if p.kind in ("constant", "launch")
        and p.value.isdigit()
        and not p.name.startswith(("num_warps", "num_stages"))
    ]
    return {
        "bound": timing.get("bound") or "unknown",
        "roofline_bin": None if fraction is None else min(4, int(max(0.0, float(fraction)) * 4)),
        "kernels": profile.get("own_kernel_calls"),
        "tile_log2": int(math.log2(max(tiles))) if tiles else None,
    }


def rewrite_prompt(statement: str, parent: Node, guidance: str, limit: int) -> str:
    """The universal operator's prompt: the task, a parent, the judge's report on it, and guidance
    (retrieved skills, evolved instructions)."""
    status = (
        f"verified speedup {parent.fitness:.3g}x"
        if parent.fitness
        else f"correct, speedup {parent.speedup or 0:.3g}x (not verified)"
        if parent.correct
        else f"rejected ({parent.verdict})"
    )
    parts = [
        statement,
        f"A candidate solution ({status}):\n```python\n{parent.source.strip()[:limit]}\n```",
        f"The judge's report on it:\n{parent.feedback.strip()}",
    ]
    if guidance:
        parts.append(guidance)
    parts.append(
        "Write an improved version: fix what the judge rejected, else make it faster. Answer with "
        "the whole module in one ```python block."
    )
    return "\n\n".join(parts)


class Search:
    """One task's search: judges candidates through the environment, within the budget, with a checkpoint."""

    def __init__(
        self,
        env,
        baseline: str,
        task_id: str,
        sample: int,
        *,
        budget: int | None,
        state_dir: str | None,
        max_proposals_factor: float = 4.0,
        patience: int | None = None,
    ):
        self.env = env
        self.path = state_path(env, state_dir, baseline, task_id, sample)
        self.state = load_state(self.path) or SearchState(baseline, task_id, sample)
        limit = max_turns(env)
        self.state.budget = min(budget or limit, limit)
        self.max_proposals = math.ceil(self.state.budget * max_proposals_factor)
        self.patience = patience
        self.started = time.monotonic()
        self.wall_before = self.state.wall_s
        self.done_reply = False

    @classmethod
    def from_config(cls, env, baseline: str, task_id: str, sample: int, config) -> Search:
        """The search a baseline's config asks for (its budget, state_dir, max_proposals_factor, patience)."""
        return cls(env, baseline, task_id, sample, budget=config.budget, state_dir=config.state_dir,
                   max_proposals_factor=config.max_proposals_factor, patience=config.patience)

    def should_stop(self) -> bool:
        s = self.state
        if s.finished:
            return True
        reason = ""
        if s.calls >= s.budget:
            reason = "budget"
        elif s.proposals >= self.max_proposals:
            reason = "proposals"
        elif self.done_reply:
            reason = "done"
        elif self.patience and s.calls > self.patience and self._stalled():
            reason = "plateau"
        if reason:
            s.stop_reason = reason
        return bool(reason)

    def _stalled(self) -> bool:
        curve = self.state.curve
        best_now = curve[-1]["best_rank"] if curve else [0, 0]
        return len(curve) > self.patience and curve[-1 - self.patience]["best_rank"] == best_now

    def judge(
        self, reply: str, parent: Node | None, operator: str, *, started: float | None = None, **extra: Any
    ) -> Node | None:
        """Judge `reply` as a child of `parent` (None: a root). Returns its node (the existing one for a
        duplicate) or None when the reply held no code."""
        from kernelgym.envs.parsing import parse_reply

        s = self.state
        s.proposals += 1
        if parent is not None:
            parent.visits += 1
        parsed = parse_reply(str(reply))
        if parsed.code is None:
            self.done_reply = self.done_reply or parsed.done
            self.checkpoint()  # the reply count survives a restart too
            return None
        digest = templates.source_hash(parsed.code)
        known = s.by_hash(digest)
        if known is not None:
            self.checkpoint()
            return known
        obs, info, over, turn = step(self.env, reply, s.calls, started=started, phase=operator)
        s.calls += 1
        result = info.get("result") or {}
        node = Node(
            id=len(s.nodes),
            parent=None if parent is None else parent.id,
            operator=operator,
            source_hash=digest,
            source=parsed.code,
            verdict=turn.verdict,
            correct=turn.correct,
            speedup=turn.speedup,
            verified=turn.verified,
            call=s.calls,
            descriptor=descriptor(result, parsed.code),
            feedback=str(obs.get("feedback", ""))[:4000],
            extra=extra,
        )
        s.nodes.append(node)
        s.turns.append(asdict(turn))
        best = s.best()
        s.curve.append(
            {
                "call": s.calls,
                "best_verified_speedup": best.fitness if best else 0.0,
                "best_speedup": best.speedup if best and best.correct else None,
                "best_rank": list(best.rank) if best else [0.0, 0.0],
            }
        )
        self.done_reply = self.done_reply or over  # the environment ended it (e.g. a target speedup reached)
        self.checkpoint()
        return node

    def checkpoint(self) -> None:
        self.state.wall_s = round(self.wall_before + time.monotonic() - self.started, 3)
        save_state(self.state, self.path)

    def finish(self, info: dict[str, Any]) -> EpisodeRecord:
        s = self.state
        s.finished = True
        task = info.get("task", {})
        s.level, s.category = task.get("level", s.level), task.get("category", s.category)
        self.checkpoint()
        if self.path is not None:
            draw_graph(s, self.path.with_suffix(".png"))
        names = set(TurnRecord.__dataclass_fields__)
        turns = [TurnRecord(**{k: v for k, v in t.items() if k in names}) for t in s.turns]
        return EpisodeRecord(
            task_id=s.task_id,
            sample=s.sample,
            baseline=s.baseline,
            level=s.level,
            category=s.category,
            turns=turns,
            wall_s=s.wall_s,
        )


def draw_graph(state: SearchState, path: Path) -> str | None:
    """The search graph as a PNG: one dot per judged candidate at (judge call, speedup), an edge from its
    parent, colour by outcome. Returns a note instead of raising when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no graph drawing: matplotlib is not installed"
    judged = {n.id: n for n in state.nodes if n.call is not None}
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for n in judged.values():
        p = judged.get(n.parent) if n.parent is not None else None
        if p is not None:
            ax.plot(
                [p.call, n.call],
                [p.speedup or 0.0, n.speedup or 0.0],
                color="#999999",
                linewidth=0.8,
                zorder=1,
            )
    colours = {"verified": "#228833", "correct": "#4477aa", "failed": "#cc3311"}
    for label, test in (
        ("verified", lambda n: n.fitness > 0),
        ("correct", lambda n: n.correct and n.fitness == 0),
        ("failed", lambda n: not n.correct),
    ):
        group = [n for n in judged.values() if test(n)]
        if group:
            ax.scatter(
                [n.call for n in group],
                [n.speedup or 0.0 for n in group],
                s=36,
                color=colours[label],
                label=label,
                zorder=2,
                edgecolor="white",
            )
    for n in judged.values():
        ax.annotate(
            f"{n.id}:{n.operator}",
            (n.call, n.speedup or 0.0),
            fontsize=6,
            xytext=(3, 3),
            textcoords="offset points",
        )
    ax.axhline(1.0, color="#bbbbbb", linestyle=":", linewidth=1)
    ax.set_xlabel("judge call")
    ax.set_ylabel("measured speedup (0: failed)")
    ax.set_title(
        f"{state.baseline} on {state.task_id}: {len(judged)} judged, stop: {state.stop_reason or '-'}",
        fontsize=9,
    )
    if judged:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


def plot_curves(curves: dict[str, list[tuple[int, float]]], path: Path, title: str) -> str | None:
    """Best verified speedup against judge calls, one step line per label. A note instead when it cannot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no curve plot: matplotlib is not installed"
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for label, points in sorted(curves.items()):
        if points:
            ax.step([0] + [c for c, _ in points], [0.0] + [v for _, v in points], where="post", label=label)
    ax.set_xlabel("judge calls")
    ax.set_ylabel("best verified speedup (0: none yet)")
    ax.set_title(title, fontsize=9)
    if curves:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


def report_section(out_dir: str | Path) -> str:
    """Markdown for a bench report: each task's search (best verified speedup after its judge calls, stop
    reason) with its graph drawing, and one best-vs-calls plot. '' when the run kept no search state."""
    root = Path(out_dir) / "search"
    files = sorted(root.glob("*/*.json")) if root.is_dir() else []
    states = [s for s in (load_state(f) for f in files) if s is not None]
    if not states:
        return ""
    curves = {
        f"{s.task_id}#{s.sample}": [(c["call"], c["best_verified_speedup"]) for c in s.curve] for s in states
    }
    lines = [
        "",
        "## Search",
        "",
        "| task | baseline | judge calls | replies | best verified | best measured | stop |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s, f in zip(states, files):
        best = s.best()
        lines.append(
            f"| {s.task_id}#{s.sample} | {s.baseline} | {s.calls}/{s.budget} | {s.proposals} | "
            f"{best.fitness if best else 0:.3g}x | {(best.speedup or 0) if best else 0:.3g}x | "
            f"{s.stop_reason or '-'} |"
        )
    note = plot_curves(curves, root / "best_vs_calls.png", "best verified speedup against judge calls")
    lines += [
        "",
        "![best verified speedup against judge calls](search/best_vs_calls.png)" if not note else note,
        "",
    ]
    for s, f in zip(states, files):
        png = f.with_suffix(".png")
        if png.exists():
            lines.append(f"![{s.baseline} graph of {s.task_id}]({png.relative_to(Path(out_dir)).as_posix()})")
    lines.append("")
    lines.append("Each graph's nodes, edges and sources: the JSON file beside its PNG.")
    return "\n".join(lines) + "\n"
