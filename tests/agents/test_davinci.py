"""The daVinci agent: per-role advantages, the diversity filter, the RL loss per role, episodes with the gate,
and one SFT step and two RL steps end to end on the cpp backend with the real judge.

The model is a tiny random Qwen3 with a tokenizer trained here (nothing is downloaded). Its replies are
garbage (a reply without code is a failed turn), so the end-to-end tests check the pipeline, and the
learning signal is checked on fixed turns where the right answer is known.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from kernelgym.agents.davinci import rewards, roles, sft_data
from kernelgym.agents.davinci.config import (
    BackboneConfig,
    EpisodeConfig,
    RLConfig,
    RoleRewardConfig,
    SFTConfig,
    SFTDataConfig,
    load_config,
)
from kernelgym.agents.davinci.trajectory import RoleTurn, Trajectory
from kernelgym.errors import ConfigError
from kernelgym.solutions import examples

FAST = {"timing_trials": 10, "timing_budget_s": 0.5, "profile": False}
RELU = "L1/1_ReLU"


def _source(task: str) -> str:
    return next(e for e in examples("cpp") if e.task_id == f"bundled/{task}").source


# rewards and advantages (no model) --------------------------------------------------------------------------

def _traj(policy_rewards, *, selection=True, summary=None, candidate=None, reused=()):
    traj = Trajectory("bundled/L1/1_ReLU", "elementwise", "cpp", "cpu")
    if selection:
        traj.turns.append(RoleTurn("selection", [1], [2], "[]"))
    for r in policy_rewards:
        traj.turns.append(RoleTurn("policy", [1], [2], "x", env_reward=r))
    if summary is not None:
        traj.turns.append(RoleTurn("summary", [1], [2], "{}"))
        traj.summary_status, traj.candidate_id = summary, candidate
    traj.reused_admitted = list(reused)
    return traj


def test_advantages_are_per_role_and_leave_one_out():
    a = _traj([-1.0, 1.1], summary="admitted", candidate="s1")
    b = _traj([-1.0, -1.0], summary="malformed")
    c = _traj([0.1], selection=False, reused=["s1"])
    summaries = rewards.assign([[a, b, c]], RoleRewardConfig(gamma=0.5, malformed=-0.5))
    # policy: discounted returns per turn, baseline = the other rollouts' mean at the same turn
    ga0, gb0, gc0 = -1.0 + 0.5 * 1.1, -1.0 + 0.5 * -1.0, 0.1
    pa, pb, pc = (t.role_turns("policy") for t in (a, b, c))
    assert pa[0].reward == pytest.approx(ga0)
    assert pa[0].advantage == pytest.approx(ga0 - (gb0 + gc0) / 2)
    assert pc[0].advantage == pytest.approx(gc0 - (ga0 + gb0) / 2)
    assert pa[1].advantage == pytest.approx(1.1 - -1.0) and pb[1].advantage == pytest.approx(-1.0 - 1.1)
    # selection: the episode outcome, only over rollouts that had a selection turn (c had none)
    sa, sb = a.role_turns("selection")[0], b.role_turns("selection")[0]
    assert (sa.reward, sb.reward) == (1.1, -1.0)
    assert sa.advantage == pytest.approx(2.1) and sb.advantage == pytest.approx(-2.1)
    # summary: the malformed one is known now; the admitted one waits for its skill's later use
    ua, ub = a.role_turns("summary")[0], b.role_turns("summary")[0]
    assert summaries == [ub] and ub.reward == -0.5 and ua.masked == "pending"
    rewards.summary_advantages(summaries)
    assert ub.advantage == pytest.approx(-0.5)  # alone in the step: baseline 0


def test_leave_one_out_alone_keeps_the_reward():
    assert rewards.leave_one_out([0.7, None]) == [0.7, None]
    assert rewards.discounted_returns([1.0, 0.0, 2.0], 0.5) == [1.5, 1.0, 2.0]


# the summary role's reply -----------------------------------------------------------------------------------

def test_summary_parsing_and_candidate():
    reply = ('Here: {"title": "Fused loop", "technique": "one pass", "applies_when": "relu", '
             '"bound": "memory"}')
    fields = roles.parse_summary(reply)
    assert fields["patterns"] == ["relu"] and fields["bound"] == "memory"
    cand = roles.candidate_from_summary(fields, task_id="bundled/L1/1_ReLU", backend="cpp", size="cpu",
                                        source=_source(RELU))
    assert cand.skill.id.startswith("distilled-1-relu-") and cand.solution.task_ids == ["bundled/L1/1_ReLU"]
    assert roles.parse_summary("no json here") is None
    assert roles.parse_summary('{"title": "", "technique": "x"}') is None
    assert roles.parse_summary(roles.teacher_summary("1_ReLU", "elementwise", "memory", _source(RELU)))


# the diversity filter ---------------------------------------------------------------------------------------

def _example(task, code, category="elementwise"):
    return sft_data.Example("policy", [{"role": "user", "content": task}], f"```python\n{code}\n```",
                            f"bundled/{task}", category)


def test_filter_drops_duplicates_and_near_duplicates():
    relu = _source(RELU)
    renamed = relu.replace("_lib", "_native").replace("    ", "  ") + "\n# a comment\n"
    near = relu.replace("for (", "for  (", 1).replace("y[i] =", "y[i]  =", 1) + "\nEXTRA = 1\n"
    gelu = _source("L1/7_GELU")
    batch = [_example(RELU, relu), _example(RELU, renamed), _example(RELU, near), _example("L1/7_GELU", gelu)]
    assert sft_data.ast_hash(relu) == sft_data.ast_hash(renamed) != sft_data.ast_hash(near)

    kept, report = sft_data.filter_examples(batch, SFTDataConfig(dedup="ast", category_ratio=100))
    assert report.duplicates == 1 and len(kept) == 3
    kept, report = sft_data.filter_examples(batch, SFTDataConfig(dedup="minhash", category_ratio=100))
    assert (report.duplicates, report.near_duplicates) == (1, 1)
    assert [e.task_id for e in kept] == ["bundled/L1/1_ReLU", "bundled/L1/7_GELU"]
    assert sft_data.similarity(sft_data.minhash(relu), sft_data.minhash(gelu)) < 0.85


def test_filter_caps_tasks_and_balances_categories():
    batch = [_example(RELU, f"x = {i}\n") for i in range(5)]
    batch += [_example(f"L2/{i}_Gemm", f"y = {10 + i}\n", "gemm_chain") for i in range(6)]
    batch += [_example("L1/2_Matmul_Square", "z = 99\n", "matmul")]
    kept, report = sft_data.filter_examples(batch, SFTDataConfig(per_task_cap=2, category_ratio=3.0))
    counts = Counter(e.category for e in kept)
    assert report.over_task_cap == 3 and counts["elementwise"] == 2
    assert counts["gemm_chain"] == 3 and report.over_category == 3 and counts["matmul"] == 1


def test_config_from_file_and_command_line(tmp_path):
    path = tmp_path / "rl.toml"
    path.write_text('steps = 3\n[episode]\nmax_turns = 5\ntask_ids = ["L1/1_ReLU"]\n'
                    '[backbone]\nlora = true\n')
    cfg = load_config(RLConfig, path, ["episode.max_turns=2", "lr=0.001", "rewards.gamma=0.5"])
    assert (cfg.steps, cfg.episode.max_turns, cfg.lr, cfg.rewards.gamma) == (3, 2, 0.001, 0.5)
    assert cfg.backbone.lora and cfg.episode.task_ids == ["L1/1_ReLU"]
    with pytest.raises(ConfigError, match="episode.max_turn"):
        load_config(RLConfig, None, ["episode.max_turn=2"])


# a tiny model -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory):
    """A tiny random Qwen3 checkpoint folder with a tokenizer trained on the env's prompts."""
    pytest.importorskip("transformers")
    import gymnasium as gym
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    from kernelgym.agents.tiny import CHATML
    from kernelgym.skill_store import seed_skills

    env = gym.make("KernelGym-L1-v0", size="cpu", backend="cpp")
    corpus = [env.reset(seed=s)[0]["prompt"] for s in range(3)] + [s.to_prompt() for s in seed_skills()]
    corpus += [_source(RELU)]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=1200, show_progress=False,
                                                        special_tokens=special,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", chat_template=CHATML)
    import torch

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                         max_position_embeddings=4096, pad_token_id=tokenizer.pad_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    folder = tmp_path_factory.mktemp("tiny-qwen")
    Qwen3ForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _backbone(folder, **kw):
    from kernelgym.agents.davinci.backbone import Backbone

    return Backbone(BackboneConfig(model=str(folder), max_prompt_tokens=768, threads=1, **kw))


