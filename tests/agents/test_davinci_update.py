"""The RL update in micro-batches: several turns of a role right-padded into one forward pass give each turn
the log-probs of one turn at a time.

A tiny random Llama (agents/tiny.py) with a LoRA adapter per role, moved away from its KL reference; the
turns are sampled from it, so a top_p nucleus holds their tokens.
"""

from __future__ import annotations

import pytest

from kernelgym.agents.davinci.config import BackboneConfig
from kernelgym.agents.davinci.trajectory import RoleTurn

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
