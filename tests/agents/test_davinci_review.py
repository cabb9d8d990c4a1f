"""The review defects of issue 29 in agents/davinci, each pinned by a test that failed before its fix:

sampling temperature in the loss, judge failures masked, the library frozen during a step, the summary
credited by later use across steps, the SFT model as the LoRA KL reference, token limits that hold whole
solutions (SFT rows dropped, never cut), the gate only on verified speedups, and the memory plan (bf16
autocast over fp32 master weights, gradient checkpointing).

A tiny random Llama with a tokenizer trained here (agents/tiny.py); nothing is downloaded, no judge runs.
"""

from __future__ import annotations

import pytest

from kernelgym.agents.davinci import rewards, roles
from kernelgym.agents.davinci.config import (
    BackboneConfig,
    EpisodeConfig,
    RLConfig,
    RoleRewardConfig,
    SFTConfig,
)
from kernelgym.agents.davinci.trajectory import RoleTurn, Trajectory
from kernelgym.errors import ConfigError
from kernelgym.solutions import examples

RELU, GELU = "L1/1_ReLU", "L1/7_GELU"


def _source(task: str = RELU) -> str:
    return next(e for e in examples("cpp") if e.task_id == f"bundled/{task}").source


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("transformers")
    from kernelgym.agents.tiny import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-davinci"))


def _backbone(folder, **kw):
    from kernelgym.agents.davinci.backbone import Backbone

    kw.setdefault("max_prompt_tokens", 512)
    return Backbone(BackboneConfig(model=str(folder), threads=1, **kw))


def _turn(backbone, role="policy", prompt="write the kernel", completion="class ModelNew: pass", **kw):
    prompt_ids = backbone.prompt_ids([{"role": "user", "content": prompt}])
    ids = backbone.tokenizer(completion, add_special_tokens=False)["input_ids"]
    return RoleTurn(role, prompt_ids, ids, completion, **kw)


def _logits(backbone, turn):
    import torch

    with torch.no_grad():
        out = backbone.model(input_ids=torch.tensor([turn.prompt_ids + turn.completion_ids])).logits[0]
    n = len(turn.prompt_ids)
    return out[n - 1: n - 1 + len(turn.completion_ids)].float()


# 1. the loss takes log-probs at the sampling temperature --------------------------------------------------

def test_loss_uses_the_turns_sampling_temperature(tiny):
    import torch

    from kernelgym.agents.davinci.reinforce import turn_loss

    backbone = _backbone(tiny)
    turn = _turn(backbone, temperature=0.5, advantage=1.0)
    loss, _ = turn_loss(backbone, turn)
    logp = torch.log_softmax(_logits(backbone, turn) / 0.5, -1)
    expected = -torch.stack([logp[i, t] for i, t in enumerate(turn.completion_ids)]).mean()
    assert float(loss.detach()) == pytest.approx(float(expected), rel=1e-4)
    at_one = torch.log_softmax(_logits(backbone, turn), -1)
    plain = -torch.stack([at_one[i, t] for i, t in enumerate(turn.completion_ids)]).mean()
    assert abs(float(plain) - float(expected)) > 1e-3  # the two differ: the test can tell them apart

    # top_p: the nucleus renormalises, so a kept token is at least as likely as under the full softmax
    nucleus = backbone.token_logprobs("policy", turn.prompt_ids, turn.completion_ids, top_p=0.9)
    full = backbone.token_logprobs("policy", turn.prompt_ids, turn.completion_ids)
    finite = torch.isfinite(nucleus)
    assert bool((nucleus[finite] >= full[finite] - 1e-6).all())


def test_sampled_turns_record_their_temperature(tiny):
    from kernelgym.agents.davinci.episode import EpisodeRunner

    runner = EpisodeRunner(EpisodeConfig(temperature=0.5, top_p=0.95, task_ids=[RELU]), _backbone(tiny))
    try:
        turn = runner._turn("policy", [{"role": "user", "content": "relu"}], None, 4)
    finally:
        runner.close()
    assert (turn.temperature, turn.top_p) == (0.5, 0.95) and turn.completion_ids


