"""KernelEnv: one task per episode; each step is a reply, judged in an isolated worker.

reset() picks a task (from the env's seeded RNG, or `options={"task_id": ...}`) and shows its statement.
step(reply) takes the reply's last Python code block as the solution, evaluates it on the shared pool and
returns the judge's feedback, the reward and the whole result in `info`. Nothing the reply contains can
raise: no code, garbage and cheats are failed turns. Truncation at `max_turns` is gymnasium's TimeLimit,
applied by `make_kernel_env` (the registered entry point) so that `gym.make(id, max_turns=N)` sets it.

A turn the judge itself failed (verdict `infrastructure_error`, once the pool's re-runs are spent) is never
charged to the agent: it earns 0.0 whatever the reward, `info["judged"]` is False, and the turn is given back
(it does not count toward max_turns; the feedback asks for the solution again). After
`max_unjudged_turns` such turns in one episode the next one ends it, truncated. A reply without code
(`no_code`) never reaches the judge (`info["evaluated"]` False) but is the agent's failed turn: it is
charged, so `info["judged"]` stays True (`judged` answers "does this turn's reward say something about the
policy?", the question a trainer asks before keeping a sample).
The observation and info keys are typed in `kernelgym.envs.types`.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import logger
from gymnasium.wrappers import TimeLimit

from kernelgym import backends
from kernelgym.envs.config import EnvConfig
from kernelgym.envs.parsing import parse_reply
from kernelgym.envs.prompt import build_prompt, hardware_summary
from kernelgym.envs.spaces import action_space, fit_text, observation_space, speedup_array
from kernelgym.envs.task_selection import select_tasks
from kernelgym.envs.trajectory import TrajectoryWriter
from kernelgym.envs.types import Action, BestSolution, Observation, ResetInfo, StepInfo
from kernelgym.errors import (
    ActionError,
    ConfigError,
    KernelGymError,
    TaskNotFoundError,
)
from kernelgym.evaluation import rules
from kernelgym.evaluation.feedback import render_feedback
from kernelgym.evaluation.options import DTYPES, EvalOptions
from kernelgym.evaluation.result import EvalResult, Verdict
from kernelgym.evaluation.rules import reason
from kernelgym.rewards import EpisodeState, get_reward, judged
from kernelgym.tasks import Task, TaskSet
from kernelgym.tasks.cpu_size import cpu_size, with_cpu_size

# The process-wide pool ------------------------------------------------------------------------------------

def shared_pool():
    """This process's default evaluation pool (every env of the process shares it)."""
    from kernelgym.workers.pool import default_pool

    return default_pool()


def cuda_available() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 (a broken driver is "no GPU" for choosing defaults)
        return False


# The environment -----------------------------------------------------------------------------------------

@dataclass
class _Episode:
    id: str
    task: Task
    size: str
    seed: int | None
    turn: int = 0
    feedback: str = ""
    last_speedup: float = 0.0  # measured speedup of the last turn (correct solutions only)
    last_verified: float = 0.0
    best: BestSolution | None = None
    rewards: list[float] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)
    evaluations: int = 0
    unjudged: int = 0  # turns the judge failed (infrastructure_error), given back
    terminated: bool = False

    @property
    def best_speedup(self) -> float:
        return self.best.speedup if self.best else 0.0

    @property
    def best_verified(self) -> float:
        return (self.best.verified_speedup or 0.0) if self.best else 0.0


