"""The report's numbers on a known set of results (no judge involved)."""

from __future__ import annotations

import math

import pytest

from kernelgym.agents.report import fast_p, geomean, render_markdown, summarize, write_report


def _rec(task, level, category, correct, speedup=None, verified=False, verdicts=("ok",), sample=0,
         cheat=None):
    turns = [{"attempt": i, "verdict": v, "reward": 0.0,
              "meta": {"cheat": cheat} if cheat and v != "ok" else {}} for i, v in enumerate(verdicts)]
    return {"task_id": task, "sample": sample, "level": level, "category": category, "correct": correct,
            "speedup": speedup, "verified_speedup": speedup if verified else None, "turns": turns,
            "total_reward": 1.0 if correct else -1.0}


TASKS = [
    {"id": "s/L1/a", "level": 1, "category": "act"},
    {"id": "s/L1/b", "level": 1, "category": "act"},
    {"id": "s/L1/c", "level": 1, "category": "norm"},
    {"id": "s/L2/d", "level": 2, "category": "gemm"},
    {"id": "s/L2/e", "level": 2, "category": "gemm"},  # no episode: counts as not fast
]
RECORDS = [
    _rec("s/L1/a", 1, "act", True, 2.5, verified=True),
    _rec("s/L1/b", 1, "act", True, 0.8, verdicts=("hack", "ok"), cheat="passthrough"),
    _rec("s/L1/c", 1, "norm", False, verdicts=("compile_error", "incorrect")),
    _rec("s/L2/d", 2, "gemm", True, 1.2, verdicts=("no_code", "ok")),
    _rec("s/L9/zzz", 9, "other", True, 9.0),  # not in the task set: ignored
]


def test_fast_p_and_geomean_by_hand():
    s = summarize(RECORDS, TASKS)
    o = s["overall"]
    assert (o["tasks"], o["expected"], o["finished"], o["correct"]) == (5, 5, 4, 3)
    assert o["fast_p"] == {"0": 3 / 5, "1": 2 / 5, "1.5": 1 / 5, "2": 1 / 5}
    assert o["fast_1_verified"] == 1 / 5
    assert o["geomean_speedup"] == pytest.approx((2.5 * 0.8 * 1.2) ** (1 / 3))
    l1, l2 = s["by_level"]["1"], s["by_level"]["2"]
    assert l1["fast_p"]["0"] == pytest.approx(2 / 3) and l1["fast_p"]["1"] == pytest.approx(1 / 3)
    assert l2["tasks"] == 2 and l2["fast_p"]["1"] == 0.5 and l2["geomean_speedup"] == pytest.approx(1.2)
    assert s["by_category"]["gemm"]["finished"] == 1 and s["by_category"]["norm"]["correct"] == 0
    assert s["verdicts"] == {"ok": 3, "hack": 1, "compile_error": 1, "incorrect": 1, "no_code": 1}
    assert s["hacks_caught"] == 1
    assert s["labelled_cheats"] == {"submitted": 1, "rejected": 1, "accepted": []}
    assert s["missing"] == ["s/L2/e#0"]
    assert s["speedups"] == [0.8, 1.2, 2.5]
    assert s["honest_replays_rejected"] == []


def test_samples_and_edge_cases():
    records = [_rec("s/L1/a", 1, "act", True, 1.6, sample=0), _rec("s/L1/a", 1, "act", False, sample=1)]
    s = summarize(records, TASKS[:1], samples=2)
    assert s["overall"]["expected"] == 2 and s["overall"]["fast_p"]["1.5"] == 0.5
    assert summarize(records)["samples"] == 2  # inferred from the records
    assert fast_p([], 0, 1.0) == 0.0
    assert geomean([]) is None and geomean([4.0, 1.0]) == pytest.approx(2.0)
    # A correct episode without timing is correct (fast_0) but never fast.
    untimed = [_rec("s/L1/a", 1, "act", True, None)]
    assert fast_p(untimed, 1, 0.0) == 1.0 and fast_p(untimed, 1, 1.0) == 0.0
    # Strictly faster than p: exactly 1.5x is not fast_1.5.
    assert fast_p([_rec("s/L1/a", 1, "act", True, 1.5)], 1, 1.5) == 0.0
    honest = _rec("s/L1/a", 1, "act", False, verdicts=("hack",))
    honest["turns"][0].update(meta={"replay": "a.py"}, reasons=["untracked_compute: ..."])
    flagged = summarize([honest], TASKS[:1])["honest_replays_rejected"]
    assert flagged == [{"task_id": "s/L1/a", "verdict": "hack", "reason": "untracked_compute: ..."}]
    escaped = summarize([_rec("s/L1/a", 1, "act", True, 3.0, verdicts=("ok",))], TASKS[:1])
    assert escaped["labelled_cheats"]["submitted"] == 0
    nan = summarize([_rec("s/L1/a", 1, "act", True, math.inf)], TASKS[:1])
    assert nan["overall"]["geomean_speedup"] is None


def test_markdown_plot_and_tensorboard(tmp_path):
    s = summarize(RECORDS, TASKS)
    text = render_markdown(s, meta={"command": "kernelgym bench --policy x", "policy": "x"})
    assert "| all | 5 | 4/5 | 3 | 60.0% | 40.0% | 20.0% | 20.0% | 20.0% |" in text
    assert "Hacks caught (turns judged `hack`): **1**" in text and "s/L2/e#0" in text
    assert "no_code: 1" in text
    files = write_report(s, tmp_path)
    assert (tmp_path / "report.md").read_text().startswith("# kernelgym bench")
    assert files["plot"] and (tmp_path / "speedups.png").read_bytes()[:4] == b"\x89PNG"
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        assert files["tensorboard"] is None and any("tensorboard is not installed" in n
                                                    for n in files["notes"])
    else:
        events = list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
        assert events and events[0].stat().st_size > 0