# 2. turns the judge failed to judge are dropped, not paid 0 

def _traj(task=RELU, policy=(), judged=None, selection=True, selected=()):
    traj = Trajectory(f"bundled/{task}", "elementwise", "cpp", "cpu")
    if selection:
        traj.turns.append(RoleTurn("selection", [1], [2], "[]"))
    for i, r in enumerate(policy):
        ok = True if judged is None else judged[i]
        traj.turns.append(RoleTurn("policy", [1], [2], "x", env_reward=r, meta={"judged": ok}))
    traj.selected_ids = list(selected)
    return traj


def test_unjudged_turns_are_masked_and_left_out_of_baselines():
    from kernelgym.agents.davinci.reinforce import trainable_turns

    x = _traj(policy=[1.1])
    y = _traj(policy=[0.0], judged=[False])  # the judge failed on its only turn: no outcome
    z = _traj(policy=[0.0, -1.0], judged=[False, True])  # given back, then judged as a failure
    rewards.assign([[x, y, z]], RoleRewardConfig(gamma=0.5))
    # y is in no baseline: x's advantage is against z alone, at judged turn 0
    assert x.role_turns("policy")[0].advantage == pytest.approx(1.1 - -1.0)
    assert x.role_turns("selection")[0].advantage == pytest.approx(2.1)
    assert z.role_turns("policy")[1].advantage == pytest.approx(-2.1)
    for turn in (y.role_turns("policy")[0], z.role_turns("policy")[0], y.role_turns("selection")[0]):
        assert turn.masked and turn.advantage == 0.0
    trained = trainable_turns([x, y, z], "policy") + trainable_turns([x, y, z], "selection")
    assert len(trained) == 4 and all(t.judged for t in trained if t.role == "policy")


class _FakeEnv:
    """No judge: the first step's judge call fails (info["judged"] False), the next ones fail the reply."""

    def __init__(self, tasks):
        self.unwrapped, self.steps = self, 0
        self.tasks = tasks

    def reset(self, options=None):
        return {"prompt": "task", "feedback": ""}, {"task_id": self.tasks[0].id, "size": "cpu"}

    def step(self, action):
        self.steps += 1
        judged = self.steps > 1
        verdict = "compile_error" if judged else "infrastructure_error"
        info = {"judged": judged, "verdict": verdict, "result": {}}
        return {"prompt": "task", "feedback": verdict}, (-1.0 if judged else 0.0), False, False, info

    def close(self):
        pass


def test_an_unjudged_turn_is_given_back_within_the_episode():
    from kernelgym.agents.davinci.episode import EpisodeRunner, Teacher
    from kernelgym.tasks import resolve_task

    runner = EpisodeRunner(EpisodeConfig(max_turns=1, task_ids=[RELU], skills=False))
    runner.env.close()
    runner.env = _FakeEnv([resolve_task(RELU)])
    traj = runner.run(RELU, Teacher(policy_replies=["a", "b", "c"]))
    policy = traj.role_turns("policy")
    assert [t.judged for t in policy] == [False, True]  # one judged turn, as max_turns says
    assert traj.policy_rewards == [-1.0] and traj.outcome == -1.0


# 3. the library is frozen while a step's rollouts run ------------------------------------------------------

class _AdmitAll:
    """A gate that admits every candidate into the store without judging it."""

    def __init__(self):
        self.calls = 0

    def check(self, skill_id, solution):
        from kernelgym.skill_store.gate import GateDecision

        return GateDecision(skill_id, True, "admitted by the test")

    def submit(self, store, candidate, decision=None):
        from kernelgym.skill_store.gate import GateDecision

        self.calls += 1
        skill = candidate.skill
        skill.solution, skill.status = candidate.solution, "admitted"
        store.put(skill)
        return GateDecision(skill.id, True, "admitted by the test")


def _verified_traj(task=RELU, speedup=2.0):
    traj = Trajectory(f"bundled/{task}", "activation", "cpp", "cpu")
    traj.best_source, traj.best_speedup, traj.best_verified_speedup = _source(task), speedup, speedup
    return traj


