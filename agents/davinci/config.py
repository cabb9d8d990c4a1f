"""Config dataclasses of the daVinci agent and its trainers, settable from a file and the command line.

`load_config(RLConfig, "rl.toml", ["episode.max_turns=2", "lr=1e-5"])` reads a TOML or JSON file into the
dataclass (nested sections for nested dataclasses), then applies dotted `key=value` overrides; an unknown
key anywhere is a ConfigError naming the known ones.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.errors import ConfigError

ROLES = ("selection", "policy", "summary")


@dataclass
class BackboneConfig:
    model: str = "smollm2"  # "smollm2", a local checkpoint folder, or an SFT/RL output folder
    dtype: str = "float32"
    device: str = "cpu"
    threads: int | None = None  # CPU threads for torch (None: half the cores)
    # LoRA: one adapter per role over the shared base (role by adapter and prompt); off: one set of weights,
    # the role given by the prompt alone.
    lora: bool = False
    lora_rank: int = 8
    lora_alpha: int = 16
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    # Longer prompts are cut in the middle of their longest message. A prompt holds the task, the skills and
    # the last (reply, feedback) pair, and a whole solution is 1-4.5k tokens: 6144 keeps one. A model whose
    # context is shorter than prompt + new tokens gets its prompt cut to fit.
    max_prompt_tokens: int = 6144
    # Memory plan (agents/davinci/backbone.py): a 7B model does not fit in fp32 full fine-tuning with Adam.
    # mixed_precision="bf16": the forward and backward run under torch.autocast(bfloat16) while the weights,
    # gradients and optimizer state stay in `dtype` (fp32 master weights). With lora=true, dtype="bfloat16"
    # keeps the frozen base in bf16 and only the adapters in fp32. gradient_checkpointing recomputes the
    # activations in the backward pass instead of keeping them (training forwards only).
    mixed_precision: str = "no"  # "no" or "bf16"
    gradient_checkpointing: bool = False
    # "static": generation keeps its KV cache in fixed-size buffers, and on a GPU transformers then compiles
    # the decoding step into CUDA graphs. Eager decoding dispatches about 6,000 ops a token for a 30-layer
    # model (SmolLM2-135M), about 65 ms a step on an H200 whatever the batch. Prompts are left-padded to a
    # multiple of `generation_pad_to` so that the cache takes few shapes (each new shape compiles again).
    # Under bf16 autocast over fp32 weights RoPE leaves keys fp32 and values bf16, which transformers 5.17's
    # static cache refuses (an H100 run); with lora=true, dtype="bfloat16" gives both one dtype.
    generation_cache: str = "dynamic"  # "dynamic" or "static"
    generation_pad_to: int = 256
    # On a GPU the judge also times candidates on: the policy's generation and training steps hold that GPU's
    # timing slot (kernelgym.workers.locks), so no candidate is timed beside the policy's own kernels.
    # Builds and correctness checks go on meanwhile; only timings wait.
    exclusive_gpu: bool = True


@dataclass
class EpisodeConfig:
    env_id: str = "KernelGym-L1-v0"
    # "bundled" (the env id's suite and level), or another suite for every level: "curriculum" (the generated
    # tasks of kernelgym.tasks.curriculum; its held-out split is never used for SFT or RL), a folder, ...
    suite: str = "bundled"
    backend: str = "cpp"
    size: str = "cpu"
    max_turns: int = 2  # T policy turns
    reward: str = "speedup"
    eval_options: dict[str, Any] = field(default_factory=dict)
    task_ids: list[str] | None = None  # the training split (None: all tasks of env_id)
    # Skill selection.
    skills: bool = True  # off: no skills in the policy's prompt (ablation)
    rerank: bool = True  # off: BM25 order is used as is, and the selection role never generates
    candidates: int = 6  # BM25 top-k shown to the selection role
    use_skills: int = 2  # how many chosen skills go into the policy's prompt
    skills_db: str | None = None  # None: a store in the run's output folder, seeded with the bundled library
    # Skill summary and the gate.
    # "verified": after an episode whose best solution has a verified speedup above gate_threshold (the only
    # ones the gate can admit); "correct": after any correct one, but only verified ones go to the gate;
    # "never". A teacher's summary (SFT data) is recorded whenever the solution is correct.
    summarize: str = "verified"
    gate_runs: int = 2  # re-evaluations of the solution per gate decision
    gate_threshold: float = 1.0
    # Generation, per role.
    temperature: float = 0.8
    top_p: float = 1.0
    selection_tokens: int = 64
    policy_tokens: int = 4608  # a whole solution with its end token (1.1-4.4k tokens measured)
    summary_tokens: int = 256
    history: int = 1  # earlier (reply, feedback) pairs kept in the policy's chat
    # Rows per batched generate call: the episodes of an RL step run in lockstep and each role's turn of all
    # of them is generated together (one KV cache, left padding). 1: one row at a time.
    generation_batch: int = 16


@dataclass
class RoleRewardConfig:
    gamma: float = 0.9  # discount of the policy's per-turn rewards
    # Summary. An admitted skill is credited by its later use: the mean, over later episodes on *other*
    # tasks that put it into the policy's prompt, of the episode's outcome minus its group's leave-one-out
    # baseline, times `credit`. Its summary turn waits (across steps) until `credit_uses` such episodes were
    # seen or `credit_window` steps passed, then trains with that reward. The gate's decision itself depends
    # on the policy's solution more than on the summary, so `admitted` and `rejected` are 0 by default.
    credit: float = 1.0
    credit_uses: int = 4
    credit_window: int = 5
    admitted: float = 0.0  # summary: the gate admitted the skill (added to its credit)
    rejected: float = 0.0  # summary: a well-formed skill the gate rejected (trained at once)
    malformed: float = -0.5  # summary: a reply that does not parse into a skill (trained at once)
    # Shaping (off by default; leave it off for benchmarks): added to the env reward of a judged policy turn
    # whose code built but failed afterwards (verdict incorrect, runtime_error or timeout), so a group with
    # no correct rollout still prefers the ones that compile. Keep it below the gap between a failure and a
    # correct solution (1.1 with the speedup reward) or a compiling failure would pay like a success.
    compiled_bonus: float = 0.0


@dataclass
class _TrainingConfig:
    """What SFT and RL share: the model and how an episode runs."""

    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)


@dataclass
class RLConfig(_TrainingConfig):
    rewards: RoleRewardConfig = field(default_factory=RoleRewardConfig)
    output_dir: str = "runs/davinci-rl"
    steps: int = 10
    tasks_per_step: int = 2
    group_size: int = 4  # rollouts per task: the leave-one-out baselines are taken over this group
    lr: float = 1e-5
    max_grad_norm: float = 1.0
    # > 0: k3 KL on the trained tokens to the model RL started from (the SFT model: with LoRA, its adapters;
    # after a resume still the starting model `backbone.model`, not the checkpoint)
    kl_coef: float = 0.0
    role_weights: dict[str, float] = field(default_factory=lambda: {r: 1.0 for r in ROLES})
    # The update scores a role's turns in micro-batches of one forward and one backward pass, up to this many
    # tokens of padded batch (rows x longest row, prompt + completion); 0: one turn a pass. SmolLM2's turns
    # are 1.2-1.9k tokens: 16384 holds about 10, enough rows to share a pass's fixed cost while SmolLM2-135M's
    # activations stay a small part of one GPU; a larger model without gradient checkpointing needs less.
    update_batch_tokens: int = 16384
    save_every: int = 5
    seed: int = 0
    # "uniform": tasks_per_step tasks drawn at random; "success": kernelgym.tasks.curriculum.SuccessSampler
    # (easiest difficulty first, the next unlocked by recent success, tasks weighted by p (1 - p))
    task_sampling: str = "uniform"
    workers: int = 1  # judge workers
    resume: bool = True  # continue from the latest checkpoint in output_dir
    # > 0: this call's seconds for RL. No step begins that would end past them (judged by the longest step so
    # far; the call's first step always runs), and the stop writes a checkpoint, so a machine lent for a fixed
    # time ends on a step boundary; the same command continues from there.
    max_wall_s: float = 0.0
    # Held-out evaluation at every checkpoint (agents/davinci/heldout.py): a task source (suite name, `hf`, a
    # folder of task files) whose tasks are played but never trained on. None: no held-out evaluation.
    heldout_suite: str | None = None


@dataclass
class SFTDataConfig:
    replay_backend: str | None = "cpp"  # replay the bundled example solutions of this backend (None: none)
    bench_runs: list[str] = field(default_factory=list)  # trajectories.jsonl files of bench/env runs
    external: list[str] = field(default_factory=list)  # JSONL of role-formatted examples or env turns
    dedup: str = "ast"  # "ast" (normalised-AST hash), "minhash" (near-duplicates too), "none"
    minhash_threshold: float = 0.85  # estimated Jaccard (token 5-gram shingles) from which two are duplicates
    per_task_cap: int = 4  # policy examples per task
    category_ratio: float = 3.0  # no category keeps more than ratio x the smallest category's count
    seed: int = 0


@dataclass
class SFTConfig(_TrainingConfig):
    data: SFTDataConfig = field(default_factory=SFTDataConfig)
    output_dir: str = "runs/davinci-sft"
    epochs: float = 2.0
    max_steps: int = -1
    lr: float = 5e-5
    batch_size: int = 2
    # Tokens per example (prompt + completion). An example longer than this is dropped, never truncated: a
    # cut completion loses its end token and teaches the model not to stop.
    max_length: int = 10752  # max_prompt_tokens + policy_tokens
    save_data: bool = True  # write the filtered examples to output_dir/sft_data.jsonl
    workers: int = 1


# Loading ---------------------------------------------------------------------------------------------------

def load_config(cls: type, path: str | os.PathLike | None = None, overrides: list[str] | None = None):
    """A `cls` from a TOML/JSON file (optional) and dotted `key=value` overrides."""
    data: dict[str, Any] = {}
    if path:
        data = _read_file(Path(path))
    for item in overrides or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} must be KEY=VALUE (dotted keys for sections)")
        _set_dotted(data, key.strip().split("."), _parse_value(raw.strip()))
    return build(cls, data)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        import tomllib

        return tomllib.loads(text)
    except (ValueError, json.JSONDecodeError) as exc:
        raise ConfigError(f"config {path}: {exc}") from None


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)  # numbers, true/false/null, lists, objects
    except json.JSONDecodeError:
        return raw


def _set_dotted(data: dict[str, Any], keys: list[str], value: Any) -> None:
    for key in keys[:-1]:
        data = data.setdefault(key, {})
        if not isinstance(data, dict):
            raise ConfigError(f"{key} is not a section")
    data[keys[-1]] = value


def build(cls: type, data: dict[str, Any], where: str = ""):
    """Build dataclass `cls` from a dict, recursing into nested dataclass fields; unknown keys fail."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where or cls.__name__} must be a table of settings")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise ConfigError(f"unknown setting(s) {sorted(where + k for k in unknown)}; known: {sorted(fields)}")
    hints = typing.get_type_hints(cls)
    values = {}
    for name, value in data.items():
        kind = hints[name]
        values[name] = build(kind, value, f"{where}{name}.") if dataclasses.is_dataclass(kind) else value
    return cls(**values)


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def check_training(backbone: BackboneConfig) -> None:
    """Refuse settings that would train badly: bf16 weights updated in place lose small updates."""
    if backbone.mixed_precision not in ("no", "bf16"):
        raise ConfigError(f"backbone.mixed_precision must be 'no' or 'bf16', "
                          f"not {backbone.mixed_precision!r}")
    if backbone.dtype in ("bfloat16", "float16") and not backbone.lora:
        raise ConfigError(
            f"full fine-tuning with {backbone.dtype} weights has no fp32 master copy (small updates are "
            "lost); use dtype='float32' with mixed_precision='bf16', or lora=true (the frozen base may be "
            "bf16)")
