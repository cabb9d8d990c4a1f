"""The agents README's "Your own model in Python" example runs as written, with `complete` standing in for
the reader's model client (it answers with the bundled C++ ReLU)."""

from __future__ import annotations

import re
from pathlib import Path

import kernelgym

README = Path(__file__).resolve().parents[2] / "agents" / "README.md"


def _example() -> str:
    section = README.read_text().split("### Your own model in Python", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_own_model_example_runs_a_bench(tmp_path, monkeypatch):
    solution = (Path(kernelgym.__file__).parent / "solutions/cpp/level1/1_ReLU.py").read_text()
    seen = []

    def complete(messages):
        seen.append(messages)
        return f"```python\n{solution}```"

    monkeypatch.chdir(tmp_path)
    scope = {"complete": complete, "print": lambda *args: None}
    exec(compile(_example(), str(README), "exec"), scope)  # noqa: S102 (the documented example itself)
    outcome = scope["outcome"]
    assert outcome.out_dir == Path("runs/bench/my-model")
    assert (tmp_path / outcome.out_dir / "report.md").exists()
    assert outcome.summary["overall"]["correct"] == 1 and outcome.summary["overall"]["fast_p"]["0"] == 1.0
    assert len(seen) == 2 and seen[0][0]["role"] == "system" and "ReLU" in seen[0][-1]["content"]