def _summary_teacher(task=RELU):
    from kernelgym.agents.davinci.episode import Teacher

    return Teacher(summary=roles.teacher_summary(task.split("/")[-1], "activation", "memory", _source(task)))


def test_admissions_wait_until_the_step_is_over(tmp_path):
    from kernelgym.agents.davinci.episode import EpisodeRunner
    from kernelgym.skill_store import SkillStore
    from kernelgym.tasks import resolve_task

    store = SkillStore(tmp_path / "skills.sqlite")
    runner = EpisodeRunner(EpisodeConfig(task_ids=[RELU], rerank=False, candidates=500), None, store,
                           defer_gate=True)
    runner._gate = gate = _AdmitAll()
    task = resolve_task(RELU)
    try:
        first = _verified_traj()
        runner._summarize(task, first, _summary_teacher())
        assert first.summary_status == "pending" and gate.calls == 0
        assert store.find(first.candidate_id) is None
        sibling = Trajectory(task.id, task.category, "cpp", "cpu")
        runner._select(task, sibling, _summary_teacher())
        assert first.candidate_id not in sibling.bm25_ids  # a sibling rollout cannot retrieve it

        assert runner.apply_gate() == [first] and first.summary_status == "admitted" and gate.calls == 1
        later = Trajectory(task.id, task.category, "cpp", "cpu")
        runner._select(task, later, _summary_teacher())
        assert first.candidate_id in later.bm25_ids  # the next step sees it
    finally:
        runner.close()
        store.close()


# 4. the summary is credited by the later use of its skill on other tasks, across steps 

class _ScriptedRunner:
    """Stands in for an EpisodeRunner: each run() returns the next prepared trajectory; the gate admits."""

    def __init__(self, script):
        self.script, self.gated = list(script), []

    def run(self, task_id):
        traj = self.script.pop(0)
        assert traj.task_id == task_id
        if traj.summary_status == "pending":
            self.gated.append(traj)
        return traj

    def run_batch(self, task_ids):
        return [self.run(task_id) for task_id in task_ids]

    def apply_gate(self):
        done, self.gated = self.gated, []
        for traj in done:
            traj.summary_status = "admitted"
        return done


def test_summary_reward_comes_from_later_use_on_other_tasks():
    from kernelgym.agents.davinci.reinforce import trainable_turns
    from kernelgym.agents.davinci.rl import play_step

    config = RLConfig(group_size=2, rewards=RoleRewardConfig(credit=1.0, credit_uses=2, credit_window=5))
    credit = rewards.SkillCredit(config.rewards)
    # step 0, task ReLU: one rollout writes a summary the gate admits as "s1"
    author = _traj(policy=[1.1])
    author.turns.append(RoleTurn("summary", [1], [3], "{...}"))
    author.summary_status, author.candidate_id = "pending", "s1"
    groups, resolved = play_step(config, _ScriptedRunner([author, _traj(policy=[-1.0])]), [f"bundled/{RELU}"],
                                 credit, 0)
    summary = author.role_turns("summary")[0]
    assert resolved == [] and summary.masked == "pending"  # not rewarded by the solution that was judged
    assert summary not in trainable_turns([t for g in groups for t in g], "summary")

    # step 1, task GELU: one of two rollouts used s1 and did better than its sibling (+2.1); the same task's
    # own reuse (ReLU) does not count
    gelu = "L1/7_GELU"
    used = _traj(gelu, policy=[1.1], selected=["s1"])
    script = [used, _traj(gelu, policy=[-1.0]), _traj(policy=[1.1], selected=["s1"]), _traj(policy=[-1.0])]
    chosen = [f"bundled/{gelu}", f"bundled/{RELU}"]
    _, resolved = play_step(config, _ScriptedRunner(script), chosen, credit, 1)
    assert resolved == [] and credit.pending["s1"].uses == [pytest.approx(2.1)]

    # step 2: a second use (this time worse than its sibling: -1.0) gives two uses: the credit is their mean
    script = [_traj(gelu, policy=[0.1], selected=["s1"]), _traj(gelu, policy=[1.1])]
    _, resolved = play_step(config, _ScriptedRunner(script), [f"bundled/{gelu}"], credit, 2)
    assert resolved == [summary] and summary.reward == pytest.approx((2.1 - 1.0) / 2)
    assert not summary.masked and summary.advantage == pytest.approx(summary.reward)  # alone: baseline 0
    assert credit.pending == {} and credit.resolved[0]["uses"] == 2

    # a pending credit survives a checkpoint
    credit.add(3, [author])
    again = rewards.SkillCredit(config.rewards)
    again.load(credit.to_dict())
    assert again.pending["s1"].turn.completion_ids == [3] and again.pending["s1"].step == 3


