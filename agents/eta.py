"""How long a bench will take when the policy generates on the CPU, said before it starts.

A local model generating on the CPU is slow: SmolLM2-135M took about 56 s a reply (1024 new tokens) on a
2-core machine, so `--tasks all` with 4 turns runs for many hours. The estimate scales that measurement by
the model's parameter count and its token budget; it is a warning, never a limit. Whatever the policy, the
bench also prints an ETA measured from the run's first reply (`TimedPolicy`, `eta_after_first_reply`).
"""

from __future__ import annotations

import threading
import time
from typing import Any

MEASURED_S_PER_TOKEN = 56.0 / 1024  # SmolLM2-135M-Instruct, float32, 2 cores
MEASURED_PARAMS = 135e6
WARN_ABOVE_S = 600.0


def cpu_seconds_per_reply(policy: Any) -> float | None:
    """Estimated seconds per reply of a policy that generates on the CPU; None for any other policy."""
    if getattr(policy, "device", None) != "cpu" or getattr(policy, "model", None) is None:
        return None
    try:
        params = sum(p.numel() for p in policy.model.parameters())
    except Exception:  # noqa: BLE001 (an unusual model object: no estimate, no warning)
        return None
    sampling = getattr(policy, "sampling", None)
    tokens = int(getattr(sampling, "max_new_tokens", 1024) or 1024)
    return tokens * MEASURED_S_PER_TOKEN * max(params / MEASURED_PARAMS, 0.1)


def eta_warning(policy: Any, replies: int) -> str | None:
    """A warning when `replies` replies of a CPU-generating policy would take more than ten minutes."""
    per_reply = cpu_seconds_per_reply(policy)
    if per_reply is None or per_reply * replies <= WARN_ABOVE_S:
        return None
    hours = per_reply * replies / 3600
    name = getattr(policy, "name", type(policy).__name__)
    return (
        f"{name} generates on the CPU: about {per_reply:.0f} s a reply (SmolLM2-135M measured 56 s a reply "
        f"on 2 cores), so up to {replies} replies take up to about {hours:.1f} h. For a quick look pass "
        "--tasks with a few tasks and --turns 1; for a full run serve the model on a GPU "
        "(--policy openai:MODEL@URL)."
    )


def eta_after_first_reply(seconds: float, replies: int, concurrency: int = 1) -> str:
    """The ETA line printed once the run's first reply is in: its time scaled to the replies to come."""
    total = seconds * max(replies - 1, 0) / max(1, concurrency)
    if seconds < 0.05:  # a replay or a scripted policy: the judge's time is the run's (the progress bar)
        return (f"eta: replies take no time ({seconds:.2f} s); up to {replies} judge turns, the progress bar "
                "shows the time left")
    return (f"eta: the first reply took {seconds:.1f} s; up to {replies - 1} more at that pace"
            f"{f' ({concurrency} in flight)' if concurrency > 1 else ''} take about {_duration(total)} of "
            "generation, plus the judge's time")


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class TimedPolicy:
    """A policy seen through a stopwatch: calls `on_first(seconds)` once, when the first reply returns.

    Everything else (attributes, other methods) is the wrapped policy's, so baselines see no difference.
    """

    def __init__(self, policy: Any, on_first: Any):
        self._policy = policy
        self._on_first = on_first
        self._lock = threading.Lock()
        self.first_reply_s: float | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)

    def _timed(self, call: Any, *args: Any) -> Any:
        started = time.monotonic()
        out = call(*args)
        with self._lock:
            first = self.first_reply_s is None
            if first:
                self.first_reply_s = time.monotonic() - started
        if first:
            self._on_first(self.first_reply_s)
        return out

    def act(self, observation: Any, info: Any) -> str:
        return self._timed(self._policy.act, observation, info)

    def act_batch(self, observations: Any, infos: Any) -> list[str]:
        if hasattr(self._policy, "act_batch"):
            return self._timed(self._policy.act_batch, observations, infos)
        return [self.act(o, i) for o, i in zip(observations, infos, strict=True)]
