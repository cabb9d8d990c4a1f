"""kernelgym as an OpenEnv environment (openenv-core 0.3; `pip install kernelgym[openenv]`).

Server side: `KernelGymEnvironment` implements OpenEnv's `Environment` contract (reset, step, state) over
one kernelgym env, with typed `KernelAction` / `KernelObservation` / `KernelState`; `create_app()` wraps it
in OpenEnv's FastAPI app (HTTP and the WebSocket session protocol, one environment per session):

    python -m kernelgym.envs.openenv_adapter --port 8000 --env KernelGym-L1-v0 --backend cpp --size cpu

Client side: `KernelGymClient` is an OpenEnv `EnvClient` for that server:

    with KernelGymClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(task_id="L1/1_ReLU")
        while not result.done:
            obs = result.observation
            result = env.step(KernelAction(reply=my_llm(obs.prompt, obs.feedback)))

The action is the model's whole reply (its last ```python block is the solution, as in the gym env); the
observation carries the task statement, the judge's feedback, the verdict and speedups, and `reward` /
`done` as OpenEnv expects (done: the done marker, the target speedup, or `max_turns`).
"""

from __future__ import annotations

import argparse
from typing import Any

from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class KernelAction(Action):
    reply: str = Field(description="the model's whole reply; its last ```python block is the solution")


class KernelObservation(Observation):
    prompt: str = Field(default="", description="the task statement (reference module, contract, turns left)")
    feedback: str = Field(default="", description="the judge's feedback on the last reply")
    task_id: str = ""
    turn: int = 0
    turns_left: int = 0
    verdict: str | None = Field(default=None, description="the last reply's verdict (None after reset)")
    speedup: float | None = Field(default=None, description="measured speedup of the last reply, if correct")
    best_speedup: float = 0.0
    judged: bool = True  # False: the judge failed (infrastructure_error); the turn was given back
    evaluated: bool = False  # the last reply reached the judge (False for no_code / done)


class KernelState(State):
    env_id: str = ""
    task_id: str | None = None
    verdicts: list[str] = Field(default_factory=list)
    rewards: list[float] = Field(default_factory=list)
    best_speedup: float = 0.0
    best_verified_speedup: float = 0.0


class KernelGymEnvironment(Environment[KernelAction, KernelObservation, KernelState]):
    """One kernelgym env (`gym.make(env_id, **gym_kwargs)`) behind OpenEnv's reset/step/state."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session has its own env; evaluations share the process's pool

    def __init__(self, env_id: str = "KernelGym-L1-v0", **gym_kwargs: Any):
        import gymnasium as gym

        import kernelgym  # noqa: F401 - registers the ids

        super().__init__()
        self.env_id = env_id
        self._env = gym.make(env_id, **gym_kwargs)
        self._state = KernelState(env_id=env_id)

    def reset(self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None,
              **kwargs: Any) -> KernelObservation:
        """A new episode: `task_id` picks the task (else the seeded RNG does)."""
        options = {"task_id": task_id} if task_id else None
        observation, info = self._env.reset(seed=seed, options=options)
        self._state = KernelState(env_id=self.env_id, episode_id=episode_id or info["episode_id"],
                                  step_count=0, task_id=info["task_id"])
        return KernelObservation(prompt=str(observation["prompt"]), feedback="", task_id=info["task_id"],
                                 turn=0, turns_left=int(info["max_turns"]), done=False, reward=None,
                                 metadata={"task": info.get("task", {}), "backend": info.get("backend"),
                                           "size": info.get("size")})

    def step(self, action: KernelAction, timeout_s: float | None = None, **kwargs: Any) -> KernelObservation:
        observation, reward, terminated, truncated, info = self._env.step(action.reply)
        episode = info.get("episode_summary", {})
        result = info.get("result") or {}
        state = self._state
        state.step_count += 1
        state.verdicts = list(episode.get("verdicts", []))
        state.rewards = [float(r) for r in episode.get("rewards", [])]
        state.best_speedup = float(episode.get("best_speedup", 0.0))
        state.best_verified_speedup = float(episode.get("best_verified_speedup", 0.0))
        return KernelObservation(
            prompt=str(observation["prompt"]), feedback=str(observation["feedback"]), task_id=info["task_id"],
            turn=int(info["turn"]), turns_left=int(info["turns_left"]), verdict=info["verdict"],
            speedup=result.get("speedup"), best_speedup=state.best_speedup, judged=bool(info["judged"]),
            evaluated=bool(info.get("evaluated", False)), done=bool(terminated or truncated),
            reward=float(reward), metadata={"result": result, "episode_id": info.get("episode_id")},
        )

    @property
    def state(self) -> KernelState:
        return self._state

    def close(self) -> None:
        self._env.close()


class KernelGymClient(EnvClient[KernelAction, KernelObservation, KernelState]):
    """OpenEnv client for a kernelgym server (async; `.sync()` for the blocking wrapper)."""

    def __init__(self, base_url: str, message_timeout_s: float = 600.0, **kwargs: Any):
        # A step builds, checks and times a kernel: allow minutes, not OpenEnv's default minute.
        super().__init__(base_url, message_timeout_s=message_timeout_s, **kwargs)

    def _step_payload(self, action: KernelAction) -> dict[str, Any]:
        return {"reply": action.reply, "metadata": action.metadata}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[KernelObservation]:
        observation = KernelObservation(**payload.get("observation", {}), reward=payload.get("reward"),
                                        done=bool(payload.get("done", False)))
        return StepResult(observation=observation, reward=payload.get("reward"), done=observation.done)

    def _parse_state(self, payload: dict[str, Any]) -> KernelState:
        return KernelState(**payload)


def create_app(env_id: str = "KernelGym-L1-v0", max_concurrent_envs: int = 4, **gym_kwargs: Any):
    """OpenEnv's FastAPI app serving kernelgym: one environment per session, `max_concurrent_envs` at most."""
    from openenv.core.env_server.http_server import create_app as openenv_app

    def factory() -> KernelGymEnvironment:
        return KernelGymEnvironment(env_id, **gym_kwargs)

    return openenv_app(factory, KernelAction, KernelObservation, env_name="kernelgym",
                       max_concurrent_envs=max_concurrent_envs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kernelgym.envs.openenv_adapter",
                                     description="Serve kernelgym as an OpenEnv environment.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--env", default="KernelGym-L1-v0", help="a kernelgym env id")
    parser.add_argument("--backend", default=None, help="cpp, triton or cuda (default: the env's)")
    parser.add_argument("--size", default="auto")
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--sessions", type=int, default=4, help="concurrent sessions (one env each)")
    args = parser.parse_args(argv)
    import uvicorn

    gym_kwargs: dict[str, Any] = {"size": args.size, "max_turns": args.max_turns}
    if args.backend:
        gym_kwargs["backend"] = args.backend
    KernelGymEnvironment(args.env, **gym_kwargs).close()  # a bad option fails here, before the server starts
    app = create_app(args.env, max_concurrent_envs=args.sessions, **gym_kwargs)
    print(f"serving {args.env} over OpenEnv at http://{args.host}:{args.port}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