class KernelEnv(gym.Env[Observation, Action]):
    """Multi-turn kernel optimization. Build through `gym.make("KernelGym-L1-v0", ...)`; see EnvConfig.

    The observation is an `Observation`, the action the model's whole reply (a str); `reset` returns a
    `ResetInfo` and `step` a `StepInfo` (all in `kernelgym.envs.types`).
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 (gymnasium's API)

    def __init__(self, config: EnvConfig | None = None, *, tasks: TaskSet | Iterable[Task] | None = None,
                 **kwargs: Any):
        self.config = cfg = EnvConfig.from_kwargs(config, **kwargs)
        self.render_mode = cfg.render_mode
        self.tasks = select_tasks(cfg, tasks)
        gpu = cfg.device != "cpu" and cuda_available()
        if cfg.device == "cuda" and not gpu:
            raise ConfigError("device='cuda' but torch sees no CUDA GPU")
        self.device = "cuda" if gpu else "cpu"
        self.backend = cfg.backend or ("triton" if gpu else "cpp")
        self._contract = backends.solution_contract(self.backend)  # raises BackendNotFoundError
        if backends.get(self.backend).device == "cpu":
            self.device = "cpu"  # cpp runs on the CPU whatever the machine has
        # "auto": the gpu size only where candidates really run on a GPU (the cpu size keeps CPU timing short)
        self.size = cfg.size if cfg.size != "auto" else ("gpu" if self.device == "cuda" else "cpu")
        self._eval_options = {"profile": cfg.profile, "shapes": cfg.shapes, **cfg.eval_options}
        if cfg.dtype is not None:
            self._eval_options["dtype"] = cfg.dtype
        options = EvalOptions.from_kwargs(**self._eval_options)  # a typo fails here, not mid-episode
        self._hardware = hardware_summary(self.device, options.threads)
        self._reward_fn = get_reward(cfg.reward, **cfg.reward_kwargs)
        named = isinstance(cfg.reward, str)
        self.reward_name = cfg.reward if named else getattr(cfg.reward, "__name__", "custom")
        self.observation_space = observation_space(cfg.max_turns, cfg.max_text_chars)
        self.action_space = action_space(cfg.max_text_chars)
        self._writer = TrajectoryWriter(cfg.trajectory_path) if cfg.trajectory_path else None
        self._pool = cfg.pool
        self._pending_seed = cfg.seed
        self._cursor = 0
        self._degenerate: set[str] = set()  # sampled tasks the degenerate-task screen flagged (skipped)
        self._episode: _Episode | None = None
        self._closed = False

    # gymnasium API ------------------------------------------------------------------------------------------

    @property
    def episode_id(self) -> str | None:
        """The current episode's id (as `info["episode_id"]` and in trajectory lines); None before reset."""
        return self._episode.id if self._episode is not None else None

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[Observation, ResetInfo]:
        """Start an episode on a new task and return its first observation (the statement, no feedback).

        Args:
            seed: seeds the env's RNG, which picks the task (the same seeds pick the same tasks); None
                uses `EnvConfig.seed` on the first reset, then continues the RNG.
            options: `{"task_id": id}` (a full id or an unambiguous suffix such as "L1/1_ReLU") or
                `{"task": Task}` to choose the task instead of sampling it.

        Returns:
            The observation and a `ResetInfo` (episode id, task id and summary, backend, size, seed, ...).

        Raises:
            TaskNotFoundError: no selected task has that id (the message suggests close ones).
            ConfigError: an unknown option, or a seed that is not an integer >= 0.
        """
        check_seed(seed, "reset(seed=...)")
        seed = int(seed) if seed is not None else None  # a numpy integer too (gymnasium takes Python ints)
        if seed is None and self._pending_seed is not None:
            seed, self._pending_seed = self._pending_seed, None
        super().reset(seed=seed)
        if options is not None and not isinstance(options, dict):
            raise ConfigError(f"reset(options=...) takes a dict such as {{'task_id': 'L1/1_ReLU'}}, not "
                              f"{type(options).__name__} {str(options)[:60]!r}")
        chosen_by_caller = bool(options) and ("task" in options or "task_id" in options)
        task = self._choose_task(seed, dict(options or {}))
        if not chosen_by_caller:
            task = self._past_degenerate(task, seed)
        if self.size == "cpu":
            task = with_cpu_size(task)  # KernelBench ships only its GPU size; raises if it cannot be scaled
        size = self.size if task.has_size(self.size) else "gpu"
        self._episode = _Episode(id=uuid.uuid4().hex, task=task, size=size, seed=seed)
        info = {
            "episode_id": self._episode.id, "task_id": task.id, "task": task.summary(),
            "backend": self.backend, "size": size, "seed": seed,
            "max_turns": self.config.max_turns, "reward_name": self.reward_name,
        }
        return self._observation(), cast(ResetInfo, without_none(info))

    def step(self, action: Action) -> tuple[Observation, float, bool, bool, StepInfo]:
        """Judge one reply: its last Python code block is the solution.

        Nothing in the reply can raise: a reply without code, a build failure, a wrong answer or a cheat is
        a failed turn, reported in the feedback and `info["verdict"]`. A reply that is just the done marker
        ends the episode; so does reaching `target_speedup`.

        `action` is the model's whole reply (bytes and numpy string scalars are accepted too). Returns the
        observation, the reward, terminated (done marker or target reached), truncated (always False here:
        `max_turns` is the TimeLimit wrapper's) and a `StepInfo` (verdict, the whole result as a dict, the
        best solution so far, episode statistics). Raises gymnasium's ResetNeeded before reset() or after
        the episode ended, and KernelGymError for the caller's mistakes (e.g. a closed pool).
        """
        ep = self._episode
        if ep is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if ep.terminated or ep.turn >= self.config.max_turns or ep.unjudged > self.config.max_unjudged_turns:
            raise gym.error.ResetNeeded("the episode is over (done, target reached, max_turns or the judge "
                                        "kept failing); call reset()")
        prompt_seen, feedback_seen = self._prompt(), ep.feedback
        reply = _as_text(action)  # raises ActionError for anything but text
        parsed = parse_reply(reply, self.config.done_marker)
        state = EpisodeState(
            task_id=ep.task.id, turn=ep.turn + 1, max_turns=self.config.max_turns,
            best_speedup=ep.best_verified, last_speedup=ep.last_verified,
            previous_verdicts=tuple(ep.verdicts),
        )
        ep.turn += 1
        result: EvalResult | None
        if parsed.code is None and parsed.done:
            result, reward, verdict = None, 0.0, "done"
            ep.feedback = "Episode finished at your request."
        elif parsed.code is None:
            result = EvalResult(ep.task.id, self.backend, ep.size, Verdict.NO_CODE,
                                [reason(rules.NO_CODE, parsed.problem)])
            reward, verdict = float(self._reward_fn(result, state)), result.verdict.value
            ep.feedback = f"No solution found: {parsed.problem}."
        else:
            result = self._evaluate(ep, parsed.code)
            ep.evaluations += 1
            reward, verdict = float(self._reward_fn(result, state)), result.verdict.value
            ep.feedback = render_feedback(result, self.config.max_feedback_chars)
        not_judged = result is not None and not judged(result)
        reward = self._not_judged(ep) if not_judged else self._record(ep, result, parsed.code) or reward
        ep.rewards.append(reward)
        ep.verdicts.append(verdict)
        target = self.config.target_speedup
        reached = bool(target and result is not None and (result.verified_speedup or 0.0) >= target)
        ep.terminated = parsed.done or reached
        if reached:
            ep.feedback += f"\nTarget speedup {target:g}x reached: the episode is over."
        elif parsed.done and result is not None:
            ep.feedback += "\nEpisode finished at your request."
        info = self._step_info(ep, result, parsed, verdict)
        if self._writer is not None:
            self._write(ep, prompt_seen, feedback_seen, reply, parsed, result, reward, info)
        cut_short = not_judged and ep.unjudged > self.config.max_unjudged_turns  # the judge kept failing
        return self._observation(), reward, ep.terminated, cut_short, cast(StepInfo, without_none(info))

    def render(self) -> str | None:
        if self.render_mode != "ansi":
            return None
        ep = self._episode
        if ep is None:
            return "KernelEnv: not reset yet\n"
        lines = [
            f"[kernelgym] {ep.task.id} | backend {self.backend} | size {ep.size} | reward {self.reward_name}",
            (f"turn {ep.turn}/{self.config.max_turns} | last {ep.verdicts[-1] if ep.verdicts else '-'}"
             f" {ep.last_speedup:.3g}x | best {ep.best_speedup:.3g}x | return {sum(ep.rewards):.3f}"),
        ]
        if ep.feedback:
            lines += ["--- feedback ---", ep.feedback]
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        # The pool is shared (the caller's or the process's): closing one env must not stop the others.
        self._closed = True
        super().close()

    # internals ----------------------------------------------------------------------------------------------

    def _choose_task(self, seed: int | None, options: dict[str, Any]) -> Task:
        task_id = options.pop("task_id", None)
        task = options.pop("task", None)
        if options:
            raise ConfigError(f"unknown reset option(s) {sorted(options)}; known: task_id, task")
        if isinstance(task, Task):
            return task
        if task is not None:  # an id under "task" was once ignored silently and a random task served
            shown, kind = str(task)[:60], type(task).__name__
            raise ConfigError(f"reset(options={{'task': ...}}) takes a kernelgym Task, not {kind} {shown!r}; "
                              f"pass an id as options={{'task_id': {shown!r}}}")
        if task_id is not None:
            try:
                return TaskSet.of(self.tasks, "selected tasks").get(str(task_id))
            except TaskNotFoundError as exc:
                other = self._other_level(str(task_id))
                if other:
                    raise TaskNotFoundError(other) from None
                raise exc from None
        if self.config.sampling == "sequential":
            if seed is not None:
                self._cursor = seed % len(self.tasks)
            chosen = self.tasks[self._cursor % len(self.tasks)]
            self._cursor += 1
            return chosen
        return self.tasks[int(self.np_random.integers(len(self.tasks)))]

    def _past_degenerate(self, task: Task, seed: int | None) -> Task:
        """`task`, or the next draw when the degenerate-task screen flags its derived cpu size (a constant or
        input-independent output, which a fill would match); each flagged id is named once and skipped
        whenever it is drawn. Only derived sizes are screened here: a task's own cpu size is its author's,
        checked by `kernelgym tasks check`, and a gpu size is not run on this side."""
        if not (self.config.skip_degenerate and self.size == "cpu"):
            return task
        while not task.has_size("cpu") and (flags := cpu_size(task).screen_flags):
            if task.id not in self._degenerate:
                self._degenerate.add(task.id)
                logger.warn(f"{task.id} is skipped: the degenerate-task screen flags its derived cpu size "
                            f"({'; '.join(flags)}); EnvConfig.skip_degenerate=False serves it")
            if len(self._degenerate) >= len({t.id for t in self.tasks}):
                raise ConfigError("every selected task is flagged by the degenerate-task screen at its "
                                  "derived cpu size; pass skip_degenerate=False to serve them anyway")
            task = self._choose_task(seed if self.config.sampling == "sequential" else None, {})
            seed = None  # a sequential cursor set by the seed moves on from there
        return task

    def _other_level(self, task_id: str) -> str | None:
        """A message for an id of another level than the env's (no did-you-mean into the wrong level)."""
        match = re.search(r"(?:^|/)L(\d+)/", task_id)
        levels = sorted({t.level for t in self.tasks})
        if not match or int(match.group(1)) in levels:
            return None
        wanted = int(match.group(1))
        env_id = self.spec.id if self.spec is not None else None
        offered = ", ".join(f"L{lv}" for lv in levels)
        where = f"{env_id} offers {offered} tasks" if env_id else f"this env offers {offered} tasks"
        level_id = env_id and re.search(r"-L\d+-", env_id)
        use = f"; make {re.sub(r'-L[0-9]+-', f'-L{wanted}-', env_id)} for it" if level_id else ""
        return f"{task_id!r} is a level-{wanted} task and {where}{use}"

    def _prompt(self) -> str:
        ep = self._episode
        cfg = self.config
        return build_prompt(
            task_id=ep.task.id, task_name=ep.task.name, level=ep.task.level, category=ep.task.category,
            reference=ep.task.source_at(ep.size), size=ep.size, backend=self.backend, contract=self._contract,
            hardware=self._hardware, turns_left=cfg.max_turns - ep.turn, max_turns=cfg.max_turns,
            answer_format=cfg.answer_format, done_marker=cfg.done_marker, target_speedup=cfg.target_speedup,
            heldout_shapes=cfg.shapes == "heldout" and bool(ep.task.shape_limits_at(ep.size)),
            dtype=DTYPES[cfg.dtype] if cfg.dtype else ep.task.dtype, backward=ep.task.backward,
        )

    def _observation(self) -> Observation:
        ep = self._episode
        limit = self.config.max_text_chars
        return Observation(
            prompt=fit_text(self._prompt(), limit),
            feedback=fit_text(ep.feedback, limit),
            turn=int(ep.turn),
            last_speedup=speedup_array(ep.last_speedup),
            best_speedup=speedup_array(ep.best_speedup),
        )

    def _evaluate(self, ep: _Episode, code: str) -> EvalResult:
        pool = self._pool if self._pool is not None else shared_pool()
        try:
            return pool.evaluate(ep.task, code, backend=self.backend, size=ep.size, **self._eval_options)
        except KernelGymError:
            raise  # a closed pool or a bad option is the caller's mistake, not the agent's
        # the judge failed: a turn not judged, and a warning for the caller
        except Exception as exc:  # noqa: BLE001
            logger.warn(f"kernelgym evaluation failed ({type(exc).__name__}: {exc}); the turn is not judged")
            return EvalResult(ep.task.id, self.backend, ep.size, Verdict.INFRASTRUCTURE_ERROR,
                              [f"evaluator_error: {type(exc).__name__}: {str(exc)[:300]}"])

    def _not_judged(self, ep: _Episode) -> float:
        """The judge failed this turn: it is given back (while the episode's allowance lasts) and earns 0."""
        ep.unjudged += 1
        if ep.unjudged <= self.config.max_unjudged_turns:
            ep.turn -= 1
            ep.feedback += "\nThis turn does not count: send your solution again."
        else:
            ep.feedback += "\nThe judge keeps failing: the episode ends here, and is not held against you."
        return 0.0

    def _record(self, ep: _Episode, result: EvalResult | None, code: str | None) -> None:
        if result is None:
            return
        correct = result.correct
        measured = result.speedup if correct and result.speedup is not None else 0.0
        verified = result.verified_speedup if correct and result.verified_speedup is not None else 0.0
        ep.last_speedup, ep.last_verified = float(measured), float(verified)
        candidate = BestSolution(source=code or "", speedup=float(measured),
                                 verified_speedup=float(verified) or None, turn=ep.turn)
        if correct and (ep.best is None or candidate.rank > ep.best.rank):
            ep.best = candidate

    def _step_info(self, ep: _Episode, result: EvalResult | None, parsed, verdict: str) -> dict[str, Any]:
        # Plain dict with None values; step() drops those (without_none) and hands it out as a StepInfo.
        return {
            "episode_id": ep.id,
            "task_id": ep.task.id,
            "turn": ep.turn,
            "turns_left": self.config.max_turns - ep.turn,
            "verdict": verdict,
            "judged": result is None or judged(result),  # False: the judge failed, the turn was given back
            "evaluated": parsed.code is not None,  # the reply reached the judge (not no_code or done)
            "result": result.to_dict() if result is not None else None,
            "solution": parsed.code,
            "reply_parse": parsed.origin,
            "best": ep.best.to_info() if ep.best else None,
            "episode_summary": {  # not "episode": gymnasium's RecordEpisodeStatistics writes that key
                "turns": ep.turn, "rewards": list(ep.rewards), "return": float(sum(ep.rewards)),
                "verdicts": list(ep.verdicts), "evaluations": ep.evaluations, "best_speedup": ep.best_speedup,
                "best_verified_speedup": ep.best_verified,
            },
        }

    def _write(self, ep, prompt, feedback_before, reply, parsed, result, reward, info) -> None:
        spec_id = self.spec.id if self.spec is not None else None
        self._writer.write({
            "episode_id": ep.id, "env_id": spec_id, "task_id": ep.task.id, "seed": ep.seed, "turn": ep.turn,
            "max_turns": self.config.max_turns, "backend": self.backend, "size": ep.size,
            "reward_name": self.reward_name, "prompt": prompt, "feedback_before": feedback_before,
            "action": reply, "solution": parsed.code, "reply_parse": parsed.origin,
            "verdict": info["verdict"], "result": info["result"], "feedback": ep.feedback, "reward": reward,
            "terminated": ep.terminated,
            "truncated": not ep.terminated and ep.turn >= self.config.max_turns,
            "best_speedup": ep.best_speedup, "time": time.time(),
        })


