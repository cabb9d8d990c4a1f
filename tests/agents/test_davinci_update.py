"""The RL update in micro-batches: several turns of a role right-padded into one forward and one backward pass
give each turn the log-probs, and the step the gradient and StepStats, of one turn at a time.

A tiny random Llama (agents/tiny.py) with a LoRA adapter per role, moved away from its KL reference so that
the KL term has a gradient too; the turns are sampled from it, so a top_p nucleus holds their tokens.
"""

from __future__ import annotations

import pytest

from kernelgym.agents.davinci.config import BackboneConfig
from kernelgym.agents.davinci.trajectory import RoleTurn, Trajectory

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def backbone(tmp_path_factory):
    import torch

    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.agents.tiny import make_tiny_model

    folder = make_tiny_model(tmp_path_factory.mktemp("tiny-update"))
    model = Backbone(BackboneConfig(model=str(folder), threads=1, lora=True, lora_rank=4))
    model.snapshot_reference()  # the reference: the adapters as they start (adding nothing)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # the trained adapters move away from it
        for name, param in model.model.named_parameters():
            if "lora_B" in name and "ref_" not in name:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    return model


def _sampled(backbone, role, words, new_tokens, temperature=0.8, top_p=1.0, advantage=1.0) -> RoleTurn:
    import torch

    torch.manual_seed(len(words) * 100 + new_tokens)
    reply = backbone.generate(role, [{"role": "user", "content": " ".join(words)}], max_new_tokens=new_tokens,
                              temperature=temperature, top_p=top_p)
    return RoleTurn(role, reply.prompt_ids, reply.completion_ids, reply.text, reward=advantage,
                    advantage=advantage, temperature=reply.temperature, top_p=reply.top_p)


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_a_batch_gives_each_pair_its_own_logprobs(backbone, top_p):
    import torch

    turns = [_sampled(backbone, "policy", ["relu"] * words, new_tokens, top_p=top_p)
             for words, new_tokens in ((3, 9), (11, 4), (6, 12))]
    pairs = [(t.prompt_ids, t.completion_ids) for t in turns]
    assert len({len(p) + len(c) for p, c in pairs}) == 3  # the rows are padded to the longest
    for reference in (False, True):
        batched = backbone.token_logprobs_batch("policy", pairs, reference=reference, temperature=0.8,
                                                top_p=top_p)
        for (prompt, completion), logprobs in zip(pairs, batched, strict=True):
            alone = backbone.token_logprobs("policy", prompt, completion, reference=reference,
                                            temperature=0.8, top_p=top_p)
            assert logprobs.shape == (len(completion),)
            # equal -inf too: the reference's nucleus need not hold what the trained adapter sampled
            torch.testing.assert_close(logprobs, alone, rtol=1e-5, atol=1e-5)
    sampled_from = backbone.token_logprobs_batch("policy", pairs, temperature=0.8, top_p=top_p)
    assert all(bool(torch.isfinite(logprobs).all()) for logprobs in sampled_from)
    if top_p < 1.0:  # the nucleus renormalises: its tokens are more likely than under the full softmax
        full = backbone.token_logprobs_batch("policy", pairs, temperature=0.8, top_p=1.0)
        assert all(bool((cut > whole + 1e-4).all()) for cut, whole in zip(sampled_from, full, strict=True))


def _trajectories(backbone) -> list[Trajectory]:
    """Two episodes' turns: prompts and replies of different lengths, advantages of both signs and 0, and two
    policy sampling temperatures (one micro-batch each)."""
    first, second = (Trajectory(f"bundled/L1/{i}", "elementwise", "cpp", "cpu") for i in (1, 2))
    first.turns = [_sampled(backbone, "selection", ["pick"] * 2, 5, advantage=0.5),
                   _sampled(backbone, "policy", ["relu"] * 4, 12, advantage=1.0),
                   _sampled(backbone, "policy", ["relu"] * 9, 6, advantage=-0.7),
                   _sampled(backbone, "policy", ["gelu"] * 2, 8, temperature=1.0, advantage=0.3)]
    second.turns = [_sampled(backbone, "selection", ["pick"] * 7, 3, advantage=-0.5),
                    _sampled(backbone, "policy", ["relu"] * 1, 10, advantage=0.0),
                    _sampled(backbone, "policy", ["relu"] * 6, 4, advantage=0.4),
                    _sampled(backbone, "policy", ["gelu"] * 5, 7, temperature=1.0, advantage=-1.2),
                    _sampled(backbone, "summary", ["sum"] * 3, 6, advantage=0.8)]
    return [first, second]


def _gradients_and_stats(backbone, trajectories, **kw):
    from kernelgym.agents.davinci.reinforce import accumulate

    backbone.model.train()
    params = backbone.trainable_parameters()
    for param in params:
        param.grad = None
    stats = accumulate(backbone, trajectories, role_weights={"policy": 2.0}, **kw)
    return [None if p.grad is None else p.grad.clone() for p in params], stats


@pytest.mark.parametrize("kl_coef", [0.0, 0.1])
def test_micro_batches_give_the_gradient_and_stats_of_one_turn_at_a_time(backbone, kl_coef, monkeypatch):
    import torch

    trajectories = _trajectories(backbone)
    one_by_one, one_stats = _gradients_and_stats(backbone, trajectories, kl_coef=kl_coef, batch_tokens=0)

    rows = []
    batch_pass = backbone.token_logprobs_batch

    def counting(role, pairs, **kw):
        rows.append(len(pairs))
        return batch_pass(role, pairs, **kw)

    monkeypatch.setattr(backbone, "token_logprobs_batch", counting)
    batched, stats = _gradients_and_stats(backbone, trajectories, kl_coef=kl_coef, batch_tokens=4096)
    # selection (2 turns), policy at 0.8 (4 turns; 3 where a zero advantage and no KL give no gradient) and at
    # 1.0 (2); the summary's one turn takes the one-sequence pass. The reference pass batches the same rows.
    policy = 4 if kl_coef else 3
    assert sorted(rows) == sorted([2, policy, 2] * (2 if kl_coef else 1))

    assert sum(g is not None for g in batched) > 0
    for alone, together in zip(one_by_one, batched, strict=True):
        assert (alone is None) == (together is None)
        if alone is not None:
            torch.testing.assert_close(together, alone, rtol=1e-4, atol=1e-6)
    assert (stats.turns, stats.tokens) == (one_stats.turns, one_stats.tokens)
    assert stats.mean_reward == one_stats.mean_reward
    assert stats.mean_abs_advantage == one_stats.mean_abs_advantage
    assert stats.loss == pytest.approx(one_stats.loss, rel=1e-5)
    assert stats.kl == pytest.approx(one_stats.kl, rel=1e-5) and (stats.kl > 1e-3) == (kl_coef > 0)


def test_micro_batches_group_by_sampling_and_stay_within_the_token_budget():
    from kernelgym.agents.davinci.reinforce import micro_batches

    def turn(length, temperature=0.8, top_p=1.0):
        return RoleTurn("policy", [1] * (length - 2), [2, 3], "x", temperature=temperature, top_p=top_p)

    turns = [turn(50), turn(10), turn(30), turn(20, top_p=0.9), turn(40), turn(500), turn(25, top_p=0.9)]
    batches = micro_batches(turns, 100)
    lengths = [[len(t.prompt_ids) + len(t.completion_ids) for t in batch] for batch in batches]
    assert lengths == [[10, 30], [40, 50], [500], [20, 25]]  # rows x longest <= 100, a longer turn alone
    assert [len(b) for b in micro_batches(turns, 0)] == [1] * len(turns)
    assert micro_batches([], 100) == []
