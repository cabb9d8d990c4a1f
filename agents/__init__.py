"""kernelgym.agents: policies, prompting baselines and the bench runner (light to import: LLM libraries
load only when a policy that needs them is built)."""

from __future__ import annotations

from kernelgym._lazy import lazy_getattr

_LAZY = {
    "Policy": "kernelgym.agents.policy",
    "BasePolicy": "kernelgym.agents.policy",
    "Reply": "kernelgym.agents.policy",
    "to_messages": "kernelgym.agents.policy",
    "PolicyObservation": "kernelgym.agents.policy",
    "PolicyInfo": "kernelgym.agents.policy",
    "make_policy": "kernelgym.agents.policies",
    "BenchConfig": "kernelgym.agents.bench",
    "run_bench": "kernelgym.agents.bench",
    "summarize": "kernelgym.agents.report",
    "EpisodeRecord": "kernelgym.agents.baselines.common",
}


__getattr__ = lazy_getattr("kernelgym.agents", _LAZY)


__all__ = ["BasePolicy", "BenchConfig", "EpisodeRecord", "Policy", "PolicyInfo", "PolicyObservation", "Reply",
           "make_policy", "run_bench", "summarize", "to_messages"]
