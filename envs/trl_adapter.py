"""TRL adapter: kernelgym episodes inside `trl.GRPOTrainer`, in the two ways TRL supports.

1. `environment_factory=environment_factory("KernelGym-L1-v0", ...)`: TRL creates one `KernelToolEnv` per
   rollout, calls `reset(**row)` (its string is appended to the prompt), exposes `submit_kernel` to the model
   as a tool and scores the rollout with `get_reward()`. Needs a tool-calling chat template.
2. `rollout_func=make_rollout_func("KernelGym-L1-v0", ...)` with `reward_funcs=rollout_reward`: plain
   multi-turn chat (reply with a code block, get feedback as the next user message), generated here with
   the trainer's model; the feedback tokens are masked out of the loss with `env_mask`.

Nothing here imports trl or transformers at module level: `import kernelgym` never loads them.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

import kernelgym  # noqa: F401  (registers the ids gym.make needs)

DEFAULT_ENV = "KernelGym-L1-v0"
EPISODE_REWARDS = ("max", "last", "sum", "mean")
_TASK_LINE = re.compile(r"^Task: (?P<id>\S+) \(", re.MULTILINE)


def _aggregate(rewards: Sequence[float], how: str) -> float:
    if how == "max":
        return float(max(rewards))
    if how == "last":
        return float(rewards[-1])
    if how == "sum":
        return float(sum(rewards))
    return float(sum(rewards) / len(rewards))


def _check_episode_reward(how: str) -> None:
    if how not in EPISODE_REWARDS:
        from kernelgym.errors import ConfigError

        raise ConfigError(f"episode_reward must be one of {EPISODE_REWARDS}, not {how!r}")


class KernelToolEnv:
    """One kernelgym episode as a TRL environment; its one tool is `submit_kernel`.

    TRL turns every public method other than `reset` and `get_reward` into a tool, so everything else here
    is private. The gym env is made on the first `reset` (TRL builds a probe instance at start-up).
    """

    def __init__(self, env_id: str = DEFAULT_ENV, *, episode_reward: str = "max", **env_kwargs: Any):
        _check_episode_reward(episode_reward)
        env_kwargs.setdefault("answer_format", "tool")
        self._env_id = env_id
        self._env_kwargs = env_kwargs
        self._episode_reward = episode_reward
        self._env: gym.Env | None = None
        self._rewards: list[float] = []
        self._over = True
        self._infos: list[dict[str, Any]] = []

    def reset(self, **row: Any) -> str:
        """Start an episode on the row's `task_id` (else a task drawn with the row's `seed`)."""
        if self._env is None:
            self._env = gym.make(self._env_id, **self._env_kwargs)
        task_id = row.get("task_id")
        seed = row.get("seed")
        obs, info = self._env.reset(seed=int(seed) if seed is not None else None,
                                    options={"task_id": task_id} if task_id else None)
        self._rewards, self._infos, self._over = [], [info], False
        return obs["prompt"]

    def submit_kernel(self, code: str) -> str:
        """Submit a complete solution module for the current task and get the judge's feedback.

        Args:
            code: The whole Python module that defines `ModelNew`, with its kernel source inline, as plain
                source text.

        Returns:
            The judge's verdict with build errors, where the output differs, timings and the speedup, and
            how many submissions are left.
        """
        if self._env is None or self._over:
            return "The episode is over: no more submissions are judged."
        # A bare module goes in a fence so that a syntax error reaches the judge (and its feedback) instead
        # of reading as "no code"; code the model already fenced is parsed as is.
        action = code if "```" in code else f"```python\n{code}\n```"
        obs, reward, terminated, truncated, info = self._env.step(action)
        self._rewards.append(float(reward))
        self._infos.append(info)
        self._over = bool(terminated or truncated)
        left = info.get("turns_left", 0)
        tail = "No submissions left." if self._over else f"Submissions left: {left}."
        return f"{obs['feedback']}\n{tail}"

    def get_reward(self) -> float:
        """The episode's reward: the best turn by default; a rollout that never submitted fails."""
        if not self._rewards:
            if self._env is None:
                return 0.0
            if not self._over:
                _, reward, *_ = self._env.step("")  # scored as a reply without code, by the env's reward
                self._rewards.append(float(reward))
                self._over = True
            else:
                return 0.0
        return _aggregate(self._rewards, self._episode_reward)


