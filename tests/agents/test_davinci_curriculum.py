"""The daVinci trainers on the generated curriculum: the held-out split never reaches SFT or RL, tasks are
drawn by recent success, SFT replays the curriculum's own solutions, and the compile shaping is opt-in."""

from __future__ import annotations

import random

import pytest

from kernelgym.agents.davinci import rewards, sft_data
from kernelgym.agents.davinci.config import EpisodeConfig, RLConfig, RoleRewardConfig
from kernelgym.agents.davinci.trajectory import RoleTurn, Trajectory
from kernelgym.errors import ConfigError
from kernelgym.tasks.curriculum import curriculum, heldout_ids, train_ids

FAST = {"timing_trials": 5, "timing_budget_s": 0.3, "profile": False}


@pytest.fixture(scope="module")
def runner():
    from kernelgym.agents.davinci.episode import EpisodeRunner

    made = EpisodeRunner(EpisodeConfig(suite="curriculum", skills=False, eval_options=FAST))
    yield made
    made.close()


def test_rl_trains_on_the_train_split_only(runner):
    from kernelgym.agents.davinci.rl import training_tasks

    tasks = runner.env.unwrapped.tasks
    assert len(tasks) == len(curriculum())  # the env sees every level of the suite
    chosen = training_tasks(RLConfig(episode=EpisodeConfig(suite="curriculum")), tasks)
    assert sorted(chosen) == sorted(train_ids()) and not set(chosen) & set(heldout_ids())
    named = RLConfig(episode=EpisodeConfig(suite="curriculum", task_ids=[heldout_ids()[0]]))
    held_task = [t for t in tasks if t.id == heldout_ids()[0]]
    with pytest.raises(ConfigError, match="held-out"):
        training_tasks(named, held_task)


def test_success_sampling_starts_with_the_easiest_tasks(runner):
    from kernelgym.agents.davinci.rl import make_sampler, training_tasks

    config = RLConfig(task_sampling="success", tasks_per_step=4)
    tasks = runner.env.unwrapped.tasks
    sampler = make_sampler(config, tasks, training_tasks(config, tasks))
    difficulty = {c.id: c.difficulty for c in curriculum()}
    picked = sampler.sample(4, random.Random(0))
    assert len(set(picked)) == 4 and {difficulty[t] for t in picked} == {1}
    assert all(t in train_ids() for t in picked)
    assert make_sampler(RLConfig(), tasks, []) is None
    with pytest.raises(ConfigError):
        make_sampler(RLConfig(task_sampling="hardest"), tasks, [])


def test_held_out_examples_never_reach_sft():
    held, train = heldout_ids()[0], train_ids()[0]
    rows = [sft_data.Example("policy", [], "x", held), sft_data.Example("policy", [], "y", train)]
    kept, dropped = sft_data.drop_heldout(rows)
    assert [e.task_id for e in kept] == [train] and dropped == 1


@pytest.mark.slow
def test_replay_uses_curriculum_solutions_of_the_train_split(pool):
    from kernelgym.agents.davinci.episode import EpisodeRunner

    train = [c for c in curriculum("train") if c.difficulty == 1][:1]
    held = [c for c in curriculum("heldout") if c.difficulty == 1][:1]
    ids = [c.id for c in train + held]
    made = EpisodeRunner(EpisodeConfig(suite="curriculum", skills=False, eval_options=FAST, max_turns=1,
                                       summarize="never"), None, None, pool)
    try:
        examples = sft_data.replay_examples(made, "cpp", ids)
    finally:
        made.close()
    assert [e.task_id for e in examples] == [train[0].id]  # the held-out task is skipped even when named
    assert train[0].solutions["cpp"].strip() in examples[0].completion


def _traj(verdicts_rewards):
    traj = Trajectory("curriculum/L1/1_Neg", "elementwise", "cpp", "cpu")
    for verdict, reward in verdicts_rewards:
        traj.turns.append(RoleTurn("policy", [1], [2], "x", env_reward=reward, meta={"verdict": verdict}))
    return traj


def test_compile_shaping_is_off_by_default_and_an_option():
    built, broken = _traj([("incorrect", -1.0)]), _traj([("compile_error", -1.0)])
    rewards.assign([[built, broken]], RoleRewardConfig())
    assert built.role_turns("policy")[0].advantage == 0.0  # both failed: no signal without shaping
    rewards.assign([[built, broken]], RoleRewardConfig(compiled_bonus=0.3))
    assert built.role_turns("policy")[0].advantage == pytest.approx(0.3)
    assert broken.role_turns("policy")[0].advantage == pytest.approx(-0.3)
    assert RoleRewardConfig().compiled_bonus == 0.0


@pytest.mark.slow
def test_rl_steps_on_the_curriculum_resume_with_the_sampler(tmp_path, pool):
    """Two RL steps of a tiny model on the curriculum with success sampling, then a resumed third."""
    import json

    from kernelgym.agents.davinci.config import BackboneConfig
    from kernelgym.agents.davinci.rl import run_rl
    from kernelgym.agents.tiny import make_tiny_model

    folder = make_tiny_model(tmp_path / "tiny")
    episode = EpisodeConfig(suite="curriculum", max_turns=1, eval_options=FAST, selection_tokens=4,
                            policy_tokens=8, summary_tokens=4, skills=False)
    cfg = RLConfig(backbone=BackboneConfig(model=str(folder), max_prompt_tokens=512, threads=1),
                   episode=episode, output_dir=str(tmp_path / "rl"), steps=2, tasks_per_step=2, group_size=2,
                   save_every=1, task_sampling="success")
    result = run_rl(cfg, pool=pool, tensorboard=False)
    difficulty = {c.id: c.difficulty for c in curriculum()}
    played = [g[0].task_id for g in result.last_groups]
    assert len(played) == 2 and all(difficulty[t] == 1 and t in train_ids() for t in played)
    state = json.loads((tmp_path / "rl" / "checkpoint-2" / "state.json").read_text())
    history = state["sampler"]["history"]
    assert sum(len(v) for v in history.values()) == 8 and set(history) <= set(train_ids())
    resumed = run_rl(RLConfig(**{**cfg.__dict__, "steps": 3}), pool=pool, tensorboard=False)
    assert resumed.steps_done == 3
    state = json.loads((tmp_path / "rl" / "checkpoint-3" / "state.json").read_text())
    assert sum(len(v) for v in state["sampler"]["history"].values()) == 12  # the history carried over
