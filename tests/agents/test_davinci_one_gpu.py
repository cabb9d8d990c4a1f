"""What a learning run on one GPU host needs from the trainer, checked on the CPU: the policy's own GPU work
holds the GPU's timing slot (no candidate is timed beside it), and RL ends on a step boundary at a time limit
with a checkpoint that the same call continues from. Tiny random model (agents/tiny.py), real judge."""

from __future__ import annotations

import fcntl
import json

import pytest

from kernelgym.agents.davinci.config import BackboneConfig, EpisodeConfig, RLConfig

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from kernelgym.agents.tiny import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-one-gpu"))


def _slot_is_free(path: str) -> bool:
    with open(path, "a") as handle:  # another open file: flock sees it as another holder
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
        return True


def test_the_policys_gpu_work_holds_the_gpus_timing_slot(tiny, tmp_path, monkeypatch):
    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.workers import locks

    monkeypatch.setattr(locks, "LOCK_DIR", str(tmp_path))
    backbone = Backbone(BackboneConfig(model=str(tiny), threads=1))
    slot = locks.lock_path("cuda")
    with backbone.exclusive():  # on the CPU: nothing to hold (the judge's CPU timing has its own cores)
        assert _slot_is_free(slot)
    backbone.config.device = "cuda"  # only the config is read: the model itself stays on the CPU here
    with backbone.exclusive():
        assert not _slot_is_free(slot)
    assert _slot_is_free(slot)
    backbone.config.exclusive_gpu = False
    with backbone.exclusive():
        assert _slot_is_free(slot)


@pytest.mark.slow
def test_rl_stops_on_a_step_boundary_at_its_time_limit_and_continues(tiny, tmp_path, pool):
    from kernelgym.agents.davinci.rl import run_rl

    out = tmp_path / "rl"
    cfg = RLConfig(backbone=BackboneConfig(model=str(tiny), threads=1, max_prompt_tokens=512),
                   episode=EpisodeConfig(task_ids=["L1/1_ReLU", "L1/8_Sigmoid"], max_turns=1, policy_tokens=8,
                                         selection_tokens=8, summarize="never",
                                         eval_options={"timing_trials": 10, "profile": False}),
                   output_dir=str(out), steps=3, tasks_per_step=1, group_size=2, save_every=10, lr=1e-3,
                   max_wall_s=1e-6)
    cut = run_rl(cfg, pool=pool, tensorboard=False)
    assert cut.steps_done == 1
    # saved although save_every is 10: the stop writes its own checkpoint
    assert json.loads((out / "checkpoint-1" / "state.json").read_text())["step"] == 1
    resumed = run_rl(RLConfig(**{**cfg.__dict__, "max_wall_s": 0.0}), pool=pool, tensorboard=False)
    assert resumed.steps_done == 3
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


def test_no_step_begins_that_would_end_past_the_calls_budget():
    from kernelgym.agents.davinci.rl import next_step_overruns

    # 400 s in, steps of up to 150 s, a 500 s budget: the next step would end at 550 s, so the call stops
    # here (a lease killed mid-step loses the step and its checkpoint)
    assert next_step_overruns(500.0, 400.0, 150.0)
    assert not next_step_overruns(500.0, 300.0, 150.0)
    assert not next_step_overruns(0.0, 1e9, 150.0)  # no budget: never out of time
