"""One LLM backbone for the three roles: generation that keeps token ids, and per-token log-probabilities.

The role picks the prompt (roles.py) and, with `BackboneConfig.lora`, a LoRA adapter of its own over the
shared base (peft, one named adapter per role; the base stays frozen). Without LoRA every role trains the
same weights. transformers, peft and torch load only when a Backbone is built.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgym.agents.davinci.config import ROLES, BackboneConfig
from kernelgym.errors import ConfigError

META_FILE = "davinci.json"  # written next to a saved backbone: the base it extends and its adapters


@dataclass
class Generated:
    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    finish_reason: str  # "stop" or "length"


def resolve_model_path(spec: str) -> str:
    if spec == "smollm2":
        from kernelgym.agents.policies.hf import smollm2_path

        return str(smollm2_path())
    if not Path(spec).expanduser().exists():
        raise ConfigError(f"model {spec!r}: no such folder (give 'smollm2' or a checkpoint folder)")
    return str(Path(spec).expanduser())


class Backbone:
    """The shared model and tokenizer; `generate(role, messages)` and `token_logprobs(role, ...)`."""

    def __init__(self, config: BackboneConfig, model: Any = None, tokenizer: Any = None):
        import torch

        self.config = config
        if config.device == "cpu":
            torch.set_num_threads(config.threads or max(1, (os.cpu_count() or 1) // 2))
        if model is None:
            model, tokenizer = _load(config)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.tokenizer = tokenizer
        self.model = model.to(config.device)
        if config.lora and not _has_role_adapters(self.model):
            self.model = _add_role_adapters(self.model, config)
        self._reference = None

    @property
    def lora(self) -> bool:
        return _has_role_adapters(self.model)

    @contextlib.contextmanager
    def role(self, role: str):
        """Activate the role's adapter (a no-op without LoRA)."""
        if role not in ROLES:
            raise ConfigError(f"unknown role {role!r}; roles: {ROLES}")
        if self.lora:
            self.model.set_adapter(role)
        yield self.model

    # prompts ---------------------------------------------------------------------------------------------

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The chat prompt's ids; an over-long prompt loses the middle of its longest message."""
        budget = self.config.max_prompt_tokens
        messages = [dict(m) for m in messages]
        for _ in range(8):
            ids = _template(self.tokenizer, messages)
            if len(ids) <= budget:
                return ids
            longest = max(range(len(messages)), key=lambda i: len(messages[i]["content"]))
            text = messages[longest]["content"]
            keep = int(len(text) * budget / len(ids) * 0.9) - 40
            if keep <= 0:
                break
            half = keep // 2
            messages[longest]["content"] = text[:half] + "\n...[cut]...\n" + text[len(text) - half:]
        return ids[-budget:]

    # generation ------------------------------------------------------------------------------------------

    def generate(self, role: str, messages: list[dict[str, str]], *, max_new_tokens: int,
                 temperature: float = 0.8, top_p: float = 1.0) -> Generated:
        import torch

        prompt = self.prompt_ids(messages)
        sampling = ({"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
                    if temperature > 0 else {"do_sample": False})
        eos = self.tokenizer.eos_token_id
        with self.role(role) as model, torch.no_grad():
            was_training = model.training
            model.eval()
            ids = torch.tensor([prompt], device=self.config.device)
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 max_new_tokens=max_new_tokens, pad_token_id=self.tokenizer.pad_token_id,
                                 eos_token_id=eos, **sampling)
            model.train(was_training)
        new = out[0, len(prompt):].tolist()
        stopped = eos in new
        if stopped:
            new = new[: new.index(eos) + 1]  # the end token is trained on too: the model learns to stop
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        return Generated(prompt, new, text, "stop" if stopped else "length")

    # training --------------------------------------------------------------------------------------------

    def token_logprobs(self, role: str, prompt_ids: list[int], completion_ids: list[int], *,
                       reference: bool = False):
        """Log-probabilities (with grad unless `reference`) of each completion token given the prompt."""
        import torch
        from trl.trainer.utils import selective_log_softmax

        ids = torch.tensor([prompt_ids + completion_ids], device=self.config.device)
        with self.role(role) as model:
            if reference:
                with torch.no_grad(), self._reference_model() as ref:
                    logits = ref(input_ids=ids).logits
            else:
                logits = model(input_ids=ids).logits
        # The logits at position p predict token p + 1: the completion's tokens are predicted from
        # positions len(prompt) - 1 ... len(ids) - 2.
        start = len(prompt_ids) - 1
        scores = logits[0, start: start + len(completion_ids)].float()
        return selective_log_softmax(scores, ids[0, len(prompt_ids):])

    @contextlib.contextmanager
    def _reference_model(self):
        """The starting model for the KL term: the base without adapters, else a frozen copy made once."""
        if self.lora:
            with self.model.disable_adapter():
                yield self.model
            return
        if self._reference is None:
            self._reference = copy.deepcopy(self.model).eval()
            for p in self._reference.parameters():
                p.requires_grad_(False)
        yield self._reference

    def trainable_parameters(self) -> list:
        if self.lora:  # every role's adapter (peft marks only the active one trainable)
            params = [p for n, p in self.model.named_parameters() if "lora_" in n]
            for p in params:
                p.requires_grad_(True)
            return params
        return [p for p in self.model.parameters() if p.requires_grad]

    def save(self, folder: str | os.PathLike) -> Path:
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {"lora": self.lora}
        if self.lora:
            for role in ROLES:
                self.model.save_pretrained(folder / "adapters", selected_adapters=[role])
            meta["base"] = str(self.model.peft_config[ROLES[0]].base_model_name_or_path or "")
        else:
            self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        (folder / META_FILE).write_text(json.dumps(meta, indent=1))
        return folder


