"""Held-out evaluation during RL: the policy's episodes on the tasks of another source, at each checkpoint.

`RLConfig.heldout_suite` names the source (a suite name, `hf`, or a folder of task files). Its tasks are
played once each with the training's episode settings, skills retrieved from the training's library, but
nothing is summarized, gated or trained from them. A held-out task that is also a training task is a
ConfigError. Each evaluation is one line of `heldout.jsonl` (the step, the metrics of rl.episode_metrics
and each task's verdicts and best speedup) and TensorBoard scalars under `heldout/`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from kernelgym.errors import ConfigError


class HeldoutEvaluation:
    """An EpisodeRunner over the held-out source, made (and its tasks read) before training starts."""

    def __init__(self, config, backbone, store, pool, training_ids: list[str]):
        from kernelgym.agents.davinci.episode import EpisodeRunner

        episode = dataclasses.replace(config.episode, suite=config.heldout_suite, task_ids=None,
                                      summarize="never")
        self.runner = EpisodeRunner(episode, backbone, store, pool)
        self.task_ids = [t.id for t in self.runner.env.unwrapped.tasks]
        shared = sorted(set(self.task_ids) & set(training_ids))
        if shared:
            self.close()
            raise ConfigError(f"heldout_suite {config.heldout_suite!r} shares tasks with the training set "
                              f"({shared[:3]}): held-out tasks are never trained on")

    def run(self, step: int, out: Path, writer=None) -> dict[str, Any]:
        """One episode per held-out task; the line written to heldout.jsonl."""
        from kernelgym.agents.davinci.rl import episode_metrics

        played = self.runner.run_batch(self.task_ids)
        record = {"step": step, **episode_metrics([played]),
                  "tasks": {t.task_id: {"verdicts": t.verdicts, "best_speedup": t.best_speedup,
                                        "best_verified_speedup": t.best_verified_speedup} for t in played}}
        with open(out / "heldout.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        if writer is not None:
            for key, value in record.items():
                if isinstance(value, float):
                    writer.add_scalar(f"heldout/{key}", value, step)
            writer.flush()
        return record

    def close(self) -> None:
        self.runner.close()