def _fixed_turn(backbone, role, prompt, completion, advantage):
    tok = backbone.tokenizer
    prompt_ids = backbone.prompt_ids([{"role": "user", "content": prompt}])
    return RoleTurn(role, prompt_ids, tok(completion, add_special_tokens=False)["input_ids"], completion,
                    advantage=advantage)


def test_rl_step_raises_the_rewarded_roles_logprob_only(tiny_qwen, tmp_path):
    """With an adapter per role, a reward for the selection turn moves only the selection adapter."""
    import torch

    from kernelgym.agents.davinci.reinforce import make_optimizer, reinforce_step

    backbone = _backbone(tiny_qwen, lora=True, lora_rank=4)
    traj = Trajectory("bundled/L1/1_ReLU", "elementwise", "cpp", "cpu")
    traj.turns = [_fixed_turn(backbone, "selection", "pick skills", '["cpp-openmp-simd-elementwise"]', 1.0),
                  _fixed_turn(backbone, "policy", "write the kernel", "```python\nx = 1\n```", 0.0),
                  _fixed_turn(backbone, "summary", "summarize", '{"title": "t"}', 0.0)]

    def logprob(turn):
        with torch.no_grad():
            return float(backbone.token_logprobs(turn.role, turn.prompt_ids, turn.completion_ids).sum())

    before = [logprob(t) for t in traj.turns]
    optimizer = make_optimizer(backbone, lr=0.005)  # small: one Adam step of 0.05 can overshoot a tiny model
    stats = reinforce_step(backbone, optimizer, [traj], max_grad_norm=100.0)
    after = [logprob(t) for t in traj.turns]
    assert after[0] > before[0] + 1e-3  # the rewarded selection reply became more likely
    assert after[1:] == pytest.approx(before[1:], abs=1e-6)  # policy and summary adapters untouched
    assert stats.tokens == {role: len(t.completion_ids) for role, t in zip(roles_order(), traj.turns)}

    # A negative advantage pushes the same reply down (a fresh optimizer: Adam's momentum would carry on).
    traj.turns[0].advantage = -1.0
    reinforce_step(backbone, make_optimizer(backbone, lr=0.005), [traj], max_grad_norm=100.0)
    assert logprob(traj.turns[0]) < after[0]

    # The three adapters save and load back as they were.
    saved = [logprob(t) for t in traj.turns]
    backbone.save(tmp_path / "ckpt")
    backbone = _backbone(tmp_path / "ckpt")
    assert backbone.lora and [logprob(t) for t in traj.turns] == pytest.approx(saved, abs=1e-5)


