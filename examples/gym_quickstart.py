"""kernelgym as a Gymnasium environment, driven by a scripted policy.

The policy replays kernelgym's bundled C++ solutions: on its first turn it only talks (a reply without code
is a failed turn, not an error), then it sends the bundled solution in a ```python block, then it says DONE.
Runs on any machine (the cpp backend builds and times C++/OpenMP kernels on the CPU):

    python examples/gym_quickstart.py                      # every task with a bundled cpp solution, level 1
    python examples/gym_quickstart.py --level 2 --limit 2 --trajectory runs/quickstart.jsonl

For training an LLM on these episodes with TRL's GRPOTrainer, see kernelgym.envs.trl_adapter
(envs/trl_adapter.py): `environment_factory(...)` for tool calling, `make_rollout_func(...)` for plain
multi-turn chat; and docs/envs.md.
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import kernelgym  # noqa: F401  (registers the KernelGym-* and KernelBench-* ids)
from kernelgym.solutions import examples


class ReplayPolicy:
    """Turn 1: talk; turn 2: the bundled solution; turn 3: DONE."""

    def __init__(self, solution_source: str):
        self.solution = solution_source

    def __call__(self, observation: dict) -> str:
        turn = int(observation["turn"])
        if turn == 0:
            return "I will start from a single OpenMP loop over the flattened tensor."
        if turn == 1:
            return f"Here is the kernel:\n\n```python\n{self.solution.rstrip()}\n```"
        return "DONE"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--level", type=int, default=1, choices=(1, 2, 3))
    parser.add_argument("--limit", type=int, default=None, help="at most this many tasks")
    parser.add_argument("--trajectory", default=None, help="write the episodes as JSONL here")
    parser.add_argument("--reward", default="speedup", help="speedup, fast_p, fast_1.5, drkernel")
    args = parser.parse_args()

    env = gym.make(
        f"KernelGym-L{args.level}-v0",
        backend="cpp",
        size="cpu",
        max_turns=4,
        reward=args.reward,
        render_mode="ansi",
        trajectory_path=args.trajectory,
    )
    solutions = [s for s in examples("cpp") if s.task_id.startswith(f"bundled/L{args.level}/")][: args.limit]
    for seed, solution in enumerate(solutions):
        policy = ReplayPolicy(solution.source)
        obs, info = env.reset(seed=seed, options={"task_id": solution.task_id})
        print(f"=== {info['task_id']} ({info['backend']}, size {info['size']})")
        episode_return, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(policy(obs))
            episode_return += reward
            done = terminated or truncated
            print(f"turn {info['turn']}: {info['verdict']:<13} reward {reward:+.3f}")
        best = info.get("best")
        best_text = (f"best {best['speedup']:.3g}x (verified: {best['verified']})" if best
                     else "no correct solution")
        print(f"return {episode_return:+.3f}; {best_text}")
        print(env.render())
    env.close()
    if args.trajectory:
        print(f"trajectories: {args.trajectory} (read them with kernelgym.envs.read_episodes)")


if __name__ == "__main__":
    main()
