"""daVinci RL throughput on one GPU: rollout episodes per minute, generated tokens per second, and how busy
the judge's timing slot is during training. One RL step (2 tasks x 2 rollouts x 2 turns) took 85 s on an
H200, so the defaults run two steps, about 3 minutes; the results are rewritten after every step.

    python benchmarks/agents/davinci_h200.py --out "$OUT" [--seconds 100] [--backend triton]

The generator is a tiny random model built here (no download; needs transformers, trl and tokenizers). A
random model never writes a kernel, so to give the judge the work a training run gives it, each policy
reply the model generates (its tokens and time are counted) is then replaced by the bundled example
solution of the task before it goes to the environment, and each summary by a well-formed one, so the
gate re-runs the solution as it would in training.
The timing slot is sampled every 10 ms from a side thread with a non-blocking lock attempt (a free slot
is held for microseconds by the probe). Writes `davinci_h200.json` and `davinci_h200.md` under --out.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import threading
import time
from pathlib import Path


class SlotProbe:
    """Fraction of samples in which the machine's timing slot for `device` was held by an evaluation."""

    def __init__(self, device: str, period_s: float = 0.01):
        from kernelgym.workers import locks

        locks.prepare()
        self.path = locks.lock_path(device)  # the slot the pool's workers take
        self.period_s, self.busy, self.samples = period_s, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with open(self.path, "a") as handle:
            while not self._stop.is_set():
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(handle, fcntl.LOCK_UN)
                except BlockingIOError:
                    self.busy += 1
                self.samples += 1
                time.sleep(self.period_s)

    def __enter__(self) -> SlotProbe:  # noqa: PYI034 (Python 3.10 has no typing.Self)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def fraction(self) -> float:
        return self.busy / max(self.samples, 1)


class ReplayingBackbone:
    """The real backbone's generation (counted), with policy replies swapped for the bundled solution."""

    def __init__(self, backbone, solutions: dict[str, str]):
        self.inner, self.solutions = backbone, solutions
        self.tokens, self.gen_s, self.calls = 0, 0.0, 0
        self.current_task = ""

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate_batch(self, role, conversations, **kwargs):
        t0 = time.monotonic()
        outs = self.inner.generate_batch(role, conversations, **kwargs)
        self.gen_s += time.monotonic() - t0
        self.tokens += sum(len(out.completion_ids) for out in outs)
        self.calls += 1
        for messages, out in zip(conversations, outs, strict=True):
            self._swap(role, messages, out)
        return outs

    def _swap(self, role, messages, out) -> None:
        if role == "policy":
            for task_id, source in self.solutions.items():
                if f"Task: {task_id} " in messages[1]["content"]:
                    out.text = f"```python\n{source}\n```"
        if role == "summary":  # a well-formed skill, so the gate re-runs the solution as in training
            from kernelgym.agents.davinci.roles import teacher_summary
            from kernelgym.tasks import resolve_task

            task = resolve_task(messages[1]["content"].split()[1])
            out.text = teacher_summary(task.name, task.category, "any", "")


