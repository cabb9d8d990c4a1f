"""Batched generation of a step's rollouts: one generate call per role turn, the same greedy tokens as one
row at a time, on a tiny random model (its weights scaled up so that greedy replies vary from row to row)."""

from __future__ import annotations

import pytest

from kernelgym.agents.davinci.config import BackboneConfig, EpisodeConfig

pytest.importorskip("transformers")

RELU, SIGMOID = "L1/1_ReLU", "L1/8_Sigmoid"


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    import torch

    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.agents.tiny import make_tiny_model

    folder = make_tiny_model(tmp_path_factory.mktemp("tiny-batched"))
    model = Backbone(BackboneConfig(model=str(folder), threads=1, max_prompt_tokens=1024))
    torch.manual_seed(1)
    with torch.no_grad():  # default init gives one repeated token; larger weights give varied replies
        for p in model.model.parameters():
            p.normal_(0.0, 0.3)
    return model


def _conversations():
    return [[{"role": "user", "content": "relu " * n}] for n in (1, 7, 20, 3)]  # prompts of 4 lengths


def test_batched_greedy_equals_one_row_at_a_time(backbone):
    one = [backbone.generate("policy", c, max_new_tokens=24, temperature=0) for c in _conversations()]
    batched = backbone.generate_batch("policy", _conversations(), max_new_tokens=24, temperature=0)
    assert len({len(g.prompt_ids) for g in one}) == 4  # the rows really are padded
    assert len({tuple(g.completion_ids) for g in one}) > 1  # and differ, so a mix-up would show
    assert [g.completion_ids for g in batched] == [g.completion_ids for g in one]
    assert [g.prompt_ids for g in batched] == [g.prompt_ids for g in one]
    assert [g.text for g in batched] == [g.text for g in one]
    in_pairs = backbone.generate_batch("policy", _conversations(), max_new_tokens=24, temperature=0,
                                       batch_size=2)
    assert [g.completion_ids for g in in_pairs] == [g.completion_ids for g in one]


def test_a_static_cache_generates_the_same_greedy_tokens(backbone):
    """generation_cache="static" (fixed cache buffers, prompts padded to a multiple of generation_pad_to; on a
    GPU the decoding step is then compiled into CUDA graphs) changes the speed, not the tokens."""
    import dataclasses

    eager = backbone.generate_batch("policy", _conversations(), max_new_tokens=24, temperature=0)
    config = backbone.config
    try:
        backbone.config = dataclasses.replace(config, generation_cache="static", generation_pad_to=64)
        static = backbone.generate_batch("policy", _conversations(), max_new_tokens=24, temperature=0)
    finally:
        backbone.config = config
    assert [g.completion_ids for g in static] == [g.completion_ids for g in eager]
    assert [g.prompt_ids for g in static] == [g.prompt_ids for g in eager]  # the extra padding is not kept


def test_an_unknown_generation_cache_is_refused():
    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.errors import ConfigError

    with pytest.raises(ConfigError, match="generation_cache"):
        Backbone(BackboneConfig(generation_cache="paged"), model=object(), tokenizer=object())


def test_the_comparison_sees_unmasked_padding(backbone):
    """The control: the same left-padded rows with the padding *not* masked give other tokens, so the
    equality above is evidence that the mask and positions are right."""
    import torch

    one = [backbone.generate("policy", c, max_new_tokens=24, temperature=0) for c in _conversations()]
    pad = backbone.tokenizer.pad_token_id
    width = max(len(g.prompt_ids) for g in one)
    ids = torch.tensor([[pad] * (width - len(g.prompt_ids)) + g.prompt_ids for g in one])
    with torch.no_grad():
        out = backbone.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=24,
                                      do_sample=False, pad_token_id=pad)
    rows = out[:, width:].tolist()
    assert any(row[: len(g.completion_ids)] != g.completion_ids for row, g in zip(rows, one, strict=True))


def test_sampled_rows_keep_their_own_tokens_and_settings(backbone):
    out = backbone.generate_batch("policy", _conversations(), max_new_tokens=16, temperature=0.8, top_p=0.9)
    assert all(g.temperature == 0.8 and g.top_p == 0.9 for g in out)
    eos = backbone.tokenizer.eos_token_id
    for g in out:  # each row ends at its own end token (kept) or at the limit; no padding trails it
        assert (g.finish_reason == "stop") == (eos in g.completion_ids)
        assert eos not in g.completion_ids[:-1] and len(g.completion_ids) <= 16