def test_an_unused_skill_is_credited_zero_after_the_window():
    credit = rewards.SkillCredit(RoleRewardConfig(credit_uses=3, credit_window=2, admitted=0.0))
    author = _traj(policy=[1.1])
    author.turns.append(RoleTurn("summary", [1], [3], "{...}"))
    author.summary_status, author.candidate_id = "admitted", "s1"
    credit.add(0, [author])
    assert credit.resolve(1) == []
    [turn] = credit.resolve(2)
    assert turn.reward == 0.0


# 5. with LoRA, the KL reference is the SFT model 

def _perturb_adapters(backbone, seed=1):
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in backbone.model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.5)


def test_lora_kl_reference_is_the_sft_adapters(tiny, tmp_path):
    import torch

    from kernelgym.agents.davinci.reinforce import make_optimizer, reinforce_step

    sft = _backbone(tiny, lora=True, lora_rank=4)
    _perturb_adapters(sft)  # what SFT did to the adapters
    sft.save(tmp_path / "sft")

    rl = _backbone(tmp_path / "sft")  # RL starts from the SFT checkpoint
    turn = _turn(rl, role="selection", advantage=1.0)

    def logps(reference):
        with torch.no_grad():
            return rl.token_logprobs("selection", turn.prompt_ids, turn.completion_ids, reference=reference)

    start = logps(False)
    assert torch.allclose(logps(True), start, atol=1e-5)  # KL 0 at the start: the reference is the SFT model
    with torch.no_grad(), rl.model.disable_adapter():
        base = rl.token_logprobs("selection", turn.prompt_ids, turn.completion_ids)
    assert not torch.allclose(base, start, atol=1e-3)  # the pre-SFT base differs

    traj = Trajectory("bundled/L1/1_ReLU", "activation", "cpp", "cpu", turns=[turn])
    stats = reinforce_step(rl, make_optimizer(rl, lr=0.05), [traj], max_grad_norm=100.0, kl_coef=0.1)
    assert not torch.allclose(logps(False), start, atol=1e-4)  # the trained adapter moved
    assert torch.allclose(logps(True), start, atol=1e-5)  # the reference did not
    assert stats.kl == pytest.approx(0.0, abs=1e-6)  # measured before the step: KL 0 then
    assert not any("ref_" in n for n in (tmp_path / "sft").rglob("*") for n in [str(n)])

    # A resumed run reads its reference from the SFT folder, not from the checkpoint it resumes.
    rl.save(tmp_path / "checkpoint")
    resumed = _backbone(tmp_path / "checkpoint")
    resumed.load_reference(tmp_path / "sft")
    with torch.no_grad():
        ref = resumed.token_logprobs("selection", turn.prompt_ids, turn.completion_ids, reference=True)
    assert torch.allclose(ref, start, atol=1e-5)
    trainable = {id(p) for p in resumed.trainable_parameters()}
    assert all(id(p) not in trainable for n, p in resumed.model.named_parameters() if "ref_" in n)


def test_full_finetuning_reference_after_resume_is_the_start_model(tiny, tmp_path):
    import torch

    start = _backbone(tiny)
    turn = _turn(start)
    with torch.no_grad():
        before = start.token_logprobs("policy", turn.prompt_ids, turn.completion_ids)
        for p in start.model.parameters():
            p.add_(0.05)
    start.save(tmp_path / "checkpoint")
    resumed = _backbone(tmp_path / "checkpoint")
    resumed.load_reference(tiny)
    with torch.no_grad():
        ref = resumed.token_logprobs("policy", turn.prompt_ids, turn.completion_ids, reference=True)
    assert torch.allclose(ref, before, atol=1e-5)