def _template(tokenizer, messages) -> list[int]:
    if getattr(tokenizer, "chat_template", None):
        out = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if isinstance(out, dict) or hasattr(out, "keys"):
            out = out["input_ids"]
        return list(out)
    text = "\n\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\n\nassistant:"
    return list(tokenizer(text)["input_ids"])


def _load(config: BackboneConfig):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(resolve_model_path(config.model))
    meta_file = path / META_FILE
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    dtype = getattr(torch, config.dtype)
    if meta.get("lora"):  # a saved LoRA run: its base, then one adapter per role
        from peft import PeftModel

        base = AutoModelForCausalLM.from_pretrained(resolve_model_path(meta["base"]), dtype=dtype)
        adapters = path / "adapters"
        model = PeftModel.from_pretrained(base, adapters / ROLES[0], adapter_name=ROLES[0], is_trainable=True)
        for role in ROLES[1:]:
            model.load_adapter(adapters / role, adapter_name=role, is_trainable=True)
        return model, AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
    _drop_quantization_config(model)
    return model, AutoTokenizer.from_pretrained(path)


def _drop_quantization_config(model) -> None:
    # A checkpoint converted from GGUF keeps `quantization_config` although its weights are plain floats;
    # trainers (TRL, peft) then refuse it as "purely quantized".
    if getattr(model.config, "quantization_config", None) is not None:
        with contextlib.suppress(AttributeError):
            del model.config.quantization_config
    for attr in ("is_quantized", "hf_quantizer", "quantization_method"):
        if getattr(model, attr, None):
            with contextlib.suppress(AttributeError):
                setattr(model, attr, None if attr != "is_quantized" else False)


def _has_role_adapters(model) -> bool:
    return all(role in getattr(model, "peft_config", {}) for role in ROLES)


def _add_role_adapters(model, config: BackboneConfig):
    from peft import LoraConfig, get_peft_model

    def lora() -> LoraConfig:
        return LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha,
                          target_modules=config.lora_targets, lora_dropout=0.0, task_type="CAUSAL_LM")

    model = get_peft_model(model, lora(), adapter_name=ROLES[0])
    for role in ROLES[1:]:
        model.add_adapter(role, lora())
    model.peft_config[ROLES[0]].base_model_name_or_path = config.model
    for role in ROLES[1:]:
        model.peft_config[role].base_model_name_or_path = config.model
    return model