def environment_factory(env_id: str = DEFAULT_ENV, **kwargs: Any) -> Callable[[], KernelToolEnv]:
    """A zero-argument factory for `GRPOTrainer(environment_factory=...)`; kwargs go to KernelToolEnv."""

    def factory() -> KernelToolEnv:
        return KernelToolEnv(env_id, **kwargs)

    return factory


def task_dataset(env_id: str = DEFAULT_ENV, *, prompts: str = "reset", repeat: int = 1, **env_kwargs: Any):
    """A `datasets.Dataset` with one row per task: `prompt` (conversational) and `task_id`.

    prompts="reset": an empty user message, for `environment_factory` (its reset() supplies the statement);
    prompts="full": the whole task statement, for `make_rollout_func`.
    """
    from datasets import Dataset

    if prompts not in ("reset", "full"):
        raise ValueError(f"prompts must be 'reset' or 'full', not {prompts!r}")
    env = gym.make(env_id, **env_kwargs)
    rows = []
    try:
        for task in env.unwrapped.tasks:
            content = ""
            if prompts == "full":
                obs, _ = env.reset(options={"task_id": task.id})
                content = obs["prompt"]
            rows += [{"prompt": [{"role": "user", "content": content}], "task_id": task.id}] * repeat
    finally:
        env.close()
    return Dataset.from_list(rows)


# rollout_func -----------------------------------------------------------------------------------------------

def rollout_reward(prompts=None, completions=None, kernelgym_reward=None, **kwargs) -> list[float]:
    """Reward function for the rollout_func path: the episode reward the rollout computed."""
    return [float(r) for r in kernelgym_reward]


def _last_user_text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    for message in reversed(prompt):
        if message.get("role") == "user":
            content = message.get("content", "")
            if isinstance(content, list):
                return "".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content)
    return ""