def roles_order():
    from kernelgym.agents.davinci.config import ROLES

    return ROLES


def test_loss_covers_only_the_completion_tokens(tiny_qwen):
    """The turn's loss is -(advantage x mean log-prob of its completion tokens); the prompt adds none."""
    import torch

    from kernelgym.agents.davinci.reinforce import turn_loss

    backbone = _backbone(tiny_qwen)
    turn = _fixed_turn(backbone, "policy", "write the kernel", "DONE", 2.0)
    loss, _ = turn_loss(backbone, turn)
    with torch.no_grad():
        logits = backbone.model(input_ids=torch.tensor([turn.prompt_ids + turn.completion_ids])).logits[0]
    logp = torch.log_softmax(logits.float(), -1)
    n = len(turn.prompt_ids)
    expected = -2.0 * torch.stack([logp[n - 1 + i, tok] for i, tok in enumerate(turn.completion_ids)]).mean()
    assert float(loss) == pytest.approx(float(expected), rel=1e-4)


# episodes with the real judge -------------------------------------------------------------------------------

def _episode_config(**kw):
    values = {"max_turns": 1, "eval_options": FAST, "gate_runs": 1, "selection_tokens": 8,
              "policy_tokens": 12, "summary_tokens": 12, "task_ids": [RELU, "L1/7_GELU"]}
    values.update(kw)
    return EpisodeConfig(**values)


