"""The OpenAI-compatible adapter against a real HTTP server on 127.0.0.1 (kernelgym.agents.serve)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from kernelgym.agents.policies import make_policy
from kernelgym.agents.policies.openai_compat import EndpointError, OpenAIConfig, OpenAIPolicy
from kernelgym.agents.serve import ChatServer


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def test_act_and_batch_through_the_server(tiny_server):
    policy = make_policy(f"openai:tiny@{tiny_server.url}?max_tokens=6&concurrency=2&temperature=0")
    assert isinstance(policy, OpenAIPolicy)
    before = tiny_server.completions
    reply = policy.act({"prompt": "Write ModelNew.", "feedback": "it failed"}, {})
    assert isinstance(reply, str)
    replies = policy.act_batch([{"prompt": f"task {i}"} for i in range(4)], [{}] * 4)
    assert len(replies) == 4 and all(isinstance(r, str) for r in replies)
    assert tiny_server.completions - before == 5 and policy.requests == 5
    assert policy.act({"prompt": "same"}, {}) == policy.act({"prompt": "same"}, {})  # temperature 0
    policy.close()


def test_raw_protocol(tiny_server):
    import openai

    base = tiny_server.url
    assert _get(base.replace("/v1", "/health")) == {"status": "ok"}
    assert _get(base + "/models")["data"][0]["id"] == "tiny"
    client = openai.OpenAI(base_url=base, api_key="x", max_retries=0)
    response = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                              max_tokens=5, n=2)
    assert len(response.choices) == 2 and response.choices[0].finish_reason in ("stop", "length")
    assert 0 < response.usage.completion_tokens <= 10 and response.usage.prompt_tokens > 0
    chunks = list(client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                                 max_tokens=4, stream=True))
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="tiny", messages=[], max_tokens=2)
    request = urllib.request.Request(base + "/chat/completions", data=b"{not json", method="POST",
                                     headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(request, timeout=10)
    assert bad.value.code == 400


def test_retries_with_backoff_then_success(tiny_policy):
    with ChatServer(tiny_policy, model_name="tiny", fail_first=2) as server:
        policy = OpenAIPolicy(OpenAIConfig(model="tiny", base_url=server.url, max_tokens=3, backoff_s=0.05,
                                           max_retries=3))
        started = time.monotonic()
        assert isinstance(policy.act({"prompt": "x"}, {}), str)
        assert policy.requests == 3 and server.completions == 3  # two 503s, then the answer
        assert time.monotonic() - started >= 0.05 * 0.5 + 0.1 * 0.5  # it waited between tries
    with ChatServer(tiny_policy, model_name="tiny", fail_first=10) as server:
        policy = OpenAIPolicy(OpenAIConfig(model="tiny", base_url=server.url, max_tokens=3, backoff_s=0.01,
                                           max_retries=2))
        with pytest.raises(EndpointError, match="gave up after 3 attempts"):
            policy.act({"prompt": "x"}, {})
        assert policy.requests == 3


def test_api_key_from_the_named_variable(tiny_policy, monkeypatch):
    with ChatServer(tiny_policy, model_name="tiny", api_key="s3cret") as server:
        monkeypatch.delenv("KG_TEST_KEY", raising=False)
        denied = OpenAIPolicy(model="tiny", base_url=server.url, api_key_env="KG_TEST_KEY", max_tokens=2,
                              backoff_s=0.01)
        with pytest.raises(EndpointError, match="401|AuthenticationError"):
            denied.act({"prompt": "x"}, {})
        assert denied.requests == 1  # not retried
        monkeypatch.setenv("KG_TEST_KEY", "s3cret")
        allowed = OpenAIPolicy(model="tiny", base_url=server.url, api_key_env="KG_TEST_KEY", max_tokens=2)
        assert isinstance(allowed.act({"prompt": "x"}, {}), str)


def test_unreachable_endpoint_is_retried_then_fails():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket closes
    policy = OpenAIPolicy(model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_s=0.01,
                          timeout_s=2)
    with pytest.raises(EndpointError, match="APIConnectionError"):
        policy.act({"prompt": "x"}, {})
    assert policy.requests == 2


@pytest.mark.slow
def test_serve_command_in_a_subprocess(tiny_model_dir):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "kernelgym.agents.serve", "--model", str(tiny_model_dir),
                             "--name", "tiny", "--port", str(port), "--max-new-tokens", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ})
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                _get(f"http://127.0.0.1:{port}/health")
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read().decode()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.3)
        policy = make_policy(f"openai:tiny@http://127.0.0.1:{port}/v1")
        assert isinstance(policy.act({"prompt": "x"}, {}), str)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
