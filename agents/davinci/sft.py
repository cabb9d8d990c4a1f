"""SFT cold start: build the filtered role-formatted data, then TRL's SFTTrainer on the backbone.

With LoRA, each role's adapter is trained on that role's examples only (one SFTTrainer pass per role,
the others' adapters untouched); without it, one pass trains the shared weights on all roles' examples.
The result is a Backbone checkpoint that `BackboneConfig(model=...)` and the RL phase load.

An example longer than `max_length` tokens (prompt and completion in the chat template) is dropped, not
truncated: TRL cuts the end of a long row, and a solution without its end token teaches the model not to
stop. `backbone.mixed_precision="bf16"` trains under bf16 autocast with fp32 master weights (the Trainer's
bf16) and `backbone.gradient_checkpointing` turns on the Trainer's checkpointing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelgym.agents.davinci import sft_data
from kernelgym.agents.davinci.config import ROLES, SFTConfig, check_training, to_dict
from kernelgym.errors import ConfigError


@dataclass
class SFTResult:
    output_dir: Path
    examples: dict[str, int] = field(default_factory=dict)  # per role, after filtering
    filter_report: dict[str, int] = field(default_factory=dict)
    train_loss: dict[str, float] = field(default_factory=dict)  # per pass ("all" or a role)


def build_examples(config: SFTConfig, runner=None) -> tuple[list[sft_data.Example], sft_data.FilterReport]:
    """Every configured source, then the diversity filter."""
    examples: list[sft_data.Example] = []
    if config.data.replay_backend:
        if runner is None:
            raise ConfigError("replaying the bundled solutions needs an EpisodeRunner")
        examples += sft_data.replay_examples(runner, config.data.replay_backend, config.episode.task_ids)
    for path in config.data.bench_runs:
        examples += sft_data.turn_examples(sft_data._read_jsonl(path), f"bench:{path}")
    for path in config.data.external:
        examples += sft_data.jsonl_examples(path)
    examples, _ = sft_data.drop_heldout(examples)  # the curriculum's held-out tasks are never trained on
    return sft_data.filter_examples(examples, config.data)


def example_tokens(tokenizer, example: sft_data.Example) -> int:
    """Tokens of the whole row as the trainer sees it: the prompt and the completion in the chat template."""
    messages = [*example.messages, {"role": "assistant", "content": example.completion}]
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template(messages, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return len(ids) + 1  # and the end token
    text = "\n\n".join(f"{m['role']}: {m['content']}" for m in messages)
    return len(tokenizer(text)["input_ids"]) + 1


def fit_length(examples: list[sft_data.Example], tokenizer, max_length: int
               ) -> tuple[list[sft_data.Example], int]:
    """The examples that fit in `max_length` tokens whole, and how many were dropped."""
    kept = [e for e in examples if example_tokens(tokenizer, e) <= max_length]
    return kept, len(examples) - len(kept)


def trainer_args(config: SFTConfig, name: str, report_to: list[str] | None = None):
    """TRL's SFTConfig for one pass (all roles, or one role's adapter)."""
    from trl import SFTConfig as TRLSFTConfig

    bf16 = config.backbone.mixed_precision == "bf16"  # autocast over fp32 master weights
    checkpointing = {}
    if config.backbone.gradient_checkpointing:  # transformers 5 calls it activation checkpointing
        names = {f.name for f in dataclasses.fields(TRLSFTConfig)}
        word = "activation" if "activation_checkpointing" in names else "gradient"
        checkpointing = {f"{word}_checkpointing": True,
                         f"{word}_checkpointing_kwargs": {"use_reentrant": False}}
    return TRLSFTConfig(
        output_dir=str(Path(config.output_dir) / "trainer" / name), num_train_epochs=config.epochs,
        max_steps=config.max_steps, learning_rate=config.lr,
        per_device_train_batch_size=config.batch_size, max_length=config.max_length,
        use_cpu=config.backbone.device == "cpu", bf16=bf16, logging_steps=1, save_strategy="no",
        **checkpointing,
        report_to=report_to if report_to is not None else ["tensorboard"],
        completion_only_loss=True, seed=config.data.seed,  # TensorBoard: trainer/<pass>/runs
    )


def train_sft(config: SFTConfig, examples: list[sft_data.Example], backbone, *,
              report_to: list[str] | None = None) -> dict[str, float]:
    """SFTTrainer passes over the examples; returns the final training loss of each pass."""
    from trl import SFTTrainer

    if not examples:
        raise ConfigError("no SFT examples survived (check the sources and the filter settings)")
    passes = {role: [e for e in examples if e.role == role] for role in ROLES} if backbone.lora else \
        {"all": list(examples)}
    losses = {}
    for name, subset in passes.items():
        if not subset:
            continue
        args = trainer_args(config, name, report_to)
        role_ctx = backbone.role(name) if name in ROLES else contextlib.nullcontext(backbone.model)
        with role_ctx as model:
            trainer = SFTTrainer(model=model, args=args, train_dataset=sft_data.to_dataset(subset),
                                 processing_class=backbone.tokenizer)
            result = trainer.train()
        losses[name] = float(result.training_loss)
    return losses


def run_sft(config: SFTConfig, *, backbone=None, pool=None, report_to: list[str] | None = None) -> SFTResult:
    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.agents.davinci.episode import EpisodeRunner
    from kernelgym.skill_store import SkillStore

    check_training(config.backbone)
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(to_dict(config), indent=1))
    backbone = backbone or Backbone(config.backbone)
    with _pool(pool, config.workers) as judge:
        store = SkillStore(config.episode.skills_db or out / "skills.sqlite")
        runner = EpisodeRunner(config.episode, None, store, judge)  # teachers answer every role
        try:
            examples, report = build_examples(config, runner)
        finally:
            runner.close()
            store.close()
    examples, too_long = fit_length(examples, backbone.tokenizer, config.max_length)
    report.too_long, report.kept = too_long, report.kept - too_long
    if config.save_data:
        sft_data.write_examples(examples, out / "sft_data.jsonl")
    losses = train_sft(config, examples, backbone, report_to=report_to)
    backbone.save(out / "model")
    counts = {role: sum(e.role == role for e in examples) for role in ROLES}
    result = SFTResult(out / "model", counts, report.to_dict(), losses)
    (out / "sft_result.json").write_text(json.dumps({**result.__dict__, "output_dir": str(result.output_dir)},
                                                    indent=1))
    return result


@contextlib.contextmanager
def _pool(pool: Any, workers: int):
    if pool is not None:
        yield pool
        return
    from kernelgym import EvalPool

    with EvalPool(workers=workers) as own:
        yield own