def check_seed(seed: Any, what: str) -> None:
    """A seed is None or an integer >= 0 (numpy's rule), else a ConfigError naming where it came from."""
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ConfigError(f"{what} takes None or an integer >= 0 (numpy's seeds), not {seed!r}")


def without_none(info: dict[str, Any]) -> dict[str, Any]:
    """`info` with None-valued keys left out, through nested dicts (lists are kept as they are).

    Vector envs batch infos key by key and need each key's type to agree across envs: a key that is None
    in one env and a number or dict in another breaks that, while a missing key is simply masked. So an
    absent stage (`timing` of a build failure) or value (`speedup` of a wrong answer) is left out, and
    `EvalResult.from_dict(info["result"])` still rebuilds the same result.
    """
    return {k: without_none(v) if isinstance(v, dict) else v for k, v in info.items() if v is not None}


def _as_text(action: Any) -> str:
    """The reply as text: a str, UTF-8 bytes or a numpy string scalar; anything else is the caller's bug."""
    if isinstance(action, str):
        return action
    if isinstance(action, bytes | bytearray):
        return bytes(action).decode("utf-8", "replace")
    if getattr(action, "shape", None) == () and isinstance(getattr(action, "item", lambda: None)(), str):
        return str(action.item())  # a 0-d numpy array of a string
    raise ActionError(f"an action is the model's whole reply as a str, not {type(action).__name__} "
                      f"({str(action)[:60]!r}); send e.g. env.step(reply_text)")


class TurnLimit(TimeLimit):
    """gymnasium's TimeLimit over judged turns: a turn the judge failed (info["judged"] False) is returned."""

    def step(self, action: Any):
        observation, reward, terminated, truncated, info = self.env.step(action)
        if info.get("judged", True):
            self._elapsed_steps += 1
        if self._elapsed_steps >= self._max_episode_steps:
            truncated = True
        return observation, reward, terminated, truncated, info


def make_kernel_env(**kwargs: Any) -> gym.Env:
    """The registered entry point: a KernelEnv inside a TimeLimit(max_turns) that counts judged turns."""
    env = KernelEnv(**kwargs)
    return TurnLimit(env, max_episode_steps=env.config.max_turns)


# gymnasium.make reads the creator's metadata to validate render_mode.
make_kernel_env.metadata = KernelEnv.metadata