# 6. token limits that hold whole solutions 

def test_token_limits_hold_whole_solutions():
    episode, backbone, sft = EpisodeConfig(), BackboneConfig(), SFTConfig()
    assert episode.policy_tokens >= 4400  # the longest measured solution, 4.4k tokens, with its end token
    assert backbone.max_prompt_tokens >= episode.policy_tokens + 1024  # a prompt holds one earlier reply
    assert sft.max_length >= backbone.max_prompt_tokens + episode.policy_tokens


def test_sft_drops_rows_that_do_not_fit_instead_of_cutting_them(tiny):
    from kernelgym.agents.davinci import sft_data
    from kernelgym.agents.davinci.sft import example_tokens, fit_length

    backbone = _backbone(tiny)
    short = sft_data.Example("policy", [{"role": "user", "content": "relu"}], "```python\nx = 1\n```")
    long = sft_data.Example("policy", [{"role": "user", "content": "relu"}], "```python\n" + "y = 2\n" * 400 +
                            "```")
    limit = example_tokens(backbone.tokenizer, short) + 50
    kept, dropped = fit_length([short, long], backbone.tokenizer, limit)
    assert kept == [short] and dropped == 1


def test_prompt_is_cut_to_fit_the_models_context(tiny):
    backbone = _backbone(tiny, max_prompt_tokens=6144)
    context = backbone.context_length()
    out = backbone.generate("policy", [{"role": "user", "content": "relu kernel " * 3000}], max_new_tokens=8,
                            temperature=0)
    assert len(out.prompt_ids) + 8 <= context



def test_a_steps_gate_checks_run_at_once_and_admit_in_order(tmp_path):
    """The gate re-runs a step's candidates concurrently (each check waits at a barrier the others must
    reach), then writes the store in the order the summaries came."""
    import threading

    from kernelgym.agents.davinci.episode import EpisodeRunner
    from kernelgym.skill_store import SkillStore
    from kernelgym.tasks import resolve_task

    class _Concurrent(_AdmitAll):
        def __init__(self, n):
            super().__init__()
            self.barrier, self.order = threading.Barrier(n, timeout=10), []

        def check(self, skill_id, solution):
            self.barrier.wait()  # raises BrokenBarrierError if the checks ran one after another
            return super().check(skill_id, solution)

        def submit(self, store, candidate, decision=None):
            self.order.append(candidate.skill.id)
            assert decision is not None and decision.skill_id == candidate.skill.id
            return super().submit(store, candidate, decision)

    store = SkillStore(tmp_path / "skills.sqlite")
    runner = EpisodeRunner(EpisodeConfig(task_ids=[RELU, GELU]), None, store, defer_gate=True)
    runner._gate = gate = _Concurrent(3)
    trajs = [_verified_traj(task) for task in (RELU, GELU, RELU)]
    try:
        for task, traj in zip((RELU, GELU, RELU), trajs, strict=True):
            runner._summarize(resolve_task(task), traj, _summary_teacher(task))
        ids = [t.candidate_id for t in trajs]
        assert runner.apply_gate() == trajs
    finally:
        runner.close()
        store.close()
    assert gate.order == ids and all(t.summary_status == "admitted" for t in trajs)

# 7. the gate runs on verified speedups only 

@pytest.mark.parametrize("summarize", ["verified", "correct"])
def test_correct_but_unverified_solutions_are_not_gated(tmp_path, summarize):
    from kernelgym.agents.davinci.episode import EpisodeRunner, Teacher
    from kernelgym.skill_store import SkillStore
    from kernelgym.tasks import resolve_task

    store = SkillStore(tmp_path / "skills.sqlite")
    runner = EpisodeRunner(EpisodeConfig(task_ids=[RELU], summarize=summarize), None, store)
    runner._gate = gate = _AdmitAll()
    task = resolve_task(RELU)
    summary = _summary_teacher().summary
    try:
        slow = _verified_traj(speedup=0.0)  # correct, no verified speedup
        runner._summarize(task, slow, Teacher(summary=summary))
        assert gate.calls == 0 and slow.summary_status == "unverified"
        fast = _verified_traj(speedup=1.8)
        runner._summarize(task, fast, Teacher(summary=summary))
        assert gate.calls == 1 and fast.summary_status == "admitted"
    finally:
        runner.close()
        store.close()