def main(args) -> None:
    import torch

    from kernelgym import EvalPool
    from kernelgym.agents.davinci import rewards
    from kernelgym.agents.davinci.backbone import Backbone
    from kernelgym.agents.davinci.config import BackboneConfig, EpisodeConfig, RLConfig
    from kernelgym.agents.davinci.episode import EpisodeRunner
    from kernelgym.agents.davinci.reinforce import make_optimizer, reinforce_step
    from kernelgym.agents.tiny import make_tiny_model
    from kernelgym.skill_store import SkillStore
    from kernelgym.solutions import examples

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    solutions = {e.task_id: e.source for e in examples(args.backend) if e.task_id.startswith("bundled/L1/")}
    task_ids = sorted(solutions)
    folder = make_tiny_model(out / "tiny-model", context=8192, hidden=64)
    backbone = Backbone(BackboneConfig(model=str(folder), device=device, max_prompt_tokens=4096))
    gen = ReplayingBackbone(backbone, solutions)
    config = RLConfig(episode=EpisodeConfig(backend=args.backend, size="gpu" if device == "cuda" else "cpu",
                                            max_turns=args.turns, task_ids=task_ids,
                                            policy_tokens=args.tokens, gate_runs=2),
                      tasks_per_step=args.tasks, group_size=args.group)
    optimizer = make_optimizer(backbone, 1e-4)
    episodes, steps, train_s = 0, 0, 0.0
    verdicts: dict[str, int] = {}

    def report(wall: float, probe: SlotProbe, runner) -> dict:
        """Written after every RL step, so a run cut by a time limit still leaves its numbers."""
        result = {
            "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "backend": args.backend,
            "wall_s": round(wall, 1), "rl_steps": steps, "episodes": episodes,
            "episodes_per_min": round(episodes / wall * 60, 2),
            "generated_tokens": gen.tokens, "generation_s": round(gen.gen_s, 1),
            "tokens_per_s_generating": round(gen.tokens / max(gen.gen_s, 1e-9), 1),
            "tokens_per_s_wall": round(gen.tokens / wall, 1), "train_step_s": round(train_s, 2),
            "timing_slot_busy_fraction": round(probe.fraction, 3), "slot_samples": probe.samples,
            "verdicts": verdicts, "gate_calls": runner.gate_calls, "skills_admitted": sorted(runner.admitted),
            "settings": vars(args),
        }
        (out / "davinci_h200.json").write_text(json.dumps(result, indent=1))
        lines = [f"# daVinci RL throughput ({result['device']}, {args.backend})", "",
                 "| metric | value |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in result.items() if k != "settings"]
        (out / "davinci_h200.md").write_text("\n".join(lines) + "\n")
        return result

    with EvalPool(workers=args.workers) as pool, SkillStore(out / "skills.sqlite") as store:
        runner = EpisodeRunner(config.episode, gen, store, pool)
        runner.run(task_ids[0])  # warm-up: builds, caches, CUDA contexts (not counted)
        t0 = time.monotonic()
        gen.tokens, gen.gen_s, gen.calls = 0, 0.0, 0
        with SlotProbe("cuda" if device == "cuda" else "cpu") as probe:
            while time.monotonic() - t0 < args.seconds:
                chosen = [task_ids[(steps * args.tasks + i) % len(task_ids)] for i in range(args.tasks)]
                played = runner.run_batch([t for t in chosen for _ in range(args.group)])
                groups = [played[i * args.group:(i + 1) * args.group] for i in range(len(chosen))]
                rewards.assign(groups, config.rewards)
                t1 = time.monotonic()
                reinforce_step(backbone, optimizer, [t for g in groups for t in g])
                train_s += time.monotonic() - t1
                steps += 1
                episodes += sum(len(g) for g in groups)
                for traj in (t for g in groups for t in g):
                    for v in traj.verdicts:
                        verdicts[v] = verdicts.get(v, 0) + 1
                result = report(time.monotonic() - t0, probe, runner)
                print(f"step {steps}: {episodes} episodes, {result['episodes_per_min']}/min, slot busy "
                      f"{result['timing_slot_busy_fraction']}", flush=True)
        runner.close()
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.environ.get("OUT", "runs/davinci-h200"))
    parser.add_argument("--seconds", type=float, default=100.0,
                        help="measured time (after one warm-up episode)")
    parser.add_argument("--backend", default="triton")
    parser.add_argument("--tasks", type=int, default=2, help="tasks per RL step")
    parser.add_argument("--group", type=int, default=2, help="rollouts per task")
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--tokens", type=int, default=256, help="max new tokens per policy turn")
    parser.add_argument("--workers", type=int, default=4, help="judge workers")
    main(parser.parse_args())
