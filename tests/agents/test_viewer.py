"""`kernelgym view RUN_DIR`: one static page per bench run, checked in a real headless Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernelgym.agents.report import plot_speedups
from kernelgym.agents.viewer import load_run, render_html
from kernelgym.cli import app

GOOD = ("import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
        "        return fast_relu(x)\n")
SLOW = GOOD.replace("fast_relu", "slow_relu")
SNEAKY = GOOD + '\n# </pre><script>document.title="pwned"</script>\n'


def _turn(episode, task, turn, verdict, solution, speedup=None, feedback="Verdict: x"):
    correct = verdict == "ok"
    result = {
        "verdict": verdict,
        "correct": correct,
        "speedup": speedup if correct else None,
        "reasons": [] if correct else [f"{verdict}: the rule that fired"],
        "timing": {"verified": bool(correct and speedup and speedup > 1.2)},
    }
    return {
        "episode_id": episode,
        "task_id": task,
        "turn": turn,
        "verdict": verdict,
        "solution": solution,
        "result": result if verdict not in ("no_code", "done") else {"verdict": verdict, "reasons": []},
        "feedback": feedback,
        "reward": 1.0 if correct else -1.0,
        "terminated": False,
        "truncated": False,
    }


def _record(task, episode, turns, speedup):
    return {
        "key": f"{task}#0",
        "task_id": task,
        "sample": 0,
        "level": 1,
        "category": "activation",
        "episode_id": episode,
        "correct": speedup is not None,
        "speedup": speedup,
        "verified_speedup": speedup if speedup and speedup > 1.2 else None,
        "turns": [
            {
                "attempt": t["turn"] - 1,
                "verdict": t["verdict"],
                "wall_s": 3.0,
                "eval_s": 1.0,
                "meta": {"completion_tokens": 250},
            }
            for t in turns
        ],
    }


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    a = [
        _turn("e1", "bundled/L1/1_ReLU", 1, "compile_error", SLOW, feedback="error: expected ';' before '}'"),
        _turn("e1", "bundled/L1/1_ReLU", 2, "ok", GOOD, 1.8, feedback="Verdict: ok. Correct. speedup 1.80x"),
        _turn("e1", "bundled/L1/1_ReLU", 3, "hack", SNEAKY, feedback="Verdict: hack. torch_compute"),
    ]
    b = [
        _turn("e2", "bundled/L1/2_Tanh", 1, "no_code", None, feedback="No solution found"),
        _turn("e2", "bundled/L1/2_Tanh", 2, "incorrect", GOOD, feedback="Verdict: incorrect. trial 1"),
    ]
    (run / "trajectories.jsonl").write_text("".join(json.dumps(t) + "\n" for t in a + b))
    (run / "results.jsonl").write_text(
        json.dumps(_record("bundled/L1/1_ReLU", "e1", a, 1.8))
        + "\n"
        + json.dumps(_record("bundled/L1/2_Tanh", "e2", b, None))
        + "\n"
    )
    (run / "run.json").write_text(
        json.dumps(
            {
                "command": "kernelgym bench --env KernelGym-L1-v0 --policy smollm2 --tasks 'L1/1_*,L1/2_*'",
                "env_ids": ["KernelGym-L1-v0"],
                "policy": "smollm2",
                "baseline": "refine",
                "backend": "cpp",
                "size": "cpu",
                "turns": 3,
                "samples": 1,
                "tasks_selected": [
                    {"id": "bundled/L1/1_ReLU", "level": 1, "category": "activation"},
                    {"id": "bundled/L1/2_Tanh", "level": 1, "category": "activation"},
                ],
            }
        )
    )
    plot_speedups([1.8], run / "speedups.png")
    return run


def test_the_page_holds_the_run(run_dir):
    page = render_html(load_run(run_dir))
    assert "kernelgym bench --env KernelGym-L1-v0 --policy smollm2" in page and "KernelGym-L1-v0" in page
    assert page.count('class="task"') == 2 and "data:image/png;base64," in page and page.count("<svg") == 4
    assert "return fast_relu(x)" in page  # the best kernel (turn 2)
    assert '<span class="del">-        return slow_relu(x)</span>' in page  # the diff from turn 1 to turn 2
    assert '<span class="add">+        return fast_relu(x)</span>' in page
    assert "error: expected &#x27;;&#x27; before &#x27;}&#x27;" in page  # the judge's feedback, escaped
    assert "ok: 1" in page and "hack: 1" in page and "no_code: 1" in page  # verdict counts
    assert "<script>" not in page and "&lt;script&gt;" in page  # a reply's text never becomes markup


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        pytest.fail("this test needs Chromium: apt-get install -y chromium (.ci/setup.sh installs it)")
    return found


def _browser(*args: str, profile: Path) -> subprocess.CompletedProcess:
    command = [
        _chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
def test_the_page_renders_in_headless_chromium(run_dir, tmp_path):
    import numpy as np
    from PIL import Image

    result = CliRunner().invoke(app, ["view", str(run_dir)])
    assert result.exit_code == 0, result.output
    page = run_dir / "view.html"
    url = page.resolve().as_uri()
    dom = _browser("--dump-dom", url, profile=tmp_path / "profile").stdout
    assert dom.count('class="task"') == 2 and "<title>kernelgym run run</title>" in dom
    assert "pwned" not in dom.split("</title>")[0]  # the title was not rewritten by an injected script

    shot = tmp_path / "shot.png"
    _browser("--window-size=1280,2000", f"--screenshot={shot}", url, profile=tmp_path / "profile")
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 2000)
    pixels = np.asarray(image).reshape(-1, 3).astype(int)

    def near(color: str, tolerance: int = 12) -> int:
        rgb = np.array([int(color[i : i + 2], 16) for i in (1, 3, 5)])
        return int((np.abs(pixels - rgb) <= tolerance).all(axis=1).sum())

    assert near("#2e7d32") > 2000  # ok: verdict bar, badges, history bars
    assert near("#c62828") > 1000  # hack
    assert near("#102030") > 20000  # the command's dark block
    assert near("#4477aa", 20) > 1000  # the embedded speedup histogram's bars
    assert (pixels > 245).all(axis=1).mean() < 0.95  # not a blank page


def test_view_of_a_folder_that_is_not_a_run_is_one_clean_error(tmp_path):
    result = CliRunner().invoke(app, ["view", str(tmp_path)])
    assert (
        result.exit_code == 1
        and "is not a bench run folder" in result.output
        and "Traceback" not in result.output
    )
