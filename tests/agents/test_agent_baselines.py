"""Each prompting baseline on bundled cpu tasks with scripted/replay policies and the real cpp judge."""

from __future__ import annotations

import pytest

from kernelgym.agents import baselines
from kernelgym.agents.baselines import best_of_n, kforge, one_shot, refine
from kernelgym.agents.baselines.common import EpisodeRecord
from kernelgym.agents.policies import make_policy
from kernelgym.agents.policies.scripted import ScriptedPolicy, fence
from kernelgym.solutions import cheats

RELU = "bundled/L1/1_ReLU"


def _passthrough():
    return next(c for c in cheats("cpp") if c.task_id == RELU and c.cheat == "pytorch_passthrough").source


def test_one_shot_replay(env_factory):
    env = env_factory(max_turns=4)
    record = one_shot.run_episode(env, make_policy("replay:cpp"), RELU)
    assert isinstance(record, EpisodeRecord) and record.baseline == "one_shot"
    assert [t.verdict for t in record.turns] == ["ok"] and record.correct
    assert record.level == 1 and record.category == "activation" and record.speedup > 0
    again = EpisodeRecord.from_dict(record.to_dict())
    assert again.to_dict() == record.to_dict()


@pytest.mark.slow
def test_best_of_n_keeps_the_best(env_factory, relu_solution):
    env = env_factory(max_turns=3)
    policy = ScriptedPolicy(["no code here", fence(_passthrough()), fence(relu_solution)])
    record = best_of_n.run_episode(env, policy, RELU, best_of_n.BestOfNConfig(n=3))
    assert [t.verdict for t in record.turns] == ["no_code", "hack", "ok"]
    assert record.correct and record.best.attempt == 2 and record.turns[1].reward < 0
    # Every sample saw the first observation (no feedback) and its own attempt index.
    assert [c[1]["attempt"] for c in policy.calls] == [0, 1, 2]
    assert all(c[0]["turn"] == 0 and not c[0]["feedback"] for c in policy.calls)


def test_refine_feeds_back_the_judge(env_factory, relu_solution, broken_solution):
    env = env_factory(max_turns=3)
    policy = ScriptedPolicy([fence(broken_solution), fence(relu_solution), "DONE"])
    record = refine.run_episode(env, policy, RELU)
    assert [t.verdict for t in record.turns] == ["compile_error", "ok", "done"]
    second = policy.calls[1][0]["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert "this is not C++" in second[1]["content"] and "Turns left: 2 of 3" in second[2]["content"]
    assert "error" in second[2]["content"].lower()
    stopping = refine.run_episode(env, ScriptedPolicy([fence(relu_solution)]), RELU,
                                  refine.RefineConfig(stop_when_correct=True))
    assert len(stopping.turns) == 1 and stopping.correct, [(t.verdict, t.reasons) for t in stopping.turns]


@pytest.mark.slow
def test_kforge_functional_then_optimization(env_factory, relu_solution, broken_solution):
    env = env_factory(max_turns=3)
    generator = ScriptedPolicy([fence(broken_solution), fence(relu_solution), fence(relu_solution)])
    analyst = ScriptedPolicy(["1. Vectorize the loop with OpenMP simd."])
    record = kforge.run_episode(env, generator, RELU, kforge.KForgeConfig(analyst=analyst))
    assert [t.phase for t in record.turns] == ["functional", "functional", "optimization"]
    assert [t.verdict for t in record.turns][:2] == ["compile_error", "ok"]
    functional = generator.calls[1][0]["messages"][0]["content"]
    assert "Functional pass" in functional and "this is not C++" in functional
    assert len(analyst.calls) == 1  # asked once, after the first correct solution
    asked = analyst.calls[0][0]["messages"]
    assert asked[0]["role"] == "system" and "speedup" in asked[1]["content"]
    assert analyst.calls[0][1]["role"] == "analyst"
    optimization = generator.calls[2][0]["messages"][0]["content"]
    assert "Vectorize the loop" in optimization and "Optimization pass" in optimization
    assert record.turns[2].notes.startswith("1. Vectorize")


def test_run_over_tasks_with_replay(env_factory):
    env = env_factory("KernelGym-L1-v0", max_turns=2)
    records = baselines.run("refine", env, make_policy("replay:cpp"), [RELU, "bundled/L1/2_Matmul_Square"],
                            samples=1)
    assert [r.task_id for r in records] == [RELU, "bundled/L1/2_Matmul_Square"]
    assert records[0].turns[-1].verdict == "done"  # one file: the replay stops after it
    with pytest.raises(ValueError):
        baselines.get("nope")
