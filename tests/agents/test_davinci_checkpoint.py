"""A LoRA run's checkpoint: the optimizer in bounded files that load back exactly, the adapters reloaded in a
fresh process by `hf:FOLDER` (the policy adapter merged into its base) and by a resumed RL run. Tiny random
Llama with a tokenizer trained here (agents/tiny.py); nothing is downloaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kernelgym.agents.davinci.config import BackboneConfig, EpisodeConfig, RLConfig

pytest.importorskip("peft")

PROMPT = [{"role": "user", "content": "Write a faster ReLU with the cpp backend."}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from kernelgym.agents.tiny import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-ckpt"))


def _lora_backbone(folder):
    from kernelgym.agents.davinci.backbone import Backbone

    return Backbone(BackboneConfig(model=str(folder), lora=True, threads=1, max_prompt_tokens=512))


def _trained_step(backbone, optimizer):
    """One AdamW step on a loss that moves every role's adapter."""
    loss = sum((p.float() - 0.1).square().sum() for p in backbone.trainable_parameters())
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


def test_optimizer_state_in_bounded_files_loads_back_exactly(tiny, tmp_path):
    import torch

    from kernelgym.agents.davinci.checkpoint import load_optimizer, save_optimizer
    from kernelgym.agents.davinci.reinforce import make_optimizer

    backbone = _lora_backbone(tiny)
    optimizer = make_optimizer(backbone, 1e-3)
    _trained_step(backbone, optimizer)
    limit = 8 << 10
    files = save_optimizer(optimizer.state_dict(), tmp_path, max_file_bytes=limit)
    shards = [f for f in files if f.name != "optimizer.pt"]
    assert len(shards) > 3  # the state (about 50 KB here) was split
    for shard in shards:  # tensor bytes per shard within the limit (the file adds a zip header)
        state = torch.load(shard, weights_only=True)
        assert sum(t.numel() * t.element_size() for s in state.values() for t in s.values()
                   if torch.is_tensor(t) and t.dim() > 0) <= limit
    restored = make_optimizer(backbone, 1e-3)
    restored.load_state_dict(load_optimizer(tmp_path))
    original = optimizer.state_dict()["state"]
    loaded = restored.state_dict()["state"]
    assert original.keys() == loaded.keys()
    for index, state in original.items():
        assert torch.equal(state["exp_avg_sq"], loaded[index]["exp_avg_sq"])
        assert torch.equal(state["exp_avg"], loaded[index]["exp_avg"])


def _policy_logits(policy_spec_or_backbone, prompt_ids):
    import torch

    with torch.no_grad():
        if isinstance(policy_spec_or_backbone, str):
            from kernelgym.agents.policies import make_policy

            model = make_policy(policy_spec_or_backbone).model
            return model(input_ids=torch.tensor([prompt_ids])).logits[0, -1]
        with policy_spec_or_backbone.role("policy") as model:
            return model(input_ids=torch.tensor([prompt_ids])).logits[0, -1]


def test_a_saved_lora_backbone_reloads_in_a_fresh_process_as_hf_policy(tiny, tmp_path):
    import torch

    backbone = _lora_backbone(tiny)
    torch.manual_seed(3)
    with torch.no_grad():  # a trained policy adapter: outputs now differ from the base's
        for name, p in backbone.model.named_parameters():
            if ".policy." in name and "lora_B" in name:
                p.normal_(0.0, 0.5)
    prompt = backbone.prompt_ids(PROMPT)
    expected = _policy_logits(backbone, prompt)
    base = _policy_logits(f"hf:{tiny}", prompt)
    assert not torch.allclose(expected, base, atol=1e-3)  # the adapter matters, so the check can fail
    from kernelgym.agents.davinci.backbone import is_saved_backbone

    assert not is_saved_backbone(tmp_path / "checkpoint" / "model")
    folder = backbone.save(tmp_path / "checkpoint" / "model")
    assert (folder / "adapters" / "policy" / "adapter_model.safetensors").is_file()
    assert not any(folder.glob("*.safetensors"))  # adapters only, not the base
    assert is_saved_backbone(folder)  # a resumed run sees the SFT model it saved (no config.json with LoRA)
    code = ("import json, sys; sys.path.insert(0, sys.argv[3]); from test_davinci_checkpoint import "
            "_policy_logits; print(json.dumps(_policy_logits('hf:' + sys.argv[1], json.loads(sys.argv[2]))"
            ".tolist()))")
    here = os.path.dirname(__file__)
    done = subprocess.run([sys.executable, "-c", code, str(folder), json.dumps(prompt), here],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    reloaded = torch.tensor(json.loads(done.stdout.strip().splitlines()[-1]))
    assert torch.allclose(reloaded, expected, atol=1e-4)


@pytest.mark.slow
def test_a_lora_rl_run_resumes_from_its_checkpoint(tiny, tmp_path, pool):
    """Two RL steps with LoRA (a checkpoint after each), then a rerun to 3 steps continues from step 2 with
    the saved adapters and optimizer."""
    import torch

    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.agents.davinci.rl import run_rl

    out = tmp_path / "rl"
    cfg = RLConfig(backbone=BackboneConfig(model=str(tiny), lora=True, threads=1, max_prompt_tokens=512),
                   episode=EpisodeConfig(task_ids=["L1/1_ReLU", "L1/8_Sigmoid"], max_turns=1, policy_tokens=8,
                                         selection_tokens=8, summarize="never",
                                         eval_options={"timing_trials": 10, "profile": False}),
                   output_dir=str(out), steps=2, tasks_per_step=1, group_size=2, save_every=1, lr=1e-3)
    result = run_rl(cfg, pool=pool, tensorboard=False)
    assert result.steps_done == 2
    checkpoint = out / "checkpoint-2"
    assert (checkpoint / "optimizer.pt").is_file() and (checkpoint / "optimizer-000.pt").is_file()
    assert (checkpoint / "model" / "adapters" / "policy" / "adapter_model.safetensors").is_file()
    saved = Backbone(BackboneConfig(model=str(checkpoint / "model"), threads=1))
    assert saved.lora
    resumed = run_rl(RLConfig(**{**cfg.__dict__, "steps": 3}), pool=pool, tensorboard=False)
    assert resumed.steps_done == 3
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]
    state = json.loads((out / "checkpoint-3" / "state.json").read_text())
    assert state["step"] == 3
    again = Backbone(BackboneConfig(model=str(out / "checkpoint-3" / "model"), threads=1))
    prompt = again.prompt_ids(PROMPT)
    with torch.no_grad(), again.role("policy") as model:
        assert torch.isfinite(model(input_ids=torch.tensor([prompt])).logits).all()
