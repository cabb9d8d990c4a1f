"""One LLM backbone for the three roles: generation that keeps token ids, and per-token log-probabilities.

The role picks the prompt (roles.py) and, with `BackboneConfig.lora`, a LoRA adapter of its own over the
shared base (peft, one named adapter per role; the base stays frozen). Without LoRA every role trains the
same weights. transformers, peft and torch load only when a Backbone is built.

Log-probabilities are those of the distribution the tokens were sampled from: `token_logprobs` takes the
turn's sampling temperature and top_p and applies them to the logits the way generation did (transformers'
own temperature and top-p warpers), so a REINFORCE update on sampled turns is not biased.
`token_logprobs_batch` gives the same for several turns of one role and one sampling setting in one forward
pass (right-padded rows): on a GPU one sequence of a small model leaves it waiting on kernel launches.

The KL reference is the model RL starts from: `snapshot_reference()` freezes a copy of the current weights
(with LoRA: a frozen copy of each role's adapter, `ref_<role>`, so the reference is the SFT adapters, not
the base without them), `load_reference(path)` takes it from a saved backbone (a resumed run).

Memory plan (`BackboneConfig`): fp32 full fine-tuning with Adam needs about 16 bytes a parameter (weights,
gradients, two moments: 112 GB for 7B) plus activations. `mixed_precision="bf16"` runs forward and backward
under bf16 autocast while weights, gradients and optimizer state stay fp32 (fp32 master weights);
`gradient_checkpointing=true` keeps one activation per layer and recomputes the rest; `lora=true` with
`dtype="bfloat16"` keeps the frozen base in bf16 (2 bytes a parameter: 14 GB for 7B) and trains small fp32
adapters. For a 7B model on one 141 GB GPU: LoRA + bf16 base + checkpointing (about 20 GB), or full
fine-tuning with bf16 autocast + checkpointing (about 115 GB).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgym.agents.davinci.config import ROLES, BackboneConfig
from kernelgym.agents.policies.hf import resolve_model_path
from kernelgym.errors import ConfigError

META_FILE = "davinci.json"  # written next to a saved backbone: the base it extends and its adapters


@dataclass
class Generated:
    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    finish_reason: str  # "stop" or "length"
    temperature: float = 1.0  # what the completion was sampled with (0: greedy)
    top_p: float = 1.0


class Backbone:
    """The shared model and tokenizer; `generate(role, messages)`, `token_logprobs(role, ...)` and
    `token_logprobs_batch(role, pairs, ...)`."""

    def __init__(self, config: BackboneConfig, model: Any = None, tokenizer: Any = None):
        import torch

        self.config = config
        if config.generation_cache not in ("dynamic", "static"):
            raise ConfigError(f"backbone.generation_cache must be 'dynamic' or 'static', "
                              f"not {config.generation_cache!r}")
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
        if config.gradient_checkpointing:
            # Non-reentrant checkpointing needs no input that requires grad (a frozen base with LoRA works).
            # transformers 5 renamed it "activation checkpointing"; older versions have the first name only.
            enable = getattr(self.model, "activation_checkpointing_enable", None) or \
                self.model.gradient_checkpointing_enable
            enable({"use_reentrant": False})
        self._reference = None  # full fine-tuning: a frozen copy of the starting model
        self._has_reference_adapters = False
        self.generated_tokens, self.generate_s = 0, 0.0  # what generation cost, for throughput figures

    def autocast(self):
        """bf16 autocast when `mixed_precision="bf16"` (the weights stay in their dtype), else nothing."""
        import torch

        if self.config.mixed_precision == "bf16":
            device = "cuda" if str(self.config.device).startswith("cuda") else "cpu"
            return torch.autocast(device_type=device, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    @property
    def holds_timing_slot(self) -> bool:
        """True where `exclusive()` holds the GPU's timing slot, so the judge can build and check replies
        while this backbone generates more without a candidate ever being timed beside it."""
        return bool(self.config.exclusive_gpu and str(self.config.device).startswith("cuda"))

    @contextlib.contextmanager
    def exclusive(self):
        """Hold the GPU's timing slot while the policy's own kernels run there (`exclusive_gpu`): a candidate
        timed beside generation or a training step would be timed against them. A no-op on the CPU, where
        the judge's timed processes have cores of their own."""
        if not self.holds_timing_slot:
            yield
            return
        import torch

        from kernelgym.workers import locks

        locks.prepare()
        with locks.device_lock("cuda"):
            try:
                yield
            finally:
                if torch.cuda.is_available():  # queued kernels (an optimizer step) finish inside the slot
                    torch.cuda.synchronize()

    @property
    def checkpointing(self) -> bool:
        """Gradient (activation) checkpointing is on."""
        for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):  # transformers 5, then 4
            value = getattr(self.model, name, None)
            if value is not None:
                return bool(value)
        return False

    def context_length(self) -> int | None:
        return getattr(getattr(self.model, "config", None), "max_position_embeddings", None)

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

    def prompt_ids(self, messages: list[dict[str, str]], budget: int | None = None) -> list[int]:
        """The chat prompt's ids; an over-long prompt loses the middle of its longest message."""
        budget = min(budget or self.config.max_prompt_tokens, self.config.max_prompt_tokens)
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
        return self.generate_batch(role, [messages], max_new_tokens=max_new_tokens, temperature=temperature,
                                   top_p=top_p)[0]

    def generate_batch(self, role: str, conversations: list[list[dict[str, str]]], *, max_new_tokens: int,
                       temperature: float = 0.8, top_p: float = 1.0, min_new_tokens: int = 0,
                       batch_size: int | None = None) -> list[Generated]:
        """One completion per conversation, `batch_size` rows (default all) per `model.generate` call:
        left-padded, one KV cache, rows that end early padded until the longest row ends.

        `min_new_tokens` forbids the end token before that many new tokens: for throughput benchmarks only
        (the distribution then differs from the one `token_logprobs` scores)."""
        context = self.context_length()
        budget = context - max_new_tokens if context and context > max_new_tokens else None
        prompts = [self.prompt_ids(m, budget) for m in conversations]
        step = max(1, batch_size or len(prompts))
        out: list[Generated] = []
        for start in range(0, len(prompts), step):
            with self.exclusive():
                t0 = time.monotonic()
                rows = self._generate_rows(role, prompts[start:start + step], max_new_tokens, temperature,
                                           top_p, min_new_tokens)
                self.generate_s += time.monotonic() - t0
            self.generated_tokens += sum(len(g.completion_ids) for g in rows)
            out += rows
        return out

    def _generate_rows(self, role: str, prompts: list[list[int]], max_new_tokens: int, temperature: float,
                       top_p: float, min_new_tokens: int) -> list[Generated]:
        import torch
        from transformers import GenerationConfig

        # A fresh GenerationConfig: nothing from the checkpoint's defaults (top_k, repetition penalty, ...)
        # reshapes the distribution beyond the temperature and top_p that token_logprobs applies again.
        eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        static = self.config.generation_cache == "static"
        sampling = GenerationConfig(
            max_new_tokens=max_new_tokens, pad_token_id=pad, eos_token_id=eos,
            **({"cache_implementation": "static"} if static else {}),
            **({"min_new_tokens": min_new_tokens} if min_new_tokens else {}),
            **({"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
               if temperature > 0 else {"do_sample": False}))
        width = max(len(p) for p in prompts)
        if static:  # few cache shapes: each new one is compiled again
            step = max(1, self.config.generation_pad_to)
            width = -(-width // step) * step
        device = self.config.device
        # Left padding: every row's last prompt token sits at the same position, so one cache serves all;
        # the mask (and the position ids generate derives from it) hides the padding.
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
        with self.role(role) as model, torch.no_grad(), self.autocast():
            was_training = model.training
            model.eval()
            out = model.generate(input_ids=ids, attention_mask=mask, generation_config=sampling)
            model.train(was_training)
        results = []
        for prompt, row in zip(prompts, out[:, width:].tolist(), strict=True):
            stopped = eos in row
            new = row[: row.index(eos) + 1] if stopped else row  # the end token is trained on too
            text = self.tokenizer.decode(new, skip_special_tokens=True)
            results.append(Generated(prompt, new, text, "stop" if stopped else "length", float(temperature),
                                     float(top_p)))
        return results

    # training --------------------------------------------------------------------------------------------

    def token_logprobs(self, role: str, prompt_ids: list[int], completion_ids: list[int], *,
                       reference: bool = False, temperature: float = 1.0, top_p: float = 1.0):
        """Log-probabilities (with grad unless `reference`) of each completion token given the prompt, under
        the distribution it was sampled from: the logits divided by `temperature` (a greedy turn, 0, counts as
        1) and cut to the `top_p` nucleus, as generation did."""
        import torch

        ids = torch.tensor([prompt_ids + completion_ids], device=self.config.device)
        logits = self._logits(role, reference, input_ids=ids, use_cache=False)
        # The logits at position p predict token p + 1: the completion's tokens are predicted from
        # positions len(prompt) - 1 ... len(ids) - 2.
        start = len(prompt_ids) - 1
        scores = logits[0, start: start + len(completion_ids)].float()
        return _sampled_logprobs(ids, scores, ids[0, len(prompt_ids):], temperature, top_p)

    def token_logprobs_batch(self, role: str, pairs: list[tuple[list[int], list[int]]], *,
                             reference: bool = False, temperature: float = 1.0, top_p: float = 1.0) -> list:
        """`token_logprobs` of several (prompt_ids, completion_ids) pairs of one role, all sampled with one
        temperature and top_p, in one forward pass: one log-prob tensor per pair.

        The rows are right-padded: a row's tokens keep positions 0 .. len - 1 (the model numbers positions
        from 0 whatever the mask) and, attention being causal, see only earlier tokens of their own row; the
        mask hides the padding all the same. Logits are projected only for the window of positions that
        predict some row's completion (`logits_to_keep`), and only the completion positions are upcast to
        fp32: a batch's full-vocabulary logits would be rows x length x vocabulary."""
        import torch

        device = self.config.device
        pad = self.tokenizer.pad_token_id
        lengths = [len(prompt) + len(completion) for prompt, completion in pairs]
        width = max(lengths)
        ids = torch.tensor([prompt + completion + [pad] * (width - n)
                            for (prompt, completion), n in zip(pairs, lengths, strict=True)], device=device)
        mask = torch.tensor([[1] * n + [0] * (width - n) for n in lengths], device=device)
        # Row i's completion is predicted from positions len(prompt_i) - 1 ... lengths[i] - 2 (as in
        # token_logprobs); `window` starts at the earliest of them, so the kept logits are offset by `first`.
        first = min(len(prompt) for prompt, _ in pairs) - 1
        window = torch.arange(first, width - 1, device=device)
        logits = self._logits(role, reference, input_ids=ids, attention_mask=mask, use_cache=False,
                              logits_to_keep=window)
        rows = torch.cat([torch.full((len(completion),), i, device=device)
                          for i, (_, completion) in enumerate(pairs)])
        columns = torch.cat([torch.arange(len(prompt) - 1 - first, len(prompt) - 1 - first + len(completion),
                                          device=device) for prompt, completion in pairs])
        targets = torch.tensor([token for _, completion in pairs for token in completion], device=device)
        logprobs = _sampled_logprobs(ids, logits[rows, columns].float(), targets, temperature, top_p)
        return list(logprobs.split([len(completion) for _, completion in pairs]))

    def _logits(self, role: str, reference: bool, **inputs):
        """The role's logits (the KL reference's, without grad, if `reference`), under `autocast()`."""
        import torch

        if reference:
            with torch.no_grad(), self._reference_model(role) as ref, self.autocast():
                return ref(**inputs).logits
        with self.role(role) as model, self.autocast():
            return model(**inputs).logits

    # the KL reference -------------------------------------------------------------------------------------

    def snapshot_reference(self) -> None:
        """Freeze the current model as the KL reference (call it where RL starts: the SFT model)."""
        if self.lora:
            self._add_reference_adapters(copy_from_roles=True)
            return
        self._reference = _frozen(copy.deepcopy(self.model))

    def load_reference(self, path: str | os.PathLike) -> None:
        """The KL reference from a saved backbone (e.g. the SFT model a resumed RL run started from)."""
        import torch

        path = Path(resolve_model_path(str(path)))
        meta_file = path / META_FILE
        meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
        if self.lora:
            if meta.get("lora"):  # the saved adapters, frozen, next to the trained ones
                self._drop_reference_adapters()
                for role in ROLES:
                    self.model.load_adapter(str(path / "adapters" / role), adapter_name=_ref(role),
                                            is_trainable=False)
                self._has_reference_adapters = True
                self._freeze_reference_adapters()
            else:  # RL added fresh adapters over that model: the reference is the base, adapters at zero
                self._add_reference_adapters(copy_from_roles=False)
            return
        if meta.get("lora"):
            raise ConfigError(f"{path} holds LoRA adapters; this backbone trains full weights")
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, self.config.dtype))
        self._reference = _frozen(model.to(self.config.device))

    def _add_reference_adapters(self, copy_from_roles: bool) -> None:
        import torch

        self._drop_reference_adapters()
        for role in ROLES:
            self.model.add_adapter(_ref(role), copy.deepcopy(self.model.peft_config[role]))
        params = dict(self.model.named_parameters())
        for name, param in params.items():
            for role in ROLES:
                marker = f".{_ref(role)}."
                if marker in name:
                    source = params[name.replace(marker, f".{role}.")]
                    with torch.no_grad():
                        if copy_from_roles:
                            param.copy_(source)
                        elif ".lora_B." in name:  # a fresh adapter adds nothing: the base alone
                            param.zero_()
        self._has_reference_adapters = True
        self._freeze_reference_adapters()

    def _drop_reference_adapters(self) -> None:
        if self._has_reference_adapters:
            for role in ROLES:
                self.model.delete_adapter(_ref(role))
            self._has_reference_adapters = False

    def _freeze_reference_adapters(self) -> None:
        for name, param in self.model.named_parameters():
            if _is_reference(name):
                param.requires_grad_(False)

    @contextlib.contextmanager
    def _reference_model(self, role: str):
        """The KL reference: the snapshot (taken now if none was); with LoRA, the role's frozen adapter."""
        if self.lora:
            if not self._has_reference_adapters:
                self.snapshot_reference()
            self.model.set_adapter(_ref(role))
            try:
                yield self.model
            finally:
                self.model.set_adapter(role)
                self._freeze_reference_adapters()
            return
        if self._reference is None:
            self.snapshot_reference()
        yield self._reference

    def trainable_parameters(self) -> list:
        if self.lora:  # every role's adapter (peft marks only the active one trainable), never the reference
            params = [p for n, p in self.model.named_parameters() if "lora_" in n and not _is_reference(n)]
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
                # No embedding-layer check: it looks the base up by name (a Hub call for "smollm2").
                self.model.save_pretrained(folder / "adapters", selected_adapters=[role],
                                           save_embedding_layers=False)
            meta["base"] = str(self.model.peft_config[ROLES[0]].base_model_name_or_path or "")
        else:
            self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        (folder / META_FILE).write_text(json.dumps(meta, indent=1))
        return folder


