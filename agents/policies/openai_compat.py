"""OpenAIPolicy: any OpenAI-compatible chat endpoint (vLLM, SGLang, llama.cpp, `kernelgym.agents.serve`, ...).

The `openai` client is imported lazily. Retries are ours (the client's own are turned off): connection
errors, timeouts, 408/409/429 and 5xx answers are retried with exponential backoff and jitter; any other
error (a bad request, a wrong key) fails at once. `act_batch` sends requests from threads, at most
`concurrency` at a time.
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
from kernelgym.errors import KernelGymError

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


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
        self.client = openai.OpenAI(
            base_url=config.base_url or os.environ.get("OPENAI_BASE_URL") or None,
            api_key=os.environ.get(config.api_key_env) or "EMPTY",
            timeout=config.timeout_s, max_retries=0,
        )
        self._slots = threading.Semaphore(max(1, config.concurrency))
        self.requests = 0  # requests sent, retries included (for tests and logs)
        self._count_lock = threading.Lock()

    def _retryable(self, exc: Exception) -> bool:
        o = self._openai
        if isinstance(exc, o.APIConnectionError | o.APITimeoutError):  # APITimeoutError is a connection error
            return True
        return isinstance(exc, o.APIStatusError) and exc.status_code in RETRY_STATUS

    def complete(self, messages: list[dict[str, str]]) -> str:
        cfg = self.config
        request: dict[str, Any] = {"model": cfg.model, "messages": messages, "temperature": cfg.temperature,
                                   "top_p": cfg.top_p, "max_tokens": cfg.max_tokens}
        if cfg.seed is not None:
            request["seed"] = cfg.seed
        if cfg.extra_body:
            request["extra_body"] = cfg.extra_body
        last: Exception | None = None
        for attempt in range(cfg.max_retries + 1):
            with self._slots:
                with self._count_lock:
                    self.requests += 1
                try:
                    response = self.client.chat.completions.create(**request)
                    usage = getattr(response, "usage", None)
                    tokens = getattr(usage, "completion_tokens", None) if usage is not None else None
                    text = response.choices[0].message.content or ""
                    return Reply(text, completion_tokens=tokens) if isinstance(tokens, int) else text
                except Exception as exc:
                    if not self._retryable(exc):
                        raise EndpointError(f"{self.name}: {type(exc).__name__}: {exc}") from exc
                    last = exc
            if attempt < cfg.max_retries:
                wait = min(cfg.max_backoff_s, cfg.backoff_s * 2 ** attempt)
                time.sleep(wait * (0.5 + random.random() / 2))
        raise EndpointError(f"{self.name}: gave up after {cfg.max_retries + 1} attempts: "
                            f"{type(last).__name__}: {last}") from last

    def act(self, observation: PolicyObservation, info: PolicyInfo) -> str:
        return self.complete(to_messages(observation, self.system_prompt))

    def act_batch(self, observations: Sequence[PolicyObservation], infos: Sequence[PolicyInfo]) -> list[str]:
        if len(observations) <= 1:
            return [self.act(o, i) for o, i in zip(observations, infos, strict=True)]
        with ThreadPoolExecutor(max_workers=min(len(observations), max(1, self.config.concurrency))) as ex:
            return list(ex.map(self.act, observations, infos))

    def close(self) -> None:
        self.client.close()
