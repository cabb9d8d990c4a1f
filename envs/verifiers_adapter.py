"""kernelgym as a `verifiers` environment (verifiers 0.4, `verifiers.v1`; `pip install kernelgym[verifiers]`).

verifiers loads an environment from a taskset id: a module that exports one `Taskset` subclass (the rows
every rollout starts from) and, for a multi-turn exchange, one `Env` subclass whose `run()` plays the user.
This module is both, so the library's own loop runs it:

    vf-eval kernelgym.envs.verifiers_adapter -m MODEL --client.base-url http://127.0.0.1:8000/v1 \\
        --env.taskset.env-id KernelGym-L1-v0 --env.taskset.task-ids '["L1/1_ReLU"]' -r 2 --no-push

Each task is one kernelgym task; its prompt is the environment's task statement. `KernelGymEnv.run` opens an
interaction with the `player` agent and, turn by turn, hands each reply to `env.step()`: the judge builds and
checks it in an isolated worker, and its feedback goes back as the next user turn until the episode ends
(the done marker, the target speedup, or `max_turns`). The episode's reward (`episode_reward`: the best
turn's by default) is the trace's `kernelgym` reward; verdicts and speedups go into `trace.info`.

The player's default harness is verifiers' plain chat loop (`null`) in the local subprocess runtime: the
model only writes text, and every line of its code runs inside kernelgym's judge, never in the harness.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf

from kernelgym.agents.policy import SYSTEM_PROMPT

EPISODE_REWARDS = ("max", "last", "sum", "mean")


class KernelGymConfig(vf.TasksetConfig):
    """Which environment and tasks, and how the judge runs (the gym.make options of `kernelgym.envs`)."""

    env_id: str = "KernelGym-L1-v0"
    task_ids: list[str] | None = None  # None: every task of the environment
    backend: str | None = None  # None: cpp without a GPU, else triton
    size: str = "auto"
    max_turns: int = 4
    reward: str = "speedup"
    episode_reward: str = "max"  # the rollout's reward from its turns' rewards: max, last, sum or mean
    eval_options: dict[str, Any] = {}  # noqa: RUF012 - pydantic copies mutable defaults
    kernelbench_root: str | None = None


class KernelGymData(vf.TaskData):
    info: dict  # the kernelgym task id (and level, category) the env resets to


class KernelGymTask(vf.Task[KernelGymData, vf.State, vf.TaskConfig]):
    pass


class KernelGymEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime=vf.SubprocessConfig())


def _gym_kwargs(config: KernelGymConfig) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"size": config.size, "max_turns": config.max_turns, "reward": config.reward,
                              "eval_options": dict(config.eval_options)}
    if config.backend:
        kwargs["backend"] = config.backend
    if config.kernelbench_root:
        kwargs["kernelbench_root"] = config.kernelbench_root
    if config.task_ids:
        kwargs["task_ids"] = list(config.task_ids)
    return kwargs


def make_gym_env(config: KernelGymConfig):
    import gymnasium as gym

    import kernelgym  # noqa: F401 - registers the ids

    return gym.make(config.env_id, **_gym_kwargs(config))


def episode_reward(rewards: list[float], how: str) -> float:
    if how not in EPISODE_REWARDS:
        from kernelgym.errors import ConfigError

        raise ConfigError(f"episode_reward must be one of {EPISODE_REWARDS}, not {how!r}")
    if not rewards:
        return 0.0
    return {"max": max, "last": lambda r: r[-1], "sum": sum, "mean": lambda r: sum(r) / len(r)}[how](rewards)


class KernelGymTaskset(vf.Taskset[KernelGymTask, KernelGymConfig]):
    def load(self) -> Iterator[KernelGymTask]:
        episode_reward([], self.config.episode_reward)  # a bad name fails at load, not mid-rollout
        env = make_gym_env(self.config)
        try:
            for task in env.unwrapped.tasks:
                observation, _ = env.reset(options={"task_id": task.id})
                yield KernelGymTask(
                    KernelGymData(name=task.id, prompt=str(observation["prompt"]),
                                  system_prompt=SYSTEM_PROMPT,
                                  info={"task_id": task.id, "level": task.level, "category": task.category}),
                    self.config.task,
                )
        finally:
            env.close()


class KernelGymEnv(vf.Env[KernelGymEnvConfig]):
    """One kernelgym episode per rollout: the judge plays the user."""

    async def run(self, task, agents) -> None:
        config: KernelGymConfig = self.taskset.config
        env = await asyncio.to_thread(make_gym_env, config)
        rewards: list[float] = []
        verdicts: list[str] = []
        info: dict[str, Any] = {}
        observation: dict[str, Any] = {"feedback": ""}
        try:
            await asyncio.to_thread(env.reset, options={"task_id": task.data.info["task_id"]})
            async with agents.player.interaction(task) as interaction:
                segment = await interaction.turn()  # the task statement is the prompt: the model speaks first
                while True:
                    reply = segment.last_reply or ""
                    step = await asyncio.to_thread(env.step, reply)
                    observation, reward, terminated, truncated, info = step
                    rewards.append(float(reward))
                    verdicts.append(str(info.get("verdict")))
                    if terminated or truncated or segment.terminated:
                        break
                    segment = await interaction.turn(str(observation["feedback"]) or "Try again.")
            trace = interaction.trace
            trace.record_reward("kernelgym", episode_reward(rewards, config.episode_reward), 1.0)
            episode = info.get("episode_summary", {})
            trace.info["kernelgym"] = {
                "task_id": task.data.info["task_id"], "verdicts": verdicts, "rewards": rewards,
                "best_speedup": episode.get("best_speedup", 0.0),
                "best_verified_speedup": episode.get("best_verified_speedup", 0.0),
                "episode_id": info.get("episode_id"), "last_feedback": str(observation["feedback"])[:2000],
            }
        finally:
            env.close()


__all__ = ["KernelGymConfig", "KernelGymData", "KernelGymEnv", "KernelGymEnvConfig", "KernelGymTask",
           "KernelGymTaskset"]