def is_saved_backbone(folder: str | os.PathLike) -> bool:
    """Whether `folder` holds a backbone that Backbone can load: a full model (config.json) or, from a LoRA
    run, the role adapters with the base they extend (META_FILE); a resumed run tests this before it skips a
    finished SFT."""
    folder = Path(folder)
    return (folder / "config.json").is_file() or (folder / META_FILE).is_file()


def _sampled_logprobs(input_ids, scores, targets, temperature: float, top_p: float):
    """Log-probabilities of `targets` under fp32 `scores` (one row a target), warped the way generation
    sampled them: divided by `temperature` (0, greedy, counts as 1), then cut to the `top_p` nucleus, by
    transformers' own warpers, row by row (they read the scores only; `input_ids` is their signature's)."""
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper
    from trl.trainer.utils import selective_log_softmax

    if temperature > 0 and temperature != 1.0:
        scores = TemperatureLogitsWarper(temperature)(input_ids, scores)
    if top_p < 1.0:
        scores = TopPLogitsWarper(top_p)(input_ids, scores)
    return selective_log_softmax(scores, targets)


def _ref(role: str) -> str:
    return f"ref_{role}"


def _is_reference(parameter_name: str) -> bool:
    return any(f".{_ref(role)}." in parameter_name for role in ROLES)


def _frozen(model):
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


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
