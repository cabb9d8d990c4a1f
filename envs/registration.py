"""Gymnasium ids for kernelgym. Light on purpose: `import kernelgym` runs this, so no torch and no LLM
library is imported here; the entry point is a string that gymnasium resolves on `gym.make`.

- KernelBench-L{1,2,3}-v0: the real KernelBench problems (kernelbench_root=..., $KERNELBENCH_ROOT, or the
  Hugging Face dataset when it is in the local cache); without them `gym.make` fails at once and says how
  to get them.
- KernelBench-L4-v0: KernelBench's 20 whole-model problems (gpt2, OPT, GPT-Neo, BART, BigBird, Electra,
  Reformer), offline: built at random weights from config numbers kept in kernelgym (needs transformers).
- KernelGym-L{1,2,3}-v0: kernelgym's bundled suite, offline.
- KernelGym-Backward-v0: the bundled backward suite (forward and backward judged), levels 1 and 2, offline.
"""

from __future__ import annotations

# Not `import gymnasium`: gymnasium calls register_envs through its plugin entry point while it is still
# importing itself, and only its registration module is complete at that point.
from gymnasium.envs.registration import register, registry

from kernelgym._shadow import check_not_shadowed

check_not_shadowed()  # a `kernelgym` folder in the working directory hid the package: say so, here

ENTRY_POINT = "kernelgym.envs.kernel_env:make_kernel_env"
LEVELS = (1, 2, 3)
FAMILIES = {"KernelBench": "kernelbench", "KernelGym": "bundled"}


# Ids over a whole suite (every level): id -> suite.
SUITE_IDS = {"KernelGym-Backward-v0": "backward", "KernelGym-Curriculum-v0": "curriculum"}
# KernelBench's level 4 exists only as KernelBench problems (built offline, kernelgym.tasks.level4).
LEVEL4_ID = "KernelBench-L4-v0"


def _wanted() -> dict[str, dict]:
    """Every id and its entry point's kwargs."""
    wanted = {f"{family}-L{level}-v0": {"suite": suite, "level": level}
              for family, suite in FAMILIES.items() for level in LEVELS}
    wanted[LEVEL4_ID] = {"suite": "kernelbench", "level": 4}
    wanted.update({env_id: {"suite": suite, "level": None} for env_id, suite in SUITE_IDS.items()})
    return wanted


def env_ids() -> list[str]:
    return list(_wanted())


def register_envs() -> list[str]:
    """Register every kernelgym id that is not registered yet; returns the ids (safe to call again)."""
    wanted = _wanted()
    for env_id, kwargs in wanted.items():
        if env_id not in registry:
            register(
                id=env_id,
                entry_point=ENTRY_POINT,
                kwargs=kwargs,
                # The TimeLimit is applied by the entry point from max_turns (default 4), so that
                # gym.make(id, max_turns=N) changes it; the spec then reports max_episode_steps=N.
                max_episode_steps=None,
                # Timings are measured: the same reply can get a slightly different speedup (and reward).
                nondeterministic=True,
                # Every id passes gymnasium's check_env (tests/envs/test_registration.py). The passive checker
                # gym.make would add breaks an env whose first reset raised (a bad seed or task id): its
                # next step() fails inside the checker with a TypeError instead of working.
                disable_env_checker=True,
            )
    return env_ids()
