"""The OpenEnv adapter: kernelgym served by OpenEnv's app, driven by openenv-core's own client, with the
replies coming from the local OpenAI-compatible server. Needs `kernelgym[openenv]`; skipped otherwise."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("openenv.core", reason="needs kernelgym[openenv]")

from kernelgym.agents.policies import make_policy
from kernelgym.agents.policies.scripted import ScriptedPolicy, fence
from kernelgym.agents.serve import ChatServer
from kernelgym.envs.openenv_adapter import KernelAction, KernelGymClient, KernelObservation

RELU = Path(__file__).resolve().parents[2] / "kernelgym" / "solutions" / "cpp" / "level1" / "1_ReLU.py"


@pytest.fixture(scope="module")
def openenv_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "kernelgym.envs.openenv_adapter", "--port", str(port),
                             "--backend", "cpp", "--size", "cpu", "--max-turns", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=5):
                    break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "the OpenEnv server did not start"
                time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_two_episodes_through_the_openenv_client(openenv_server):
    def reply(observation, info):
        asked_again = "Feedback from the judge" in observation["messages"][-1]["content"]
        return fence(RELU.read_text()) if asked_again else "I would start with the memory layout."

    with ChatServer(ScriptedPolicy(reply), model_name="scripted") as llm_server:
        llm = make_policy(f"openai:scripted@{llm_server.url}")
        with KernelGymClient(base_url=openenv_server).sync() as env:
            for _ in range(2):
                result = env.reset(task_id="L1/1_ReLU")
                assert isinstance(result.observation, KernelObservation) and not result.done
                assert result.observation.task_id == "bundled/L1/1_ReLU"
                assert "ModelNew" in result.observation.prompt
                rewards, verdicts = [], []
                while not result.done:
                    obs = result.observation
                    text = llm.act({"prompt": obs.prompt, "feedback": obs.feedback}, {})
                    result = env.step(KernelAction(reply=text))
                    rewards.append(result.reward)
                    verdicts.append(result.observation.verdict)
                assert verdicts == ["no_code", "ok"]  # the feedback went back; the second reply was judged ok
                assert result.observation.speedup > 0 and result.observation.evaluated
                state = env.state()
                assert state.verdicts == verdicts and state.rewards == pytest.approx(rewards)
                assert state.step_count == 2 and state.best_speedup == result.observation.best_speedup > 0
        llm.close()
        assert llm_server.completions == 4


def test_typed_actions_are_checked(openenv_server):
    with pytest.raises(Exception, match="reply"):
        KernelAction(text="x")  # the action's field is `reply`; OpenEnv actions forbid unknown fields
    with KernelGymClient(base_url=openenv_server).sync() as env, pytest.raises(Exception, match="L9/1_Nope"):
        env.reset(task_id="L9/1_Nope")
