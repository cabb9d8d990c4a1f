"""How long a bench will take when the policy generates on the CPU, said before it starts.

A local model generating on the CPU is slow: SmolLM2-135M took about 56 s a reply (1024 new tokens) on a
2-core machine, so `--tasks all` with 4 turns runs for many hours. The estimate scales that measurement by
the model's parameter count and its token budget; it is a warning, never a limit.
"""

from __future__ import annotations

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
