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
        suite = {} if c.suite == "bundled" else {"suite": c.suite, "level": None}
        self.env = gym.make(c.env_id, backend=c.backend, size=c.size, max_turns=c.max_turns, reward=c.reward,
                            eval_options=dict(c.eval_options), pool=self.pool,
                            task_ids=c.task_ids, **suite)
        self._gate = None
        self._retriever = None  # built once from the store; rebuilt after the gate wrote to it

    def close(self) -> None:
        self.env.close()

    # the episode -------------------------------------------------------------------------------------------

    def run(self, task_id: str, teacher: Teacher | None = None) -> Trajectory:
        teacher = teacher or Teacher()
        obs, info = self.env.reset(options={"task_id": task_id})
        task = next(t for t in self.env.unwrapped.tasks if t.id == info["task_id"])  # any suite
        traj = Trajectory(task_id=info["task_id"], category=task.category, backend=self.config.backend,
                          size=info["size"])
        skills = self._select(task, traj, teacher)
        traj.reused_admitted = [s.id for s in skills if s.id in self.admitted]
        self._play(obs, skills, traj, teacher)
        self._summarize(task, traj, teacher)
        return traj

    def _generate(self, role: str, messages, max_new_tokens: int):
        if self.backbone is None:
            raise KernelGymError(f"no backbone and no teacher answer for the {role} role")
        c = self.config
        return self.backbone.generate(role, messages, max_new_tokens=max_new_tokens,
                                      temperature=c.temperature, top_p=c.top_p)

    def _turn(self, role: str, messages, teacher_text: str | None, max_new_tokens: int) -> RoleTurn:
        if teacher_text is not None:
            prompt = self.backbone.prompt_ids(messages) if self.backbone is not None else []
            completion = self._teacher_ids(teacher_text)
            return RoleTurn(role, prompt, completion, teacher_text, teacher=True,
                            meta={"messages": messages})
        out = self._generate(role, messages, max_new_tokens)
        return RoleTurn(role, out.prompt_ids, out.completion_ids, out.text, temperature=out.temperature,
                        top_p=out.top_p, meta={"messages": messages, "finish": out.finish_reason})

    def _teacher_ids(self, text: str) -> list[int]:
        if self.backbone is None:
            return []
        tok = self.backbone.tokenizer
        return list(tok(text, add_special_tokens=False)["input_ids"]) + [tok.eos_token_id]

    # roles -------------------------------------------------------------------------------------------------

    def _select(self, task, traj: Trajectory, teacher: Teacher) -> list:
        c = self.config
        if not c.skills or self.store is None:
            return []
        from kernelgym.skill_store import Retriever, query_for_task

        if self._retriever is None:
            self._retriever = Retriever.from_store(self.store)
        hits = self._retriever.search(task, backend=c.backend, k=c.candidates)
        traj.bm25_ids = [h.id for h in hits]
        if not hits:
            return []
        chosen = [h.id for h in hits]
        if c.rerank:
            messages = roles.selection_messages(query_for_task(task).text(), hits)
            target = None
            if teacher.selection is not None:  # the teacher's ids among the candidates, else BM25's top
                wanted = [i for i in teacher.selection if i in traj.bm25_ids] or chosen[: c.use_skills]
                target = roles.selection_target(wanted)
            turn = self._turn("selection", messages, target, c.selection_tokens)
            named = roles.parse_selection(turn.text, traj.bm25_ids)
            turn.meta["parsed"] = named
            traj.turns.append(turn)
            # The model chooses: the ids it names; a reply naming none falls back to BM25's order.
            chosen = named or chosen
        by_id = {h.id: h.skill for h in hits}
        picked = [by_id[i] for i in chosen[: c.use_skills]]
        traj.selected_ids = [s.id for s in picked]
        return picked

    def _play(self, obs: dict, skills: list, traj: Trajectory, teacher: Teacher) -> None:
        c = self.config
        history: list[tuple[str, str]] = []
        info: dict[str, Any] = {}
        replies = list(teacher.policy_replies) if teacher.policy_replies is not None else None
        index = judged_turns = 0
        while judged_turns < c.max_turns:  # the env gives back a turn it failed to judge (and cuts a run)
            if replies is not None and index >= len(replies):
                break
            messages = roles.policy_messages(obs["prompt"], skills, history[-c.history:] if c.history else [])
            turn = self._turn("policy", messages, replies[index] if replies is not None else None,
                              c.policy_tokens)
            obs, reward, terminated, truncated, info = self.env.step(turn.text)
            index += 1
            turn.meta["judged"] = info.get("judged", True) is not False
            judged_turns += turn.meta["judged"]
            turn.env_reward = float(reward)
            turn.meta["verdict"] = info.get("verdict")
            turn.meta["speedup"] = (info.get("result") or {}).get("timing", {}).get("speedup")
            traj.turns.append(turn)
            traj.verdicts.append(str(info.get("verdict")))
            history.append((turn.text, obs["feedback"]))
            if terminated or truncated:
                break
        best = info.get("best")
        if best:
            traj.best_source = best.get("source")
            traj.best_speedup = float(best.get("speedup") or 0.0)
            traj.best_verified_speedup = float(best.get("verified_speedup") or 0.0)

    def _verified(self, traj: Trajectory) -> bool:
        return traj.best_verified_speedup > self.config.gate_threshold

    def _summarize(self, task, traj: Trajectory, teacher: Teacher) -> None:
        c = self.config
        if c.summarize == "never" or self.store is None or not traj.best_source:
            return
        if c.summarize == "verified" and teacher.summary is None and not self._verified(traj):
            return  # the gate could not admit it: neither a summary nor a gate call
        messages = roles.summary_messages(traj.task_id, traj.category, traj.backend, traj.best_source,
                                          traj.best_verified_speedup or None, traj.selected_ids)
        turn = self._turn("summary", messages, teacher.summary, c.summary_tokens)
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
        """Submit the deferred summaries (after a step); returns their trajectories, statuses set."""
        done = []
        while self.pending:
            traj, candidate = self.pending.pop(0)
            self._submit(traj, candidate)
            done.append(traj)
        return done

    def _submit(self, traj: Trajectory, candidate) -> None:
        try:
            self.gate_calls += 1
            decision = self.gate.submit(self.store, candidate)
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
