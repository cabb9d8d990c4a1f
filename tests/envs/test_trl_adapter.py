"""The TRL adapter: the environment_factory contract, the rollout_func path, and GRPOTrainer on the CPU.

The trainer tests use a tiny random Qwen3 and a tokenizer trained here (nothing is downloaded); a random
model never writes a valid kernel, so they check the wiring (episodes run, rewards reach the trainer, env
tokens are masked), while the tool itself is exercised with the bundled solution.
"""

from __future__ import annotations

import inspect
import os

import gymnasium as gym
import pytest

from kernelgym.envs.trl_adapter import KernelToolEnv, environment_factory, make_rollout_func, rollout_reward
from kernelgym.solutions import examples

FAST = {"timing_trials": 10, "timing_budget_s": 0.5}


@pytest.fixture(scope="module")
def relu_source():
    return next(e for e in examples("cpp") if e.task_id == "bundled/L1/1_ReLU").source


def test_only_the_tool_is_public():
    public = {name for name, _ in inspect.getmembers(KernelToolEnv, predicate=inspect.isfunction)
              if not name.startswith("_")}
    # TRL exposes every other public method as a tool
    assert public == {"reset", "submit_kernel", "get_reward"}


def test_submit_kernel_schema():
    pytest.importorskip("transformers")
    from transformers.utils import get_json_schema

    schema = get_json_schema(KernelToolEnv.submit_kernel)["function"]
    assert schema["name"] == "submit_kernel"
    assert schema["parameters"]["required"] == ["code"]
    assert schema["parameters"]["properties"]["code"]["type"] == "string"
    assert "ModelNew" in schema["parameters"]["properties"]["code"]["description"]


def test_tool_episode(pool, relu_source):
    env = environment_factory("KernelGym-L1-v0", size="cpu", backend="cpp", pool=pool, eval_options=FAST,
                              max_turns=2)()
    statement = env.reset(prompt=[{"role": "user", "content": ""}], task_id="L1/1_ReLU")
    assert statement.startswith("Task: bundled/L1/1_ReLU") and "submit_kernel" in statement
    feedback = env.submit_kernel(relu_source)  # bare source: no fences needed
    assert "Verdict: ok" in feedback and "Submissions left: 1" in feedback
    assert env.get_reward() >= 0.1
    feedback = env.submit_kernel("def broken(:")
    assert "compile_error" in feedback and "No submissions left" in feedback
    assert env.submit_kernel(relu_source).startswith("The episode is over")
    assert env.get_reward() >= 0.1  # the best turn by default
    env.reset(task_id="L1/1_ReLU")
    assert env.get_reward() == -1.0  # never submitted: scored as a reply without code


def test_episode_reward_choices(pool, relu_source):
    env = KernelToolEnv("KernelGym-L1-v0", episode_reward="last", size="cpu", backend="cpp", pool=pool,
                        eval_options=FAST)
    env.reset(task_id="L1/1_ReLU")
    env.submit_kernel(relu_source)
    env.submit_kernel("x = (")
    assert env.get_reward() == -1.0
    with pytest.raises(Exception, match="episode_reward"):
        KernelToolEnv(episode_reward="median")


def test_reset_draws_a_task_without_task_id(kernelbench_root):
    env = KernelToolEnv("KernelBench-L1-v0", kernelbench_root=str(kernelbench_root))
    a = env.reset(seed=4)
    assert a.startswith("Task: kernelbench/L1/") and env.reset(seed=4) == a


# GRPOTrainer on the CPU ----------------------------------------------------------------------------------

def _tiny_tokenizer_and_model():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM
    from trl.chat_template_utils import qwen3_chat_template

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>",
               "</tool_call>", "<tool_response>", "</tool_response>"]
    env = gym.make("KernelGym-L1-v0", size="cpu", backend="cpp")
    corpus = [env.reset(seed=s)[0]["prompt"] for s in range(3)] + [qwen3_chat_template]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=1000, special_tokens=special,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                        pad_token="<|endoftext|>", chat_template=qwen3_chat_template)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                         max_position_embeddings=16384,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
    return tokenizer, Qwen3ForCausalLM(config)


def _config(tmp_path, **overrides):
    from trl import GRPOConfig

    values = {"output_dir": str(tmp_path / "out"), "max_steps": 1, "per_device_train_batch_size": 2,
              "num_generations": 2, "max_completion_length": 24, "use_cpu": True, "bf16": False,
              "report_to": [], "logging_steps": 1, "save_strategy": "no", "learning_rate": 1e-4, "seed": 0}
    values.update(overrides)
    return GRPOConfig(**values)


@pytest.mark.slow
def test_grpo_trainer_with_environment_factory(tmp_path, monkeypatch):
    pytest.importorskip("trl")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl import GRPOTrainer

    from kernelgym.envs.trl_adapter import task_dataset

    tokenizer, model = _tiny_tokenizer_and_model()
    env_kwargs = {"size": "cpu", "backend": "cpp", "eval_options": FAST, "task_ids": ["L1/1_ReLU"]}
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, args=_config(tmp_path),
                          train_dataset=task_dataset("KernelGym-L1-v0", repeat=2, **env_kwargs),
                          environment_factory=environment_factory("KernelGym-L1-v0", **env_kwargs))
    result = trainer.train()
    assert result.global_step == 1
    logs = trainer.state.log_history[0]
    assert logs["rewards/KernelToolEnv/mean"] == -1.0  # no valid tool call from a random model: failed turns


@pytest.mark.slow
def test_grpo_trainer_with_rollout_func(tmp_path, monkeypatch):
    pytest.importorskip("trl")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl import GRPOTrainer

    from kernelgym.envs.trl_adapter import task_dataset

    tokenizer, model = _tiny_tokenizer_and_model()
    path = tmp_path / "traj.jsonl"
    env_kwargs = {"size": "cpu", "backend": "cpp", "eval_options": FAST, "max_turns": 2}
    rollout = make_rollout_func("KernelGym-L1-v0", max_new_tokens=6, trajectory_path=str(path), **env_kwargs)
    dataset = task_dataset("KernelGym-L1-v0", prompts="full", repeat=2, task_ids=["L1/1_ReLU"], **env_kwargs)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer,
                          args=_config(tmp_path, max_completion_length=600),
                          reward_funcs=rollout_reward, train_dataset=dataset, rollout_func=rollout)

    # One rollout by hand: two replies (up to 6 tokens each) with the judge's feedback (masked) between them.
    out = rollout([dataset[0]["prompt"]], trainer)
    assert set(out) >= {"prompt_ids", "completion_ids", "logprobs", "env_mask", "kernelgym_reward"}
    mask = out["env_mask"][0]
    assert len(mask) == len(out["completion_ids"][0]) == len(out["logprobs"][0])
    assert mask[0] == 1 and mask[-1] == 1 and 0 in mask and sum(mask) <= 12
    assert out["kernelgym_reward"] == [-1.0] and out["kernelgym_info"][0]["task_id"] == "bundled/L1/1_ReLU"

    result = trainer.train()
    assert result.global_step == 1
    assert trainer.state.log_history[0]["rewards/rollout_reward/mean"] == -1.0
    from kernelgym.envs import read_episodes

    episodes = read_episodes(path)
    assert len(episodes) == 3 and all(len(e["turns"]) == 2 for e in episodes)
    assert os.path.getsize(path) > 0