def _messages(prompt: Any, statement: str) -> list[dict[str, Any]]:
    """The prompt's messages with its last user turn replaced by the env's statement (the same text when the
    dataset came from `task_dataset(prompts="full")`)."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": statement}]
    messages = [dict(m) for m in prompt]
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "user":
            messages[i] = {"role": "user", "content": statement}
            return messages
    return messages + [{"role": "user", "content": statement}]


def _template_ids(tokenizer, messages, add_generation_prompt: bool) -> list[int]:
    out = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt)
    if isinstance(out, dict) or hasattr(out, "keys"):  # transformers 5 returns a BatchEncoding
        out = out["input_ids"]
    return list(out)


def _user_turn_ids(tokenizer, text: str) -> list[int]:
    """Tokens that close an assistant turn and open the next one with `text` as the user's message.

    Taken as the difference of two renderings of a dummy conversation, so they follow the chat template;
    when the template is not prefix-preserving, falls back to the plain text.
    """
    base = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]
    before = _template_ids(tokenizer, base, add_generation_prompt=False)
    after = _template_ids(tokenizer, [*base, {"role": "user", "content": text}], add_generation_prompt=True)
    if after[: len(before)] == before:
        return after[len(before):]
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _sample(model, tokenizer, context: list[int], max_new_tokens: int, temperature: float, top_p: float,
            top_k: int | None) -> tuple[list[int], list[float]]:
    import torch

    device = next(model.parameters()).device
    input_ids = torch.tensor([context], device=device)
    kwargs = {"do_sample": True, "temperature": max(temperature, 1e-5), "top_p": top_p}
    if top_k:
        kwargs["top_k"] = top_k
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=max_new_tokens,
            pad_token_id=tokenizer.pad_token_id, return_dict_in_generate=True, output_scores=True, **kwargs,
        )
    new = out.sequences[0, len(context):].tolist()
    logprobs = []
    for step, token in enumerate(new):  # scores are the processed logits the token was sampled from
        logprobs.append(float(torch.log_softmax(out.scores[step][0].float(), dim=-1)[token]))
    return new, logprobs


def make_rollout_func(
    env_id: str = DEFAULT_ENV,
    *,
    max_new_tokens: int | None = None,
    episode_reward: str = "max",
    **env_kwargs: Any,
) -> Callable[[list, Any], dict[str, list]]:
    """A `rollout_func(prompts, trainer)` that plays one multi-turn episode per prompt.

    Each prompt is one rollout (TRL has already repeated every prompt `num_generations` times). The task is
    read from the prompt's "Task: <id>" line (as `task_dataset(prompts="full")` writes it); a prompt without
    one gets a task drawn by the env. The model's replies are trained on (env_mask 1); the judge's feedback
    between them is context only (env_mask 0, logprob 0). Returns the episode reward as `kernelgym_reward`
    (give `reward_funcs=rollout_reward`) and the last step's info as `kernelgym_info`.
    """
    _check_episode_reward(episode_reward)
    envs: list[gym.Env] = []

    def rollout_func(prompts: list, trainer: Any) -> dict[str, list]:
        tokenizer = trainer.processing_class
        tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor wraps the tokenizer
        args = trainer.args
        budget = int(getattr(args, "max_completion_length", None) or 1024)
        per_turn = min(max_new_tokens or budget, budget)
        temperature = float(getattr(args, "temperature", 1.0) or 1.0)
        top_p = float(getattr(args, "top_p", 1.0) or 1.0)
        top_k = getattr(args, "top_k", None)
        while len(envs) < len(prompts):
            envs.append(gym.make(env_id, **env_kwargs))
        output: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                   "kernelgym_reward": [], "kernelgym_info": []}
        model = trainer.model
        try:
            from trl.models import unwrap_model_for_generation

            unwrap = unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator)
        except Exception:  # noqa: BLE001 (another TRL: the bare model generates as well on one process)
            unwrap = None
        with unwrap if unwrap is not None else contextlib.nullcontext(model) as generator:
            was_training = generator.training
            generator.eval()
            try:
                for prompt, env in zip(prompts, envs):
                    episode = _play(env, generator, tokenizer, prompt, budget, per_turn, temperature, top_p,
                                    top_k)
                    for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask"):
                        output[key].append(episode[key])
                    output["kernelgym_reward"].append(_aggregate(episode["rewards"], episode_reward))
                    output["kernelgym_info"].append(episode["info"])
            finally:
                generator.train(was_training)
        return output

    return rollout_func


def _play(env, model, tokenizer, prompt, budget, per_turn, temperature, top_p, top_k) -> dict[str, Any]:
    match = _TASK_LINE.search(_last_user_text(prompt))
    obs, info = env.reset(options={"task_id": match["id"]} if match else None)
    prompt_ids = _template_ids(tokenizer, _messages(prompt, obs["prompt"]), add_generation_prompt=True)
    completion: list[int] = []
    mask: list[int] = []
    logprobs: list[float] = []
    rewards: list[float] = []
    while True:
        room = budget - len(completion)
        new, new_logprobs = _sample(model, tokenizer, prompt_ids + completion, max(1, min(per_turn, room)),
                                    temperature, top_p, top_k)
        completion += new
        mask += [1] * len(new)
        logprobs += new_logprobs
        reply = tokenizer.decode(new, skip_special_tokens=True)
        obs, reward, terminated, truncated, info = env.step(reply)
        rewards.append(float(reward))
        if terminated or truncated:
            break
        feedback = _user_turn_ids(tokenizer, obs["feedback"] + f"\nTurns left: {info['turns_left']}.")
        if len(completion) + len(feedback) >= budget:
            break  # no room for another reply: the episode ends here for training purposes
        completion += feedback
        mask += [0] * len(feedback)
        logprobs += [0.0] * len(feedback)
    return {"prompt_ids": prompt_ids, "completion_ids": completion[:budget], "logprobs": logprobs[:budget],
            "env_mask": mask[:budget], "rewards": rewards, "info": info}


__all__ = ["KernelToolEnv", "environment_factory", "make_rollout_func", "rollout_reward", "task_dataset"]