@pytest.mark.slow
def test_episode_is_role_tagged_and_the_summary_goes_to_the_gate(tmp_path, pool):
    """Teachers for all roles: select -> policy turn (the bundled ReLU) -> summary -> the real gate."""
    from kernelgym.agents.davinci.episode import EpisodeRunner, Teacher
    from kernelgym.skill_store import SkillStore

    store = SkillStore(tmp_path / "skills.sqlite")
    runner = EpisodeRunner(_episode_config(), None, store, pool)
    summary = roles.teacher_summary("1_ReLU", "elementwise", "memory", _source(RELU))
    traj = runner.run(RELU, Teacher(policy_replies=[f"```python\n{_source(RELU)}\n```"],
                                    selection=["cpp-openmp-simd-elementwise"], summary=summary))
    runner.close()
    assert [t.role for t in traj.turns] == ["selection", "policy", "summary"]
    assert traj.selected_ids[0] == "cpp-openmp-simd-elementwise" and traj.verdicts == ["ok"]
    if traj.best_verified_speedup <= 1.0:  # no verified speedup under this short timing: no gate call
        assert runner.gate_calls == 0 and traj.summary_status == "unverified"
        fields = roles.parse_summary(traj.role_turns("summary")[0].text)
        runner._submit(traj, roles.candidate_from_summary(fields, task_id=traj.task_id, backend="cpp",
                                                          size=traj.size, source=traj.best_source))
    assert runner.gate_calls == 1 and traj.summary_status in ("admitted", "rejected")
    stored = store.get(traj.candidate_id)  # the gate's decision is in the store, with its run
    assert stored.provenance.source == "distilled" and stored.history[-1].verdicts == ["ok"]
    assert stored.status == traj.summary_status


def test_a_policy_turns_verdict_keeps_the_judges_reasons_in_the_trajectory(tmp_path, pool):
    """A run's trajectories tell which rule charged a reply (10 honest replies of a GPU-host run were judged
    `hack`, and the trajectories could not say why)."""
    from kernelgym.agents.davinci.episode import EpisodeRunner, Teacher

    passthrough = ("import torch\nimport torch.nn as nn\nfrom kernelgym.kernels import load_cpp\n\n"
                   "_lib = load_cpp(r\'\'\'\n#include <cstdint>\n"
                   "extern \"C\" void touch(const float* x, float* y, int64_t n) {\n"
                   "    if (n) y[0] = x[0] > 0 ? x[0] : 0;\n}\n"
                   "\'\'\'.strip())\n\n"
                   "class ModelNew(nn.Module):\n    def forward(self, x):\n"
                   "        y = torch.relu(x)  # PyTorch does the work\n"
                   "        _lib.touch(x, y, 1)\n        return y\n")
    runner = EpisodeRunner(_episode_config(summarize="never"), None, None, pool)
    traj = runner.run(RELU, Teacher(policy_replies=[f"```python\n{passthrough}```"], selection=[]))
    runner.close()
    policy = traj.role_turns("policy")[0]
    assert traj.verdicts == ["hack"] and policy.meta["verdict"] == "hack"
    assert policy.meta["reasons"] and all(isinstance(r, str) and r for r in policy.meta["reasons"])


@pytest.mark.slow
def test_sft_step_on_replayed_bundled_solutions(tmp_path, pool, tiny_qwen):
    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.agents.davinci.sft import run_sft

    cfg = SFTConfig(backbone=BackboneConfig(model=str(tiny_qwen), max_prompt_tokens=768, threads=1),
                    episode=_episode_config(task_ids=[RELU]), output_dir=str(tmp_path / "sft"), max_steps=1,
                    batch_size=1, max_length=4000, data=SFTDataConfig(replay_backend="cpp"))
    result = run_sft(cfg, backbone=_backbone(tiny_qwen), pool=pool, report_to=[])
    assert result.examples == {"selection": 1, "policy": 1, "summary": 1}
    rows = [json.loads(line) for line in (tmp_path / "sft" / "sft_data.jsonl").read_text().splitlines()]
    assert {r["role"] for r in rows} == {"selection", "policy", "summary"}
    assert "extern" in next(r for r in rows if r["role"] == "policy")["completion"]
    assert result.train_loss["all"] > 0
    Backbone(BackboneConfig(model=str(result.output_dir)))  # the checkpoint loads as a backbone


@pytest.mark.slow
def test_two_rl_steps_end_to_end_then_resume(tmp_path, pool, tiny_qwen):
    from kernelgym.agents.davinci.rl import run_rl

    cfg = RLConfig(backbone=BackboneConfig(model=str(tiny_qwen), max_prompt_tokens=768, threads=1),
                   episode=_episode_config(max_turns=2), output_dir=str(tmp_path / "rl"), steps=2,
                   tasks_per_step=1, group_size=2, lr=1e-3, save_every=1, kl_coef=0.1)
    result = run_rl(cfg, backbone=_backbone(tiny_qwen), pool=pool)
    assert result.steps_done == 2
    for group in result.last_groups:
        assert len(group) == 2
        for role in ("selection", "policy"):
            turns = [t for traj in group for t in traj.role_turns(role)]
            assert turns and all(t.completion_ids and not t.teacher for t in turns)
            if role == "selection":  # one per rollout, leave-one-out: the two advantages cancel
                assert sum(t.advantage for t in turns) == pytest.approx(0.0, abs=1e-9)
        for traj in group:  # garbage replies: failed turns, so nothing to summarize
            assert traj.verdicts and "ok" not in traj.verdicts and traj.summary_status == "skipped"
    stats = result.last_stats
    assert stats.tokens["selection"] > 0 and stats.tokens["policy"] > 0 and stats.tokens["summary"] == 0
    out = tmp_path / "rl"
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 2
    episodes = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(episodes) == 4 and {t["role"] for e in episodes for t in e["turns"]} == {"selection", "policy"}
    assert (out / "checkpoint-2" / "optimizer.pt").is_file() and any((out / "tensorboard").iterdir())

    resumed = run_rl(RLConfig(**{**cfg.__dict__, "steps": 3}), pool=pool, tensorboard=False)
    assert resumed.steps_done == 3 and len((out / "metrics.jsonl").read_text().splitlines()) == 3


