"""The verifiers adapter, run by verifiers' own loop (`vf-eval`) against the local OpenAI-compatible server.

Needs `kernelgym[verifiers]` (verifiers 0.4) and `uv` on PATH (verifiers' chat harness runs as a uv
script); skipped otherwise. The served "model" answers the first turn without code and the second with the
bundled C++ ReLU, so each episode is two turns: the judge's feedback really goes back as a user turn, and the
second reply really is built, checked and timed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("verifiers.v1", reason="needs kernelgym[verifiers]")

from kernelgym.agents.policies.scripted import ScriptedPolicy, fence
from kernelgym.agents.serve import ChatServer

RELU = Path(__file__).resolve().parents[2] / "kernelgym" / "solutions" / "cpp" / "level1" / "1_ReLU.py"


def _vf_eval() -> str:
    found = Path(sys.executable).with_name("vf-eval")
    path = f"{found.parent}{os.pathsep}{os.environ['PATH']}"
    if not found.exists() or shutil.which("uv", path=path) is None:
        pytest.skip("needs the vf-eval and uv commands beside this Python")
    return str(found)


def test_load_and_validation():
    import verifiers.v1 as vf

    import kernelgym_verifiers
    from kernelgym.envs.verifiers_adapter import episode_reward

    assert vf.utils.loaders.environment_class("kernelgym_verifiers") is kernelgym_verifiers.KernelGymEnv
    tasks = list(kernelgym_verifiers.KernelGymTaskset(kernelgym_verifiers.KernelGymConfig(
        id="kernelgym_verifiers", backend="cpp", size="cpu", task_ids=["L1/1_ReLU", "L1/10_Softmax"])))
    assert [t.data.info["task_id"] for t in tasks] == ["bundled/L1/1_ReLU", "bundled/L1/10_Softmax"]
    assert "ModelNew" in tasks[0].data.prompt and tasks[0].data.system_prompt
    assert episode_reward([0.1, 0.5, 0.2], "max") == 0.5 and episode_reward([0.1, 0.5, 0.2], "last") == 0.2
    with pytest.raises(ValueError, match="episode_reward must be one of"):
        episode_reward([1.0], "best")


def test_two_episodes_through_vf_eval(tmp_path):
    vf_eval = _vf_eval()
    seen: list[list[dict]] = []
    lock = threading.Lock()

    def reply(observation, info):
        messages = observation["messages"]
        with lock:
            seen.append(messages)
        if not any(m["role"] == "assistant" for m in messages):
            return "Let me think about the memory layout first."  # no code: a failed turn, with feedback
        return fence(RELU.read_text())

    with ChatServer(ScriptedPolicy(reply), model_name="scripted") as server:
        env = {**os.environ, "PATH": f"{Path(vf_eval).parent}{os.pathsep}{os.environ['PATH']}",
               "OPENAI_API_KEY": "EMPTY"}
        proc = subprocess.run(
            [vf_eval, "kernelgym_verifiers", "-m", "scripted", "--client.base-url", server.url,
             "--client.api-key-var", "OPENAI_API_KEY", "--env.taskset.task-ids", '["L1/1_ReLU"]',
             "--env.taskset.backend", "cpp", "--env.taskset.size", "cpu", "--env.taskset.max-turns", "2",
             "--env.taskset.eval-options", '{"timing_budget_s": 1.0}', "-r", "2", "-c", "1", "--no-push",
             "-o", str(tmp_path)],
            check=False, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    episodes = [json.loads(line) for path in tmp_path.glob("*/traces.jsonl") for line in path.open()]
    assert len(episodes) == 2
    for episode in episodes:
        assert episode["ok"] and not episode["errors"]
        (trace,) = episode["traces"]
        outcome = trace["info"]["kernelgym"]
        assert outcome["task_id"] == "bundled/L1/1_ReLU"
        assert outcome["verdicts"] == ["no_code", "ok"], outcome["last_feedback"]  # the 2nd reply is correct
        assert outcome["best_speedup"] > 0
        assert trace["rewards"]["kernelgym"]["score"] == max(outcome["rewards"])
    # The judge's feedback on the first reply was the user turn before the second.
    second_turns = [m for m in seen if any(x["role"] == "assistant" for x in m)]
    assert len(seen) == 4 and len(second_turns) == 2
    assert all("No solution found" in m[-1]["content"] for m in second_turns)
