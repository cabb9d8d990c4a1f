"""The LLM path fails fast and says why: the endpoint check, the key rule, argument validation before any
work, the ETA from the first reply, errors on the console, and replies that stop at a code block's end."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time

import pytest
from rich.console import Console

from kernelgym.agents.bench import BenchConfig, run_bench
from kernelgym.agents.policies import make_policy
from kernelgym.agents.policies.hf import SamplingConfig, _stopping, reply_is_finished
from kernelgym.agents.policies.openai_compat import EndpointError, close_open_fence
from kernelgym.agents.policies.scripted import ScriptedPolicy
from kernelgym.agents.serve import ChatServer
from kernelgym.errors import ConfigError, KernelGymError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens here once the socket closes


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=400, color_system=None), buffer


def test_dead_endpoint_exits_non_zero_within_15_s_with_one_line(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}/v1"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kernelgym.cli", "bench", "--policy", f"openai:m@{url}",
                           "--tasks", "all", "--out", str(tmp_path / "run")],
                          check=False, capture_output=True, text=True, timeout=60, env={**os.environ})
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert elapsed < 15, elapsed
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and url in errors[0] and "APIConnectionError" in errors[0], proc.stderr
    assert not (tmp_path / "run" / "results.jsonl").exists()  # no episode started


def test_openai_without_url_needs_the_key(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match=r"public OpenAI API.*OPENAI_API_KEY.*openai:gpt-x@http"):
        make_policy("openai:gpt-x")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # an explicit key is an explicit choice: allowed
    policy = make_policy("openai:gpt-x")
    assert "api.openai.com" in policy.url
    policy.close()
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # so is a base URL in the environment
    make_policy("openai:gpt-x").close()


def test_unknown_openai_option_lists_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown openai option\(s\) \['temprature'\]; known: .*temperature"
                                          r".*Did you mean 'temperature'"):
        make_policy("openai:m@http://127.0.0.1:9/v1?temprature=0")


def test_check_against_the_local_server(tiny_server):
    good = make_policy(f"openai:tiny@{tiny_server.url}")
    assert good.check() is None
    typo = make_policy(f"openai:tiny2@{tiny_server.url}")
    assert "does not list the model 'tiny2'" in typo.check()
    dead = make_policy(f"openai:tiny@http://127.0.0.1:{_free_port()}/v1")
    started = time.monotonic()
    with pytest.raises(EndpointError, match="failed its check: APIConnectionError"):
        dead.check()
    assert time.monotonic() - started < 10


def test_a_wrong_key_fails_the_check(tiny_policy, monkeypatch):
    monkeypatch.setenv("KG_WRONG_KEY", "nope")
    with ChatServer(tiny_policy, model_name="tiny", api_key="right") as server:
        policy = make_policy(f"openai:tiny@{server.url}?api_key_env=KG_WRONG_KEY")
        with pytest.raises(EndpointError, match="AuthenticationError"):
            policy.check()


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"seed": -3}, r"--seed must be 0 or more"),
    ({"baseline_options": {"histroy": 3}},
     (r"unknown -o key\(s\) \['histroy'\] for --baseline refine \(RefineConfig\); known: history, .*"
      r"Did you mean 'history'")),
    ({"baseline": "best_of_n", "baseline_options": {"samples": 2}}, r"BestOfNConfig\); known: n"),
    ({"eval_options": {"timing_trails": 3}}, r"unknown evaluation option\(s\) \['timing_trails'\]; known:"),
    ({"turns": 0}, r"--turns must be at least 1"),
    ({"samples": 0}, r"--samples and --concurrency must be at least 1"),
])
def test_bad_arguments_fail_before_any_work(tmp_path, kwargs, message):
    config = BenchConfig(policy="scripted:DONE", tasks="L1/1_ReLU", out=str(tmp_path / "run"), **kwargs)
    with pytest.raises(KernelGymError, match=message):
        run_bench(config, progress=False)
    assert not (tmp_path / "run").exists()  # nothing was written: the check came first


def test_bad_arguments_on_the_command_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kernelgym.cli", "bench", "--seed", "-3", "-o", "history=2",
                           "--out", str(tmp_path / "r")],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.strip() == "error: --seed must be 0 or more (seeds are " \
                                                           "numpy's), not -3"
    proc = subprocess.run([sys.executable, "-m", "kernelgym.cli", "bench", "-o", "histroy=3",
                           "--out", str(tmp_path / "r")],
                          check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1
    assert "known: history" in proc.stderr and "unexpected keyword" not in proc.stderr


def test_eta_is_printed_from_the_first_reply_on_any_policy(tmp_path):
    console, buffer = _console()
    slow = ScriptedPolicy(lambda obs, info: time.sleep(0.2) or "DONE")
    config = BenchConfig(policy="scripted:slow", tasks="L1/1_ReLU,L1/2_*", out=str(tmp_path / "run"), turns=2,
                         tensorboard=False)
    outcome = run_bench(config, policy=slow, console=console)
    assert outcome.ran == 2 and not outcome.errors
    text = buffer.getvalue()
    assert text.count("eta: the first reply took") == 1, text
    line = next(t for t in text.splitlines() if t.startswith("eta:"))
    seconds = float(line.split("took ")[1].split(" s")[0])
    assert 0.2 <= seconds < 2 and "up to 3 more" in line  # 2 episodes x 2 turns, one of them done


def test_an_episode_error_is_printed_on_the_console(tmp_path):
    console, buffer = _console()

    def broken(obs, info):  # a policy's own failure (not the endpoint's): the run goes on
        raise RuntimeError("the tokenizer broke: APIConnectionError-like text")

    config = BenchConfig(policy="scripted:broken", tasks="L1/1_ReLU,L1/2_*", out=str(tmp_path / "run"),
                         tensorboard=False)
    outcome = run_bench(config, policy=ScriptedPolicy(broken), console=console)
    assert len(outcome.errors) == 2
    text = buffer.getvalue()
    assert text.count("failed: RuntimeError: the tokenizer broke") == 1, text  # once per kind of error
    assert "The first: RuntimeError: the tokenizer broke" in text and "stopped after" not in text


ANSWER = "Here it is:\n```python\nclass ModelNew:\n    pass\n```\nThis kernel is fast because"
RAMBLE = ANSWER + " it is.\n```python\nclass Other:\n    pass\n```\n" + "and so on " * 50


def test_openai_replies_stop_at_the_code_block_end(tiny_policy):
    served = ScriptedPolicy([RAMBLE])
    with ChatServer(served, model_name="m") as server:
        policy = make_policy(f"openai:m@{server.url}")
        reply = policy.act({"prompt": "x"}, {})
        assert reply == "Here it is:\n```python\nclass ModelNew:\n    pass\n```\n"
        whole = make_policy(f"openai:m@{server.url}?stop_at_code_end=false").act({"prompt": "x"}, {})
        assert whole == RAMBLE
    assert close_open_fence("a\n```python\nx = 1") == "a\n```python\nx = 1\n```\n"
    assert close_open_fence("no code") == "no code"


def test_reply_end_detection():
    assert not reply_is_finished("```python\nclass ModelNew:\n")
    assert not reply_is_finished("```python\n")  # an opening fence is not an end
    assert not reply_is_finished("```cpp\nint x;\n```\n")  # not a Python block: keep going
    assert reply_is_finished("text\n```python\nx = 1\n```")
    assert not reply_is_finished("text\n```python\nx = 1\n```", code_end=False)
    assert reply_is_finished("abc STOP", stop=("STOP",), code_end=False)


def test_hf_stopping_criteria_with_a_real_tokenizer(tiny_policy):
    import torch

    tokenizer = tiny_policy.tokenizer
    prompt = tokenizer("hello")["input_ids"]
    criteria = _stopping(tokenizer, len(prompt), SamplingConfig(), rows=2)
    finished = prompt + tokenizer(ANSWER.split("This kernel")[0])["input_ids"]
    going = prompt + tokenizer("Here it is:\n```python\nclass ModelNew:\n    pas")["input_ids"]
    width = max(len(finished), len(going))
    pad = tokenizer.pad_token_id or 0
    batch = torch.tensor([finished + [pad] * (width - len(finished)), going + [pad] * (width - len(going))])
    # One call per generated step is what transformers does; the final state is what matters here.
    assert criteria(batch[:, :len(finished)], None).tolist() == [True, False]
    assert criteria.ended_at[0] == len(finished) - len(prompt) and criteria.ended_at[1] is None
    assert _stopping(tokenizer, 0, SamplingConfig(stop_at_code_end=False), rows=1) is None


def test_tiny_model_generation_still_works_with_the_criteria(tiny_policy):
    sampling = SamplingConfig(max_new_tokens=5, seed=0)
    out = tiny_policy.generate([[{"role": "user", "content": "hi"}]], sampling)
    assert out[0].completion_tokens <= 5 and out[0].finish_reason in ("stop", "length")


def test_an_endpoint_that_dies_mid_run_stops_the_run(tiny_policy, tmp_path):
    console, buffer = _console()
    # The model list answers (the check passes), every completion fails: the endpoint is down for generation.
    with ChatServer(tiny_policy, model_name="tiny", fail_first=10_000) as server:
        config = BenchConfig(policy=f"openai:tiny@{server.url}?max_retries=1&backoff_s=0.01",
                             tasks="L1/1_ReLU,L1/2_*,L1/10_*", out=str(tmp_path / "run"), tensorboard=False)
        outcome = run_bench(config, console=console)
        assert server.completions == 2  # one episode's two attempts; the other two episodes never started
    assert outcome.ran == 1 and len(outcome.errors) == 1 and not outcome.records
    text = buffer.getvalue()
    assert "stopped after 1 of 3 episode(s): the endpoint failed (EndpointError: openai:tiny@" in text
    assert "gave up after 2 attempts" in text


def test_unknown_mutate_option_lists_the_known_ones():
    message = r"unknown mutate option\(s\) \['sed'\]; known: seed, .*Did you mean 'seed'"
    with pytest.raises(ConfigError, match=message):
        make_policy("mutate:cpp?sed=1")


def test_a_model_that_refuses_stop_sequences_is_asked_again_without(tiny_policy):
    from kernelgym.agents.serve import _error

    class NoStop(ChatServer):  # answers like OpenAI's reasoning models do to `stop`
        def complete(self, body):
            if "stop" in body:
                with self._lock:
                    self.completions += 1
                return 400, _error("invalid_request_error",
                                   "Unsupported parameter: 'stop' is not supported with this model.")
            return super().complete(body)

    with NoStop(ScriptedPolicy([RAMBLE]), model_name="m") as server:
        policy = make_policy(f"openai:m@{server.url}?concurrency=1")
        assert policy.act({"prompt": "x"}, {}) == RAMBLE  # the whole reply: no stop sequence was used
        assert server.completions == 2 and policy.requests == 2
        assert policy.act({"prompt": "x"}, {}) == RAMBLE
        assert server.completions == 3  # remembered: no second refusal


def test_an_endpoint_that_never_answers_fails_the_check_in_about_10_s(tmp_path):
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "kernelgym.cli", "bench", "--policy", f"openai:m@{url}",
                               "--out", str(tmp_path / "run")],
                              check=False, capture_output=True, text=True, timeout=60)
        elapsed = time.monotonic() - started
    # the check gives up at 10 s; the rest is a fresh interpreter importing the CLI on a loaded 2-core VM
    assert proc.returncode == 1 and elapsed < 25, (elapsed, proc.stderr)
    assert proc.stderr.count("\n") == 1 and url in proc.stderr and "Timeout" in proc.stderr, proc.stderr


def test_eta_lines():
    from kernelgym.agents.eta import eta_after_first_reply

    assert eta_after_first_reply(90.0, 41) == (
        "eta: the first reply took 90.0 s; up to 40 more at that pace take about 60 min of generation, "
        "plus the judge's time")
    assert "(4 in flight) take about 15 min" in eta_after_first_reply(90.0, 41, concurrency=4)
    instant = eta_after_first_reply(0.001, 84)
    assert instant.startswith("eta: replies take no time (0.00 s); up to 84 judge turns")


def test_hf_stop_strings_end_a_row_and_are_cut(tiny_policy):
    import torch

    from kernelgym.agents.policies.hf import _cut_at_stop

    tokenizer = tiny_policy.tokenizer
    criteria = _stopping(tokenizer, 0, SamplingConfig(stop_at_code_end=False, stop=("<END>",)), rows=1)
    ids = tokenizer("some answer <END> and more")["input_ids"]
    # transformers calls the criteria once per generated token: the row ends once "<END>" is complete.
    flags = [criteria(torch.tensor([ids[:n]]), None).tolist()[0] for n in range(1, len(ids) + 1)]
    first = flags.index(True)
    assert "<END>" in tokenizer.decode(ids[:first + 1]) and "<END>" not in tokenizer.decode(ids[:first])
    assert all(flags[first:]) and criteria.ended_at[0] == first + 1
    assert _cut_at_stop("some answer <END> and more", ("<END>", "zzz")) == "some answer "
    assert SamplingConfig().replace(stop=["a", "b"]).stop == ("a", "b")  # the server's list becomes a tuple
