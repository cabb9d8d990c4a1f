"""The Policy protocol: an observation in, the reply text out.

A policy is anything with `act(observation, info) -> str`. `act_batch` answers several observations at once
(a batched model call, or concurrent requests); `BasePolicy` gives the plain loop as its default.

Observations are the environment's `Observation` ("prompt", "feedback", "turn", ...). A baseline that keeps
a conversation puts it in `observation["messages"]` (chat messages, system first); `to_messages` turns
either form into the chat a model reads. `info` is the env's last info (`ResetInfo` or `StepInfo`) with at
least "task_id", plus "attempt" (0-based index of the reply within the episode) when a baseline sets it;
replay policies read those two.

A reply may be a `Reply`: a `str` with a `meta` dict (e.g. which file a replay came from, or a cheat's
label) that baselines copy into the episode record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypedDict, runtime_checkable

from kernelgym.envs.types import Observation, ResetInfo, StepInfo

SYSTEM_PROMPT = (
    "You are an expert performance engineer who writes fast, correct kernels. You answer with the complete "
    "Python solution module (defining ModelNew) in a single ```python block, following the task's rules "
    "exactly."
)


class Reply(str):
    """A reply string carrying metadata for the record (a plain `str` to everything else)."""

    meta: dict[str, Any]

    def __new__(cls, text: str, **meta: Any) -> Reply:  # noqa: PYI034 - Python 3.10 has no typing.Self
        obj = super().__new__(cls, text)
        obj.meta = dict(meta)
        return obj


class ChatMessage(TypedDict):
    role: str  # "system", "user" or "assistant"
    content: str


class PolicyObservation(Observation, total=False):
    """The env's observation, plus the conversation when a baseline keeps one."""

    messages: list[ChatMessage]


class PolicyInfo(ResetInfo, StepInfo, total=False):
    """The env's last info, plus what a baseline adds."""

    attempt: int  # 0-based index of the reply within the episode
    role: str  # "analyst" when a baseline (kforge) asks for advice instead of a solution
    phase: str


@runtime_checkable
class Policy(Protocol):
    def act(self, observation: PolicyObservation, info: PolicyInfo) -> str:
        """The reply to one observation: text holding the solution module, or the done marker."""
        ...

    def act_batch(self, observations: Sequence[PolicyObservation], infos: Sequence[PolicyInfo]) -> list[str]:
        """The replies to several observations, in order."""
        ...


class BasePolicy:
    """Implements `act_batch` as a loop over `act`; subclasses override either or both."""

    name: str = "policy"

    def act(self, observation: PolicyObservation, info: PolicyInfo) -> str:
        return self.act_batch([observation], [info])[0]

    def act_batch(self, observations: Sequence[PolicyObservation], infos: Sequence[PolicyInfo]) -> list[str]:
        if type(self).act is BasePolicy.act:
            raise NotImplementedError(f"{type(self).__name__} must define act() or act_batch()")
        return [self.act(o, i) for o, i in zip(observations, infos, strict=True)]

    def close(self) -> None:  # policies holding a model or a client may release it
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def act_batch(policy: Any, observations: Sequence[PolicyObservation],
              infos: Sequence[PolicyInfo]) -> list[str]:
    """`policy.act_batch` when it has one, else a loop over `policy.act` (for duck-typed policies)."""
    if hasattr(policy, "act_batch"):
        return list(policy.act_batch(list(observations), list(infos)))
    return [policy.act(o, i) for o, i in zip(observations, infos, strict=True)]


def user_text(observation: PolicyObservation) -> str:
    """The environment's prompt, followed by the judge's feedback on the last attempt if there is some."""
    prompt = str(observation.get("prompt", ""))
    feedback = str(observation.get("feedback", "") or "").strip()
    if feedback:
        return f"{prompt}\n\nFeedback from the judge on your last attempt:\n{feedback}"
    return prompt


def to_messages(observation: PolicyObservation,
                system_prompt: str | None = SYSTEM_PROMPT) -> list[ChatMessage]:
    """Chat messages for a model: `observation["messages"]` if a baseline built them, else system + user."""
    messages = observation.get("messages")
    if messages:
        out = [ChatMessage(role=str(m["role"]), content=str(m["content"])) for m in messages]
        if system_prompt and out[0]["role"] != "system":
            out.insert(0, ChatMessage(role="system", content=system_prompt))
        return out
    out = [ChatMessage(role="user", content=user_text(observation))]
    if system_prompt:
        out.insert(0, ChatMessage(role="system", content=system_prompt))
    return out


def reply_meta(reply: str) -> dict[str, Any]:
    return dict(getattr(reply, "meta", {}) or {})