class _Counting:
    """The backbone, with each generate_batch call's role and row count recorded."""

    def __init__(self, backbone):
        self.inner, self.calls = backbone, []

    def generate_batch(self, role, conversations, **kwargs):
        self.calls.append((role, len(conversations)))
        return self.inner.generate_batch(role, conversations, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _runner(backbone, store, pool, **kw):
    from kernelgym.agents.davinci.episode import EpisodeRunner

    config = EpisodeConfig(max_turns=2, policy_tokens=12, selection_tokens=8, temperature=0.0,
                           eval_options={"timing_trials": 10, "profile": False}, **kw)
    return EpisodeRunner(config, backbone, store, pool)


@pytest.mark.slow
def test_a_steps_episodes_share_each_generate_call_and_match_one_by_one(backbone, tmp_path, pool):
    from kernelgym.skill_store import SkillStore

    store = SkillStore(tmp_path / "skills.sqlite")
    counting = _Counting(backbone)
    runner = _runner(counting, store, pool)
    try:
        batch = runner.run_batch([RELU, RELU, SIGMOID])
        batched_calls = list(counting.calls)
        counting.calls.clear()
        alone = [runner.run(t) for t in (RELU, RELU, SIGMOID)]
    finally:
        runner.close()
        store.close()
    # One selection call and one call per policy turn, each with every episode's row.
    assert batched_calls == [("selection", 3), ("policy", 3), ("policy", 3)]
    assert len(counting.calls) == 9  # one row per call, one at a time
    for b, a in zip(batch, alone, strict=True):
        assert b.task_id == a.task_id and b.verdicts == a.verdicts and len(b.verdicts) == 2
        assert [t.completion_ids for t in b.turns] == [t.completion_ids for t in a.turns]
        assert [t.role for t in b.turns] == ["selection", "policy", "policy"]


class _Timeline(_Counting):
    """The backbone, with the start and end of each generate_batch call on a shared timeline."""

    def __init__(self, backbone, events):
        super().__init__(backbone)
        self.events = events

    def generate_batch(self, role, conversations, **kwargs):
        import time

        self.events.append(("generate", len(self.calls), "start", time.monotonic()))
        out = super().generate_batch(role, conversations, **kwargs)
        time.sleep(0.2)  # a longer call, as on a real model: the window the judge can use
        self.events.append(("generate", len(self.calls) - 1, "end", time.monotonic()))
        return out


def _chunked_step(backbone, pool, monkeypatch, holds_timing_slot: bool):
    """Four one-turn episodes generated two at a time; (events, trajectories)."""
    import time

    from kernelgym.agents.davinci.backbone import Backbone

    monkeypatch.setattr(Backbone, "holds_timing_slot", holds_timing_slot)  # as on a GPU, or the CPU
    events = []
    runner = _runner(_Timeline(backbone, events), None, pool, generation_batch=2, skills=False)
    runner.config.max_turns = 1
    inner_step = runner._step

    def step(rollout, turn):
        events.append(("step", rollout.traj.task_id, "start", time.monotonic()))
        inner_step(rollout, turn)

    runner._step = step
    try:
        trajs = runner.run_batch([RELU, RELU, SIGMOID, SIGMOID])
    finally:
        runner.close()
    assert [t.task_id for t in trajs] == [f"bundled/{RELU}"] * 2 + [f"bundled/{SIGMOID}"] * 2
    assert all(len(t.verdicts) == 1 for t in trajs)
    assert [(e[1], e[2]) for e in events if e[0] == "generate"] == [(0, "start"), (0, "end"), (1, "start"),
                                                                    (1, "end")]
    return events, trajs


def test_where_the_policy_holds_the_timing_slot_a_chunk_is_judged_while_the_next_generates(
        backbone, pool, monkeypatch):
    """On a GPU (the backbone holds the timing slot while it generates), the first chunk's env steps start
    before the second chunk's generate call ends: its candidates build and check meanwhile."""
    events, _ = _chunked_step(backbone, pool, monkeypatch, holds_timing_slot=True)
    second_chunk_done = next(e[3] for e in events if e[:3] == ("generate", 1, "end"))
    assert min(e[3] for e in events if e[0] == "step") < second_chunk_done


def test_on_the_cpu_every_chunk_is_generated_before_any_reply_is_judged(backbone, pool, monkeypatch):
    """On the CPU generation would share the cores the candidates are timed on: no step starts before the
    last generate call ends."""
    events, _ = _chunked_step(backbone, pool, monkeypatch, holds_timing_slot=False)
    last_chunk_done = next(e[3] for e in events if e[:3] == ("generate", 1, "end"))
    assert min(e[3] for e in events if e[0] == "step") > last_chunk_done


@pytest.mark.slow
def test_each_episode_of_a_batch_can_have_its_own_teacher(tmp_path, pool):
    """The SFT replay plays every task's own solution in one batch: each episode gets its own teacher's
    reply (a correct solution, a reply without code), judged side by side."""
    from kernelgym.agents.davinci.episode import EpisodeRunner, Teacher
    from kernelgym.errors import ConfigError
    from kernelgym.solutions import examples

    relu = next(e.source for e in examples("cpp") if e.task_id == f"bundled/{RELU}")
    config = EpisodeConfig(max_turns=1, summarize="never", skills=False,
                           eval_options={"timing_trials": 10, "profile": False})
    runner = EpisodeRunner(config, None, None, pool)
    try:
        trajs = runner.run_batch([RELU, RELU], [Teacher(policy_replies=[f"```python\n{relu}\n```"]),
                                                Teacher(policy_replies=["I would write a kernel."])])
        with pytest.raises(ConfigError, match="2 teachers for 1 episodes"):
            runner.run_batch([RELU], [Teacher(), Teacher()])
    finally:
        runner.close()
    assert [t.verdicts for t in trajs] == [["ok"], ["no_code"]]


def test_a_steps_summaries_are_generated_in_one_call(backbone, tmp_path):
    """Every episode that earns a summary gets it from one batched call (one at a time, a step's handful of
    summaries took as long as all its policy replies); an episode without a verified speedup gets none."""
    from kernelgym.agents.davinci.episode import EpisodeRunner, Teacher, _Rollout
    from kernelgym.agents.davinci.trajectory import Trajectory
    from kernelgym.skill_store import SkillStore
    from kernelgym.tasks import resolve_task

    task = resolve_task(RELU)
    source = task.source.replace("class Model", "class ModelNew")

    def traj(speedup):
        t = Trajectory(task.id, task.category, "cpp", "cpu")
        t.best_source, t.best_speedup, t.best_verified_speedup = source, speedup, speedup
        return t

    store = SkillStore(tmp_path / "skills.sqlite")
    counting = _Counting(backbone)
    runner = EpisodeRunner(EpisodeConfig(task_ids=[RELU], summary_tokens=8, temperature=0.0), counting, store)
    trajs = [traj(1.5), traj(0.0), traj(2.0), traj(1.2)]
    try:
        runner._summarize_all([_Rollout(None, {}, task, t, teacher=Teacher()) for t in trajs])
    finally:
        runner.close()
        store.close()
    assert counting.calls == [("summary", 3)]
    assert [[turn.role for turn in t.turns] for t in trajs] == [["summary"], [], ["summary"], ["summary"]]
    assert trajs[1].summary_status == "skipped"
    assert all(t.summary_status != "skipped" for t in (trajs[0], trajs[2], trajs[3]))


def test_a_bf16_base_keeps_fp32_adapters_and_its_static_cache_one_dtype(tmp_path):
    """LoRA over a bf16 base (gpu_train.sh's default): the adapters train in fp32, and static-cache generation
    gives the eager tokens. Over fp32 weights under bf16 autocast, RoPE left keys fp32 and values bf16, and
    transformers 5.17's static cache refused them."""
    import dataclasses

    import torch

    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.agents.tiny import make_tiny_model

    folder = make_tiny_model(tmp_path / "tiny")
    lora = Backbone(BackboneConfig(model=str(folder), threads=1, max_prompt_tokens=1024, lora=True,
                                   dtype="bfloat16", mixed_precision="bf16"))
    trainable = {p.dtype for p in lora.model.parameters() if p.requires_grad}
    frozen_base = {p.dtype for n, p in lora.model.named_parameters() if "lora_" not in n}
    assert trainable == {torch.float32} and frozen_base == {torch.bfloat16}
    eager = lora.generate_batch("policy", _conversations(), max_new_tokens=12, temperature=0)
    lora.config = dataclasses.replace(lora.config, generation_cache="static", generation_pad_to=64)
    static = lora.generate_batch("policy", _conversations(), max_new_tokens=12, temperature=0)
    assert [g.completion_ids for g in static] == [g.completion_ids for g in eager]
