"""KernelBench level 4 offline: 20 whole-model problems built from kept config numbers, never downloaded."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import gymnasium as gym
import pytest
import torch

from kernelgym.errors import SuiteUnavailableError
from kernelgym.evaluation.feedback import render_feedback
from kernelgym.solutions import examples
from kernelgym.tasks import level4, load_suite, resolve_task
from kernelgym.tasks.task import constant_values

# KernelBench's level-4 files: (problem id, model, batch size, sequence length).
KERNELBENCH = {
    "1_EleutherAI-gpt-neo-2p7B_bs32_seq256", "2_facebook-opt-1p3b_bs1_seq2047",
    "3_EleutherAI-gpt-neo-2p7B_bs1_seq2047", "4_facebook-opt-1p3b_bs32_seq256",
    "5_google-bigbird-roberta-base_bs1_seq4095", "6_facebook-bart-large_bs1_seq1023", "7_gpt2_bs32_seq256",
    "8_facebook-opt-1p3b_bs512_seq32", "9_google-bigbird-roberta-base_bs32_seq256",
    "10_google-bigbird-roberta-base_bs1024_seq32", "11_google-electra-small-discriminator_bs1_seq511",
    "12_google-electra-small-discriminator_bs1024_seq32", "13_google-reformer-enwik8_bs32_seq256",
    "14_google-electra-small-discriminator_bs32_seq256", "15_google-reformer-enwik8_bs1024_seq32",
    "16_gpt2_bs1_seq1023", "17_facebook-bart-large_bs1024_seq32", "18_EleutherAI-gpt-neo-2p7B_bs512_seq32",
    "19_gpt2_bs1024_seq32", "20_facebook-bart-large_bs32_seq256",
}


@pytest.fixture(autouse=True)
def empty_hf_cache(monkeypatch, tmp_path):
    """No Hugging Face cache and no network: what an offline user has."""
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path / "hf" / "hub"


def _cache_config(hub, model_name: str, config: dict) -> None:
    repo = hub / f"models--{model_name.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text(json.dumps(config))


def _module(source: str) -> types.ModuleType:
    module = types.ModuleType("level4_problem")
    exec(compile(source, "<level4>", "exec"), module.__dict__)  # noqa: S102 (our own generated problem)
    return module


def test_the_twenty_problems_load_offline_with_kernelbench_names_and_sizes():
    tasks = list(load_suite("kernelbench", level=4))  # no checkout, no KERNELBENCH_ROOT, no Hub
    assert {t.id.split("/")[-1] for t in tasks} == KERNELBENCH
    for task in tasks:
        stem = task.id.split("/")[-1]
        batch, seq = (int(part[2:] if part.startswith("bs") else part[3:]) for part in stem.split("_")[-2:])
        values = constant_values(task.source)
        assert (values["batch_size"], values["sequence_length"]) == (batch, seq)
        assert task.has_size("cpu") and ".from_pretrained(" not in task.source
    assert resolve_task("kernelbench/L4/7_gpt2_bs32_seq256").id == "kernelbench/L4/7_gpt2_bs32_seq256"


@pytest.mark.slow
def test_every_reference_runs_at_the_cpu_size():
    for task in level4.tasks():
        module = _module(task.source_at("cpu"))
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        (tokens,) = module.get_inputs()
        with torch.no_grad():
            logits = model(tokens)
        assert logits.shape == (*tokens.shape, module.vocab_size), task.id
        assert torch.isfinite(logits).all(), task.id


def test_the_real_config_is_used_where_the_local_cache_holds_it(empty_hf_cache):
    real = {**level4.kept_config("gpt2"), "n_layer": 3, "architectures": ["GPT2LMHeadModel"]}
    _cache_config(empty_hf_cache, "gpt2", real)
    source = resolve_task("kernelbench/L4/7_gpt2_bs32_seq256").source
    assert "n_layer = 3" in source and "local Hugging Face cache" in source
    kept = resolve_task("kernelbench/L4/1_EleutherAI-gpt-neo-2p7B_bs32_seq256").source
    assert "num_layers = 32" in kept and "kept in kernelgym" in kept


def test_a_problem_that_cannot_be_built_is_named_at_make(empty_hf_cache):
    # A cached GPT-Neo config that its config class refuses (32 attention types for 3 layers).
    bad = {**level4.kept_config("EleutherAI/gpt-neo-2.7B"), "num_layers": 3}
    _cache_config(empty_hf_cache, "EleutherAI/gpt-neo-2.7B", bad)
    named = r"3_EleutherAI-gpt-neo-2p7B_bs1_seq2047: transformers .* cannot build"
    with pytest.warns(UserWarning, match=named):
        env = gym.make("KernelBench-L4-v0", backend="cpp", size="cpu")
    assert len(env.unwrapped.tasks) == 17
    asked = "L4/1_EleutherAI-gpt-neo-2p7B_bs32_seq256"
    with pytest.raises(SuiteUnavailableError, match=f"{asked}: transformers"):
        gym.make("KernelBench-L4-v0", backend="cpp", size="cpu", task_ids=[asked])


def test_without_transformers_make_says_what_to_install():
    code = ("import sys; sys.modules['transformers'] = None\n"
            "import gymnasium as gym, kernelgym\n"
            "try:\n    gym.make('KernelBench-L4-v0', backend='cpp', size='cpu')\n"
            "except kernelgym.KernelGymError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "7_gpt2_bs32_seq256: level 4 builds its models with transformers" in out
    assert "pip install" in out


@pytest.mark.slow
def test_the_bundled_gpt2_solution_is_judged_ok(pool):
    found = examples("cpp", suite="kernelbench")
    (solution,) = [e for e in found if e.task_id == "kernelbench/L4/7_gpt2_bs32_seq256"]
    task = resolve_task(solution.task_id)
    result = pool.evaluate(task, solution.source, backend="cpp", size="cpu")
    assert result.verdict.value == "ok", render_feedback(result)


def test_fetching_the_real_configs_offline_is_one_clear_error(monkeypatch):
    # The Hub's own offline switch: the same failure as a machine without internet, without its ~20 s of
    # connection retries, and the same on a machine that has internet.
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(SuiteUnavailableError, match="could not fetch gpt2's config.json .*kept numbers"):
        level4.fetch_configs()