def test_tensorboard_missing_is_a_note(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("torch.utils.tensorboard"):
            raise ImportError("TensorBoard logging requires TensorBoard")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    files = write_report(summarize(RECORDS, TASKS), tmp_path)
    assert files["tensorboard"] is None
    assert "tensorboard is not installed" in (tmp_path / "report.md").read_text()


def test_an_episode_the_judge_failed_is_not_judged_never_a_failure():
    failed_judge = _rec("s/L1/b", 1, "act", False, verdicts=("infrastructure_error", "incorrect"))
    failed_judge["turns"][0].update(meta={"replay": "b.py"}, reasons=["infrastructure_error: worker_crash"])
    judged_later = _rec("s/L1/c", 1, "norm", True, 2.0, verdicts=("infrastructure_error", "ok"))
    s = summarize([_rec("s/L1/a", 1, "act", True, 2.5), failed_judge, judged_later], TASKS[:3])
    o = s["overall"]
    assert (o["expected"], o["finished"], o["not_judged"]) == (2, 2, 1)  # b leaves the denominator
    assert o["fast_p"]["1"] == 1.0
    assert s["not_judged"] == ["s/L1/b#0"] and s["honest_replays_rejected"] == []
    assert "Episodes not judged (1" in render_markdown(s)
def test_per_task_table_env_ids_command_and_warnings_in_the_report(tmp_path):
    record = _rec("s/L1/a", 1, "act", True, 2.5, verified=True, verdicts=("compile_error", "ok"))
    record["turns"][0].update(wall_s=12.0, eval_s=2.0, meta={"completion_tokens": 300})
    record["turns"][1].update(wall_s=9.0, eval_s=3.0, meta={"completion_tokens": 500})
    failed = _rec("s/L1/b", 1, "act", False, verdicts=("no_code", "hack", "incorrect"))
    s = summarize([record, failed], TASKS[:2])
    a, b = s["per_task"]
    assert (a["task_id"], a["best_verdict"], a["speedup"]) == ("s/L1/a", "ok", 2.5)
    assert (a["verified"], a["turns"]) == (True, 2)
    assert a["tokens_per_reply"] == 400 and a["generation_s_per_reply"] == pytest.approx(8.0)
    assert a["eval_s_per_turn"] == pytest.approx(2.5)
    assert (b["best_verdict"], b["speedup"], b["tokens_per_reply"]) == ("incorrect", None, None)
    meta = {"command": "kernelgym bench --env KernelGym-v0 --policy smollm2", "env_ids": ["KernelGym-L1-v0"],
            "policy": "smollm2", "warnings": ["smollm2 generates on the CPU: about 56 s a reply"]}
    text = render_markdown(s, meta=meta)
    assert "kernelgym bench --env KernelGym-v0 --policy smollm2" in text and "`KernelGym-L1-v0`" in text
    assert "> **Warning:** smollm2 generates on the CPU" in text
    assert "| s/L1/a | 0 | ok | 2.50x verified | 2 | 400 | 8.0 | 2.5 |" in text
    assert "| s/L1/b | 0 | incorrect | - | 3 | - |" in text


def test_eta_warning_for_a_model_generating_on_the_cpu():
    import torch

    from kernelgym.agents.eta import cpu_seconds_per_reply, eta_warning
    from kernelgym.agents.policies.hf import SamplingConfig

    class CpuModelPolicy:
        name, device = "tiny-cpu", "cpu"
        model = torch.nn.Linear(4, 4)
        sampling = SamplingConfig(max_new_tokens=1024)

    per_reply = cpu_seconds_per_reply(CpuModelPolicy())
    assert per_reply == pytest.approx(5.6)  # at least a tenth of SmolLM2's measured 56 s for 1024 tokens
    assert eta_warning(CpuModelPolicy(), replies=10) is None  # under ten minutes: no warning
    warning = eta_warning(CpuModelPolicy(), replies=4 * 250)
    assert "tiny-cpu generates on the CPU" in warning and "1.6 h" in warning and "--tasks" in warning

    class Remote:
        name = "openai:m@http://x"

    assert eta_warning(Remote(), replies=10_000) is None


def test_no_code_is_reported_as_charged_never_as_not_judged():
    s = summarize([_rec("s/L1/a", 1, "act", False, verdicts=("no_code", "incorrect"))], TASKS[:1])
    text = render_markdown(s)
    assert "Turns without a verdict of the judge (no_code: 1)" in text
    assert "never evaluated, but the agent's failed turn: charged" in text
    assert "Turns not judged" not in text


def test_timings_marked_contended_are_counted_and_said():
    """A busy machine's timings verify nothing (issue 47): the report says how many there were."""
    record = _rec("s/L1/a", 1, "act", True, 1.3)
    record["turns"][0]["reasons"] = ["contended: other processes held the timing's core(s) [0]"]
    summary = summarize([record, _rec("s/L2/d", 2, "gemm", True, 1.2)], TASKS)
    assert summary["contended"] == 1
    assert "Timings marked contended" in render_markdown(summary)
    assert summarize(RECORDS, TASKS)["contended"] == 0