# bench and command line -------------------------------------------------------------------------------------

def test_bench_baseline_with_a_davinci_checkpoint(tmp_path, tiny_qwen, env_factory):
    """`--policy davinci:CKPT --baseline davinci`: the selection role reranks, the policy writes."""
    from kernelgym.agents import baselines
    from kernelgym.agents.policies import make_policy

    policy = make_policy(f"davinci:{tiny_qwen}?max_new_tokens=8&selection_tokens=8&max_prompt_tokens=768")
    env = env_factory(max_turns=1)
    db = str(tmp_path / "skills.sqlite")
    on = baselines.make_config("davinci", skills_db=db)
    [record] = baselines.run("davinci", env, policy, [RELU], on)
    assert record.turns[0].notes.startswith("skills: ") and record.turns[0].verdict == "no_code"
    assert policy.calls == {"selection": 1, "policy": 1}
    [record] = baselines.run("davinci", env, policy, [RELU], baselines.make_config("davinci", skills_db=db,
                                                                                    rerank="off"))
    assert record.turns[0].notes != "skills: " and policy.calls["selection"] == 1  # BM25 alone
    [record] = baselines.run("davinci", env, policy, [RELU], baselines.make_config("davinci", skills="off"))
    assert record.turns[0].notes == "skills: " and policy.calls["selection"] == 1


def test_train_command_reads_file_and_overrides(tmp_path):
    from typer.testing import CliRunner

    from kernelgym.cli import app

    path = tmp_path / "sft.json"
    path.write_text(json.dumps({"epochs": 1, "data": {"dedup": "minhash"}}))
    result = CliRunner().invoke(app, ["train", "sft", "--config", str(path), "--print-config", "lr=0.001",
                                      "data.per_task_cap=1"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert (shown["epochs"], shown["lr"], shown["data"]["dedup"], shown["data"]["per_task_cap"]) == \
        (1, 0.001, "minhash", 1)
    bad = CliRunner().invoke(app, ["train", "rl", "--print-config", "episode.turns=3"])
    assert bad.exit_code == 1 and "episode.turns" in bad.output


@pytest.mark.slow
def test_smollm2_backbone_is_trainable(tmp_path):
    """The offline SmolLM2 copy loads without the GGUF quantization_config, TRL's SFTTrainer accepts it, and
    one REINFORCE step raises the log-probability of a rewarded reply."""
    from datasets import Dataset
    from trl import SFTConfig as TRLSFTConfig
    from trl import SFTTrainer

    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.agents.davinci.reinforce import make_optimizer, reinforce_step

    backbone = Backbone(BackboneConfig(model="smollm2", max_prompt_tokens=256, threads=1))
    assert getattr(backbone.model.config, "quantization_config", None) is None
    rows = [{"prompt": [{"role": "user", "content": "hi"}],
             "completion": [{"role": "assistant", "content": "ok"}]}]
    args = TRLSFTConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to=[], max_steps=1)
    SFTTrainer(model=backbone.model, processing_class=backbone.tokenizer,
               train_dataset=Dataset.from_list(rows), args=args)
    turn = _fixed_turn(backbone, "selection", "Pick skills for a ReLU task.",
                       '["cpp-openmp-simd-elementwise"]', 1.0)
    traj = Trajectory("bundled/L1/1_ReLU", "activation", "cpp", "cpu", turns=[turn])
    before = float(backbone.token_logprobs("selection", turn.prompt_ids, turn.completion_ids).sum())
    reinforce_step(backbone, make_optimizer(backbone, lr=1e-4), [traj])
    after = float(backbone.token_logprobs("selection", turn.prompt_ids, turn.completion_ids).sum())
    assert after > before
