"""One daVinci episode: select skills -> T policy turns in the environment -> summarize -> gate.

Every model call is recorded as a role-tagged turn with its token ids (what RL trains on). A teacher can
stand in for any role (the bundled solution as the policy's reply, BM25's order as the selection, a
template summary): the SFT data is built by replaying such episodes through the same code and the real
judge, so the cold start sees exactly the prompts the RL phase will.

A turn the judge failed to judge (info["judged"] False) is recorded with `meta["judged"] = False`; the env
gives the turn back, so the episode still gets `max_turns` judged turns, and the trainer leaves the failed
one out. Only a solution with a verified speedup above `gate_threshold` is worth a gate call.

With `defer_gate` (the RL loop), summaries wait in `pending` and `apply_gate()` submits them after the step:
the library, and the retriever built from it, stay frozen while a group's rollouts run, so the rollouts of
one task are independent samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

import kernelgym  # noqa: F401  (registers the env ids)
from kernelgym.agents.davinci import roles
from kernelgym.agents.davinci.config import EpisodeConfig
from kernelgym.agents.davinci.trajectory import RoleTurn, Trajectory
from kernelgym.errors import ConfigError, KernelGymError


@dataclass
class Teacher:
    """Fixed answers that replace the model for some roles (None: the model answers)."""

    policy_replies: Sequence[str] | None = None
    selection: list[str] | None = None  # ids, best first
    summary: str | None = None
    gate: bool = True  # False: record the summary turn but do not submit it (building SFT data)


@dataclass
class _Rollout:
    """One episode of a batch while it runs."""

    env: Any
    obs: dict
    task: Any
    traj: Trajectory
    hits: list = field(default_factory=list)  # BM25's candidates
    skills: list = field(default_factory=list)  # the chosen ones, in the policy's prompt
    history: list[tuple[str, str]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    index: int = 0  # policy turns taken
    judged_turns: int = 0
    done: bool = False
    teacher: Teacher = field(default_factory=Teacher)  # fixed answers for this episode's roles


@dataclass
class EpisodeRunner:
    """Plays episodes with one backbone (None: every role must come from a Teacher) against a skill store."""

    config: EpisodeConfig
    backbone: Any = None
    store: Any = None  # a SkillStore; None: no skills, no summary
    pool: Any = None  # an EvalPool shared by the env and the gate
    admitted: set[str] = field(default_factory=set)  # skills admitted during this run (for reuse credit)
    gate_calls: int = 0
    defer_gate: bool = False  # True: summaries wait in `pending` until apply_gate() (after the RL step)
    pending: list[tuple[Trajectory, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        c = self.config
        if c.summarize not in ("verified", "correct", "never"):
            raise ConfigError(f"episode.summarize must be 'verified', 'correct' or 'never', "
                              f"not {c.summarize!r}")
        self.env = self._make_env()
        self._extra_envs: list = []  # more envs for the episodes of a batch (run_batch)
        self._gate = None
        self._retriever = None  # built once from the store; rebuilt after the gate wrote to it

    def _make_env(self):
        c = self.config
        suite = {} if c.suite == "bundled" else {"suite": c.suite, "level": None}
        return gym.make(c.env_id, backend=c.backend, size=c.size, max_turns=c.max_turns, reward=c.reward,
                        eval_options=dict(c.eval_options), pool=self.pool, task_ids=c.task_ids, **suite)

    def close(self) -> None:
        for env in [self.env, *self._extra_envs]:
            env.close()

    # the episodes ------------------------------------------------------------------------------------------

    def run(self, task_id: str, teacher: Teacher | None = None) -> Trajectory:
        return self.run_batch([task_id], teacher)[0]

    def run_batch(self, task_ids: Sequence[str], teacher: Teacher | Sequence[Teacher] | None = None
                  ) -> list[Trajectory]:
        """One episode per id (repeat an id for a group), played in lockstep: each role's turn of every
        episode still running is generated in one batched call, and their env steps are judged
        concurrently (one env per episode, one shared pool). `teacher`: one for every episode, or one
        each (replaying a different solution per task, as the SFT data does)."""
        teachers = list(teacher) if isinstance(teacher, Sequence) else [teacher or Teacher()] * len(task_ids)
        if len(teachers) != len(task_ids):
            raise ConfigError(f"{len(teachers)} teachers for {len(task_ids)} episodes")
        rollouts = [self._reset(env, task_id) for env, task_id in zip(self._envs(len(task_ids)), task_ids)]
        for r, t in zip(rollouts, teachers, strict=True):
            r.teacher = t
        self._select_all(rollouts)
        for r in rollouts:
            r.traj.reused_admitted = [s.id for s in r.skills if s.id in self.admitted]
        self._play_all(rollouts)
        self._summarize_all(rollouts)
        return [r.traj for r in rollouts]

    def _envs(self, n: int) -> list:
        while len(self._extra_envs) + 1 < n:
            self._extra_envs.append(self._make_env())
        return [self.env, *self._extra_envs][:n]

    def _reset(self, env, task_id: str) -> _Rollout:
        obs, info = env.reset(options={"task_id": task_id})
        task = next(t for t in env.unwrapped.tasks if t.id == info["task_id"])  # any suite
        traj = Trajectory(task_id=info["task_id"], category=task.category, backend=self.config.backend,
                          size=info["size"])
        return _Rollout(env, obs, task, traj)

    def _turns(self, role: str, conversations: list, teacher_texts: list[str | None],
               max_new_tokens: int) -> list[RoleTurn]:
        """The role's turns for these conversations: teacher answers as given, the rest generated in one
        batched call."""
        asked = [i for i, text in enumerate(teacher_texts) if text is None]
        if asked and self.backbone is None:
            raise KernelGymError(f"no backbone and no teacher answer for the {role} role")
        c = self.config
        generated = self.backbone.generate_batch(
            role, [conversations[i] for i in asked], max_new_tokens=max_new_tokens, temperature=c.temperature,
            top_p=c.top_p, batch_size=c.generation_batch) if asked else []
        by_index = dict(zip(asked, generated, strict=True))
        turns = []
        for i, (messages, text) in enumerate(zip(conversations, teacher_texts, strict=True)):
            if text is not None:
                prompt = self.backbone.prompt_ids(messages) if self.backbone is not None else []
                turns.append(RoleTurn(role, prompt, self._teacher_ids(text), text, teacher=True,
                                      meta={"messages": messages}))
                continue
            out = by_index[i]
            turns.append(RoleTurn(role, out.prompt_ids, out.completion_ids, out.text,
                                  temperature=out.temperature, top_p=out.top_p,
                                  meta={"messages": messages, "finish": out.finish_reason}))
        return turns

    def _turn(self, role: str, messages, teacher_text: str | None, max_new_tokens: int) -> RoleTurn:
        return self._turns(role, [messages], [teacher_text], max_new_tokens)[0]

    def _teacher_ids(self, text: str) -> list[int]:
        if self.backbone is None:
            return []
        tok = self.backbone.tokenizer
        return list(tok(text, add_special_tokens=False)["input_ids"]) + [tok.eos_token_id]

    # roles -------------------------------------------------------------------------------------------------

    def _select_all(self, rollouts: list[_Rollout]) -> None:
        c = self.config
        if not c.skills or self.store is None:
            return
        from kernelgym.skill_store import Retriever, query_for_task

        if self._retriever is None:
            self._retriever = Retriever.from_store(self.store)
        asking, messages, targets = [], [], []
        for r in rollouts:
            r.hits = self._retriever.search(r.task, backend=c.backend, k=c.candidates)
            r.traj.bm25_ids = [h.id for h in r.hits]
            if r.hits and c.rerank:
                asking.append(r)
                messages.append(roles.selection_messages(query_for_task(r.task).text(), r.hits))
                targets.append(self._selection_target(r.teacher, r.traj.bm25_ids))
        turns = self._turns("selection", messages, targets, c.selection_tokens) if asking else []
        named_by_rollout = {}
        for r, turn in zip(asking, turns, strict=True):
            named = roles.parse_selection(turn.text, r.traj.bm25_ids)
            turn.meta["parsed"] = named
            r.traj.turns.append(turn)
            named_by_rollout[id(r)] = named
        for r in rollouts:
            if not r.hits:
                continue
            # The model chooses: the ids it names; a reply naming none falls back to BM25's order.
            chosen = named_by_rollout.get(id(r)) or r.traj.bm25_ids
            by_id = {h.id: h.skill for h in r.hits}
            r.skills = [by_id[i] for i in chosen[: c.use_skills]]
            r.traj.selected_ids = [s.id for s in r.skills]

    def _select(self, task, traj: Trajectory, teacher: Teacher) -> list:
        """The skills one episode's policy gets (retrieval, then the selection role)."""
        rollout = _Rollout(None, {}, task, traj, teacher=teacher)
        self._select_all([rollout])
        return rollout.skills

    def _selection_target(self, teacher: Teacher, bm25_ids: list[str]) -> str | None:
        if teacher.selection is None:
            return None
        # The teacher's ids among the candidates, else BM25's top.
        wanted = [i for i in teacher.selection if i in bm25_ids] or bm25_ids[: self.config.use_skills]
        return roles.selection_target(wanted)

    def _play_all(self, rollouts: list[_Rollout]) -> None:
        c = self.config
        while True:
            # The env gives back a turn it failed to judge (and cuts a run): count judged turns.
            active = [r for r in rollouts if not r.done and r.judged_turns < c.max_turns
                      and (r.teacher.policy_replies is None or r.index < len(r.teacher.policy_replies))]
            if not active:
                break
            # Chunk by chunk. Where the backbone holds the GPU's timing slot while it generates, a chunk's
            # replies go to the judge at once and build and check there while the next chunk generates
            # (every reply still comes from the same weights); elsewhere (the CPU) generation would share
            # the cores the candidates are timed on, so every chunk is generated first.
            chunk = max(1, c.generation_batch)
            overlap = self.backbone is not None and self.backbone.holds_timing_slot
            with ThreadPoolExecutor(max_workers=len(active), thread_name_prefix="davinci-step") as ex:
                judged, waiting = [], []
                for start in range(0, len(active), chunk):
                    rows = active[start:start + chunk]
                    messages = [roles.policy_messages(r.obs["prompt"], r.skills,
                                                      r.history[-c.history:] if c.history else [])
                                for r in rows]
                    texts = [r.teacher.policy_replies[r.index] if r.teacher.policy_replies is not None
                             else None for r in rows]
                    turns = self._turns("policy", messages, texts, c.policy_tokens)
                    waiting += zip(rows, turns, strict=True)
                    if overlap:
                        judged += [ex.submit(self._step, r, t) for r, t in waiting]
                        waiting = []
                judged += [ex.submit(self._step, r, t) for r, t in waiting]
                for future in judged:
                    future.result()
        for r in rollouts:
            best = r.info.get("best")
            if best:
                r.traj.best_source = best.get("source")
                r.traj.best_speedup = float(best.get("speedup") or 0.0)
                r.traj.best_verified_speedup = float(best.get("verified_speedup") or 0.0)

    def _step(self, r: _Rollout, turn: RoleTurn) -> None:
        r.obs, reward, terminated, truncated, r.info = r.env.step(turn.text)
        info = r.info
        r.index += 1
        turn.meta["judged"] = info.get("judged", True) is not False
        r.judged_turns += turn.meta["judged"]
        turn.env_reward = float(reward)
        turn.meta["verdict"] = info.get("verdict")
        turn.meta["speedup"] = (info.get("result") or {}).get("timing", {}).get("speedup")
        if turn.meta["verdict"] != "ok":  # which rule: a run's `hack` verdicts are read afterwards
            turn.meta["reasons"] = list((info.get("result") or {}).get("reasons") or [])[:3]
        r.traj.turns.append(turn)
        r.traj.verdicts.append(str(info.get("verdict")))
        r.history.append((turn.text, r.obs["feedback"]))
        r.done = bool(terminated or truncated)

    def _verified(self, traj: Trajectory) -> bool:
        return traj.best_verified_speedup > self.config.gate_threshold

    def _summarize(self, task, traj: Trajectory, teacher: Teacher) -> None:
        self._summarize_all([_Rollout(None, {}, task, traj, teacher=teacher)])

    def _summarize_all(self, rollouts: list[_Rollout]) -> None:
        """The summaries of the episodes that earn one, generated in one batched call (one at a time, a
        step's few summaries took as long as its 128 policy replies), then parsed and gated in order."""
        c = self.config
        if c.summarize == "never" or self.store is None:
            return
        # "verified": only a solution the gate could admit gets a summary (and a gate call)
        asked = [r for r in rollouts if r.traj.best_source and
                 (c.summarize != "verified" or r.teacher.summary is not None or self._verified(r.traj))]
        messages = [roles.summary_messages(t.task_id, t.category, t.backend, t.best_source,
                                           t.best_verified_speedup or None, t.selected_ids)
                    for t in (r.traj for r in asked)]
        turns = self._turns("summary", messages, [r.teacher.summary for r in asked], c.summary_tokens)
        for r, turn in zip(asked, turns, strict=True):
            self._gate_summary(r.traj, r.teacher, turn)

    def _gate_summary(self, traj: Trajectory, teacher: Teacher, turn: RoleTurn) -> None:
        traj.turns.append(turn)
        fields = roles.parse_summary(turn.text)
        if fields is None:
            traj.summary_status = "malformed"
            return
        if not teacher.gate:
            traj.summary_status = "not_gated"
            return
        candidate = roles.candidate_from_summary(fields, task_id=traj.task_id, backend=traj.backend,
                                                 size=traj.size, source=traj.best_source)
        traj.candidate_id = candidate.skill.id
        if not self._verified(traj):  # correct but no verified speedup: the gate would reject it
            traj.summary_status, traj.gate_reason = "unverified", "no verified speedup: not submitted"
            return
        if self.defer_gate:
            traj.summary_status = "pending"
            self.pending.append((traj, candidate))
            return
        self._submit(traj, candidate)

    def apply_gate(self) -> list[Trajectory]:
        """Submit the deferred summaries (after a step); returns their trajectories, statuses set. The gate's
        re-runs of different candidates are independent, so they are judged at once (one after another, a
        step's 5 candidates waited for 10 evaluations in turn); the store is written in order."""
        pending, self.pending = self.pending, []
        with ThreadPoolExecutor(max_workers=max(1, len(pending)), thread_name_prefix="davinci-gate") as ex:
            checks = [ex.submit(self.gate.check, c.skill.id, c.solution) for _, c in pending]
        for (traj, candidate), check in zip(pending, checks, strict=True):
            self._submit(traj, candidate, check)
        return [traj for traj, _ in pending]

    def _submit(self, traj: Trajectory, candidate, check=None) -> None:
        try:
            self.gate_calls += 1
            decision = self.gate.submit(self.store, candidate, decision=check.result() if check else None)
        except KernelGymError as exc:  # e.g. the id is taken by a seed skill: data, not a crash
            traj.summary_status, traj.gate_reason = "error", str(exc)[:300]
            return
        traj.gate_reason = decision.reason
        if getattr(decision, "not_judged", False):  # the judge failed: nothing decided, nothing to train
            traj.summary_status = "not_judged"
            return
        traj.summary_status = "admitted" if decision.admitted else "rejected"
        if decision.admitted:
            self.admitted.add(candidate.skill.id)
            self._retriever = None  # the library changed: the next retrieval sees it

    @property
    def gate(self):
        if self._gate is None:
            from kernelgym.skill_store import Gate, GateConfig

            c = self.config
            self._gate = Gate(GateConfig(runs=c.gate_runs, threshold=c.gate_threshold,
                                         eval_options=dict(c.eval_options)), pool=self.pool)
        return self._gate
