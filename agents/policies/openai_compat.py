"""OpenAIPolicy: any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp, `kernelgym.agents.serve`, ...).

The `openai` client is imported lazily. Retries are ours (the client's own are turned off): connection
errors, timeouts, 408/409/429 and 5xx answers are retried with exponential backoff and jitter; any other
error (a bad request, a wrong key) fails at once. `act_batch` sends requests from threads, at most
`concurrency` at a time.

Without a base URL (no `@URL` in the spec, no $OPENAI_BASE_URL) requests would go to the public OpenAI API:
that needs the key variable set, else the policy refuses to start. `check()` sends one request with a short
timeout and no retries; `kernelgym bench` calls it before the first episode, so a dead endpoint is one
console line, not hours of retries. Replies stop at the end of a code block (`stop_at_code_end`): small
models otherwise keep writing until the token budget runs out.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kernelgym.agents.policy import (
    SYSTEM_PROMPT,
    BasePolicy,
    PolicyInfo,
    PolicyObservation,
    Reply,
    to_messages,
)
from kernelgym.errors import ConfigError, KernelGymError, did_you_mean

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
CODE_END_STOP = "\n```\n"  # a closing fence on its own line (the opening one carries its language tag)
CHECK_TIMEOUT_S = 10.0


class EndpointError(KernelGymError, RuntimeError):
    """The endpoint failed after every retry (or with an error that retrying cannot fix)."""


@dataclass
class OpenAIConfig:
    model: str
    base_url: str | None = None  # None: $OPENAI_BASE_URL, else the client's default
    api_key_env: str = "OPENAI_API_KEY"  # the variable holding the key; unset: "EMPTY" (local servers)
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 2048
    timeout_s: float = 300.0
    max_retries: int = 5
    backoff_s: float = 1.0  # first wait; doubles each retry
    max_backoff_s: float = 60.0
    concurrency: int = 4
    seed: int | None = None
    extra_body: dict[str, Any] | None = None  # server-specific fields (e.g. vLLM's top_k)
    stop_at_code_end: bool = True  # send CODE_END_STOP as a stop sequence; the cut fence is put back

    @classmethod
    def from_options(cls, **options: Any) -> OpenAIConfig:
        """The config from spec options, an unknown key named with the known ones (not Python's TypeError)."""
        import dataclasses

        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise ConfigError(f"unknown openai option(s) {unknown}; known: {', '.join(known)}."
                              f"{did_you_mean(unknown[0], known)}")
        return cls(**options)


class OpenAIPolicy(BasePolicy):
    def __init__(self, config: OpenAIConfig | None = None, *, system_prompt: str | None = SYSTEM_PROMPT,
                 **kwargs: Any):
        if config is None:
            config = OpenAIConfig(**kwargs)
        elif kwargs:
            raise TypeError("pass either an OpenAIConfig or keyword arguments, not both")
        import openai

        self.config = config
        self.system_prompt = system_prompt
        self.name = f"openai:{config.model}" + (f"@{config.base_url}" if config.base_url else "")
        self._openai = openai
        base_url = config.base_url or os.environ.get("OPENAI_BASE_URL") or None
        key = os.environ.get(config.api_key_env)
        if base_url is None and not key:
            raise ConfigError(
                f"openai:{config.model} has no @URL and $OPENAI_BASE_URL is unset, so it would go to the "
                f"public OpenAI API, which needs ${config.api_key_env}; set it, or name your server: "
                f"openai:{config.model}@http://127.0.0.1:8000/v1")
        self.client = openai.OpenAI(base_url=base_url, api_key=key or "EMPTY", timeout=config.timeout_s,
                                    max_retries=0)
        self.url = str(self.client.base_url)
        self._slots = threading.Semaphore(max(1, config.concurrency))
        self._stop_supported = True  # False once the endpoint refused the stop sequence
        self.requests = 0  # requests sent, retries included (for tests and logs)
        self._count_lock = threading.Lock()

    def _retryable(self, exc: Exception) -> bool:
        o = self._openai
        if isinstance(exc, o.APIConnectionError | o.APITimeoutError):  # APITimeoutError is a connection error
            return True
        return isinstance(exc, o.APIStatusError) and exc.status_code in RETRY_STATUS

    def _rejects_stop(self, exc: Exception) -> bool:
        return (isinstance(exc, self._openai.BadRequestError)
                and "stop" in str(getattr(exc, "message", "") or exc).lower())

    def complete(self, messages: list[dict[str, str]]) -> str:
        cfg = self.config
        request: dict[str, Any] = {"model": cfg.model, "messages": messages, "temperature": cfg.temperature,
                                   "top_p": cfg.top_p, "max_tokens": cfg.max_tokens}
        if cfg.seed is not None:
            request["seed"] = cfg.seed
        if cfg.extra_body:
            request["extra_body"] = cfg.extra_body
        if cfg.stop_at_code_end and self._stop_supported:
            request["stop"] = [CODE_END_STOP]
        last: Exception | None = None
        refused_stop = False
        for attempt in range(cfg.max_retries + 1):
            with self._slots:
                with self._count_lock:
                    self.requests += 1
                try:
                    response = self.client.chat.completions.create(**request)
                    usage = getattr(response, "usage", None)
                    tokens = getattr(usage, "completion_tokens", None) if usage is not None else None
                    choice = response.choices[0]
                    text = choice.message.content or ""
                    if "stop" in request and choice.finish_reason == "stop":
                        text = close_open_fence(text)
                    return Reply(text, completion_tokens=tokens) if isinstance(tokens, int) else text
                except Exception as exc:
                    if "stop" in request and self._rejects_stop(exc):
                        refused_stop = True
                    elif not self._retryable(exc):
                        raise EndpointError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
                    else:
                        last = exc
            if refused_stop:
                # Some models (OpenAI's reasoning ones) refuse stop sequences: ask again without one, now and
                # from now on (outside the slot just held; not counted as a retry).
                self._stop_supported = False
                return self.complete(messages)
            if attempt < cfg.max_retries:
                wait = min(cfg.max_backoff_s, cfg.backoff_s * 2 ** attempt)
                time.sleep(wait * (0.5 + random.random() / 2))
        raise EndpointError(f"{self.name}: gave up after {cfg.max_retries + 1} attempts: "
                            f"{type(last).__name__}: {last}") from last

    def check(self, timeout_s: float = CHECK_TIMEOUT_S) -> str | None:
        """One request to the endpoint (its model list), no retries, at most `timeout_s`.

        Raises EndpointError naming the URL and the error when the endpoint cannot be used (nothing
        listening, a wrong key, a timeout). Returns a warning when it answers but does not list the model
        (some servers serve any name), else None.
        """
        client = self.client.with_options(timeout=timeout_s, max_retries=0)
        o = self._openai
        try:
            ids = [m.id for m in client.models.list().data]
        except o.NotFoundError:  # a server without /models: one tiny completion instead
            try:
                client.chat.completions.create(model=self.config.model, max_tokens=1,
                                               messages=[{"role": "user", "content": "hi"}])
            except Exception as exc:  # reported, with the URL
                raise EndpointError(f"{self.name}: the endpoint {self.url} failed its check: "
                                    f"{type(exc).__name__}: {exc}") from exc
            return None
        except Exception as exc:  # reported, with the URL
            raise EndpointError(f"{self.name}: the endpoint {self.url} failed its check: "
                                f"{type(exc).__name__}: {exc}") from exc
        if ids and self.config.model not in ids:
            listed = ", ".join(ids[:5]) + (", ..." if len(ids) > 5 else "")
            return (f"{self.url} does not list the model {self.config.model!r} (it lists {listed})."
                    f"{did_you_mean(self.config.model, ids)}")
        return None

    def act(self, observation: PolicyObservation, info: PolicyInfo) -> str:
        return self.complete(to_messages(observation, self.system_prompt))

    def act_batch(self, observations: Sequence[PolicyObservation], infos: Sequence[PolicyInfo]) -> list[str]:
        if len(observations) <= 1:
            return [self.act(o, i) for o, i in zip(observations, infos, strict=True)]
        with ThreadPoolExecutor(max_workers=min(len(observations), max(1, self.config.concurrency))) as ex:
            return list(ex.map(self.act, observations, infos))

    def close(self) -> None:
        self.client.close()


def close_open_fence(text: str) -> str:
    """The reply with its last code block closed, when the stop sequence cut the closing fence off."""
    from kernelgym.envs.parsing import code_blocks

    blocks, _ = code_blocks(text)
    if blocks and not blocks[-1].closed:
        return text.rstrip("\n") + "\n```\n"
    return text
