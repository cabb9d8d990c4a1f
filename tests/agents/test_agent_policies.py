"""Policy protocol, spec parsing, the replay and scripted policies (no model, no judge)."""

from __future__ import annotations

import pytest

from kernelgym.agents.policies import make_policy, split_options
from kernelgym.agents.policies.replay import ReplayPolicy, parse_replay, scan_folder
from kernelgym.agents.policies.scripted import ScriptedPolicy, fence
from kernelgym.agents.policy import BasePolicy, Policy, Reply, act_batch, reply_meta, to_messages
from kernelgym.envs.parsing import parse_reply
from kernelgym.errors import ConfigError
from kernelgym.solutions import cheats, examples


def test_protocol_and_default_batch():
    class Echo(BasePolicy):
        def act(self, observation, info):
            return observation["prompt"].upper()

    echo = Echo()
    assert isinstance(echo, Policy)
    assert echo.act_batch([{"prompt": "a"}, {"prompt": "b"}], [{}, {}]) == ["A", "B"]

    class DuckTyped:  # only act(): the helper loops
        def act(self, observation, info):
            return "x"

    assert act_batch(DuckTyped(), [{}, {}], [{}, {}]) == ["x", "x"]
    with pytest.raises(NotImplementedError):
        BasePolicy().act({}, {})


def test_to_messages():
    plain = to_messages({"prompt": "Task", "feedback": ""})
    assert [m["role"] for m in plain] == ["system", "user"] and plain[1]["content"] == "Task"
    with_feedback = to_messages({"prompt": "Task", "feedback": "compile error"}, system_prompt=None)
    assert len(with_feedback) == 1 and "compile error" in with_feedback[0]["content"]
    chat = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    built = to_messages({"prompt": "ignored", "messages": chat})
    assert built[0]["role"] == "system" and built[1:] == chat


def test_reply_is_a_string_with_meta():
    reply = Reply("```python\nx = 1\n```", replay="f.py", cheat="c")
    assert isinstance(reply, str) and reply.startswith("```")
    assert reply_meta(reply) == {"replay": "f.py", "cheat": "c"}
    assert reply_meta("plain") == {}


def test_split_options():
    assert split_options("smollm2?temperature=0&max_new_tokens=8&x=none&flag=true") == (
        "smollm2", {"temperature": 0, "max_new_tokens": 8, "x": None, "flag": True})
    assert split_options("openai:m@http://h:1/v1") == ("openai:m@http://h:1/v1", {})
    assert split_options("hf:weird?name") == ("hf:weird?name", {})


def test_replay_bundled_examples_and_cheats():
    policy = make_policy("replay:cpp+cheats")
    assert isinstance(policy, ReplayPolicy)
    relu = policy.files_for("bundled/L1/1_ReLU")
    assert relu[0].cheat is False and relu[0].label is None  # the honest file first
    assert {f.label for f in relu[1:]} == {c.cheat for c in cheats("cpp") if c.task_id == "bundled/L1/1_ReLU"}
    for example in examples("cpp"):
        assert policy.covers(example.task_id)
    assert policy.covers("kernelbench/L1/1_ReLU")  # any suite with the same level and file stem
    assert not policy.covers("bundled/L9/404_Nothing")
    assert policy.suggested_turns(["bundled/L1/1_ReLU"]) == len(relu)

    first = policy.act({"turn": 0}, {"task_id": "bundled/L1/1_ReLU", "attempt": 0})
    parsed = parse_reply(first)
    assert parsed.code == relu[0].source.strip("\n") + "\n"
    assert reply_meta(first)["replay"] == str(relu[0].path)
    second = policy.act({"turn": 1}, {"task_id": "bundled/L1/1_ReLU"})  # attempt from the turn counter
    assert reply_meta(second)["cheat"] == relu[1].label
    over = policy.act({}, {"task_id": "bundled/L1/1_ReLU", "attempt": len(relu)})
    assert parse_reply(over).done and parse_reply(over).code is None
    missing = policy.act({}, {"task_id": "bundled/L9/404_Nothing", "attempt": 0})
    assert parse_reply(missing).done
    advice = policy.act({}, {"task_id": "bundled/L1/1_ReLU", "attempt": 1, "role": "analyst"})
    assert "```" not in advice


def test_replay_without_cheats_and_from_a_folder(tmp_path):
    honest = make_policy("replay:cpp")
    assert all(not f.cheat for files in honest.files.values() for f in files)
    (tmp_path / "level2").mkdir()
    (tmp_path / "level2" / "5_Thing.py").write_text("class ModelNew: pass\n")
    (tmp_path / "level2" / "5_Thing__variant.py").write_text("class ModelNew: v = 2\n")
    policy = make_policy(f"replay:{tmp_path}")
    assert [f.label for f in policy.files_for("bundled/L2/5_Thing")] == [None, "variant"]
    assert not policy.covers("bundled/L1/5_Thing")
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "1_ReLU.py").write_text("x = 1\n")
    assert [f.key for f in scan_folder(flat)] == ["1_ReLU"]
    assert make_policy(f"replay:{flat}").covers("anything/L3/1_ReLU")
    with pytest.raises(ConfigError, match="not a backend"):
        parse_replay(str(tmp_path / "nope"))
    with pytest.raises(ValueError):
        parse_replay("cheats")


def test_scripted(tmp_path):
    policy = ScriptedPolicy(["a", "b"])
    assert [policy.act({}, {"attempt": i}) for i in range(3)] == ["a", "b", "b"]
    assert ScriptedPolicy(["a", "b"], cycle=True).act({}, {"attempt": 3}) == "b"
    assert ScriptedPolicy(lambda o, i: i["task_id"]).act({}, {"task_id": "t"}) == "t"
    assert len(policy.calls) == 3
    code = tmp_path / "sol.py"
    code.write_text("x = 1\n")
    parsed = make_policy(f"scripted:DONE||@{code}")
    assert parsed.act({}, {"attempt": 0}) == "DONE"
    assert parsed.act({}, {"attempt": 1}) == fence("x = 1\n")
    with pytest.raises(ValueError):
        ScriptedPolicy([])


def test_unknown_specs():
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("gpt:thing")
    with pytest.raises(ValueError):
        make_policy("hf:")
    with pytest.raises(ValueError):
        make_policy("openai:@http://127.0.0.1:1/v1")