# 8. the memory plan: bf16 autocast over fp32 master weights, gradient checkpointing 

def test_bf16_autocast_keeps_fp32_master_weights(tiny):
    import torch

    from kernelgym.agents.davinci.reinforce import make_optimizer, reinforce_step

    backbone = _backbone(tiny, mixed_precision="bf16")
    seen = []
    layer = backbone.model.model.layers[0].mlp.down_proj
    handle = layer.register_forward_hook(lambda module, args, out: seen.append(out.dtype))
    turn = _turn(backbone, advantage=1.0)
    traj = Trajectory("bundled/L1/1_ReLU", "activation", "cpp", "cpu", turns=[turn])
    optimizer = make_optimizer(backbone, lr=1e-3)
    backbone.model.train()
    optimizer.zero_grad()
    loss = -backbone.token_logprobs("policy", turn.prompt_ids, turn.completion_ids).mean()
    loss.backward()
    handle.remove()
    assert seen == [torch.bfloat16]  # the matmuls ran in bf16
    assert all(p.dtype == torch.float32 for p in backbone.model.parameters())
    assert all(p.grad.dtype == torch.float32 for p in backbone.model.parameters() if p.grad is not None)
    reinforce_step(backbone, optimizer, [traj])
    assert all(p.dtype == torch.float32 for p in backbone.model.parameters())


def test_gradient_checkpointing_gives_the_same_gradients(tiny):
    plain, checkpointed = _backbone(tiny), _backbone(tiny, gradient_checkpointing=True)
    assert checkpointed.checkpointing and not plain.checkpointing
    grads = []
    for backbone in (plain, checkpointed):
        backbone.model.train()
        turn = _turn(backbone)
        (-backbone.token_logprobs("policy", turn.prompt_ids, turn.completion_ids).mean()).backward()
        grads.append(backbone.model.model.layers[0].mlp.up_proj.weight.grad.clone())
    assert float((grads[0] - grads[1]).abs().max()) < 1e-5


def test_memory_plan_settings_are_checked_and_reach_the_sft_trainer(tmp_path):
    from kernelgym.agents.davinci.config import check_training
    from kernelgym.agents.davinci.sft import trainer_args

    with pytest.raises(ConfigError, match="master"):
        check_training(BackboneConfig(dtype="bfloat16"))
    check_training(BackboneConfig(dtype="bfloat16", lora=True))  # a bf16 frozen base under fp32 adapters
    with pytest.raises(ConfigError, match="mixed_precision"):
        check_training(BackboneConfig(mixed_precision="fp8"))
    config = SFTConfig(backbone=BackboneConfig(mixed_precision="bf16", gradient_checkpointing=True),
                       output_dir=str(tmp_path))
    args = trainer_args(config, "all", report_to=[])
    on = getattr(args, "activation_checkpointing", None) or args.gradient_checkpointing
    assert args.bf16 and on and args.max_length == config.max_length


def test_a_skill_credited_in_its_own_step_is_trained_once():
    """credit_window=0 (no waiting): the admitted summary trains at once, with `admitted` as its reward."""
    from kernelgym.agents.davinci.reinforce import trainable_turns
    from kernelgym.agents.davinci.rl import play_step

    config = RLConfig(group_size=1, rewards=RoleRewardConfig(admitted=0.5, credit_window=0))
    author = _traj(policy=[1.1])
    author.turns.append(RoleTurn("summary", [1], [3], "{...}"))
    author.summary_status, author.candidate_id = "pending", "s1"
    groups, resolved = play_step(config, _ScriptedRunner([author]), [f"bundled/{RELU}"],
                                 rewards.SkillCredit(config.rewards), 0)
    summary = author.role_turns("summary")[0]
    assert resolved == [summary] and summary.reward == 0.5 and not summary.masked
    assert trainable_turns([t for g in groups for t in g], "summary", resolved) == [summary]
