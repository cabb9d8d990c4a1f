"""Template parameter tuning with Optuna: a solution that exposes parameters (block and tile constants,
unroll counts, the OpenMP schedule, Triton block sizes and warps; see templates.py) is tuned by an Optuna
study, each trial judged by kernelgym. The study is ask/tell: the caller judges the source a trial gives
and tells its score. The trials judged so far can be given back to rebuild the study (a resumed search).
Optuna is imported only here (pip install optuna, or the `agents` extra).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelgym.agents.baselines import templates
from kernelgym.errors import KernelGymError


# Which parameters to tune first when a solution exposes more than max_params: block and tile constants,
# then warps and stages, then other launch constants, unroll counts, and last the OpenMP schedule (the cpu
# judge may time with one thread, where it does not matter).
def _priority(p: templates.Param) -> int:
    if p.kind == "launch":
        return 1 if p.name.split("#")[0] in templates.LAUNCH_OPTIONS else 2
    return {"constant": 0, "unroll": 3, "schedule": 4}.get(p.kind, 5)


class TuningError(KernelGymError):
    pass


@dataclass
class TuningConfig:
    trials: int = 4  # judged trials per session
    max_params: int = 4  # the most parameters tuned at once
    seed: int = 0
    startup_trials: int = 2  # random trials before the TPE model is used


def tunable(source: str, max_params: int) -> list[templates.Param]:
    params = [p for p in templates.find_params(source) if len(p.choices) > 1]
    return sorted(params, key=_priority)[:max_params]


class TemplateTuner:
    """An Optuna study over one solution's parameters; the solution itself is its first trial."""

    def __init__(
        self,
        source: str,
        base_score: float,
        config: TuningConfig | None = None,
        history: list[dict[str, Any]] | None = None,
    ):
        try:
            import optuna
        except ImportError as exc:
            raise TuningError(
                "template tuning needs optuna: pip install optuna (or kernelgym[agents])"
            ) from exc
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.config = config or TuningConfig()
        self.source = source
        self.params = tunable(source, self.config.max_params)
        self.distributions = {
            p.name: optuna.distributions.CategoricalDistribution(p.choices) for p in self.params
        }
        sampler = optuna.samplers.TPESampler(
            seed=self.config.seed, n_startup_trials=self.config.startup_trials
        )
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self.history: list[dict[str, Any]] = []  # the judged trials (the base solution not among them)
        if self.params:
            self._add(templates.current_values(self.params), base_score)
        for item in history or []:
            self._add(item["params"], float(item["value"]))
            self.history.append({"params": dict(item["params"]), "value": float(item["value"])})

    def _add(self, values: dict[str, str], score: float) -> None:
        trial = self._optuna.trial.create_trial(
            params=dict(values), distributions=self.distributions, value=score
        )
        self.study.add_trial(trial)

    def ask(self) -> tuple[Any, str, dict[str, str]]:
        """A trial, the source it stands for, and its parameter values."""
        trial = self.study.ask(self.distributions)
        values = {name: str(v) for name, v in trial.params.items()}
        return trial, templates.apply(self.source, self.params, values), values

    def tell(self, trial: Any, values: dict[str, str], score: float) -> None:
        self.study.tell(trial, score)
        self.history.append({"params": dict(values), "value": score})

    def best(self) -> tuple[dict[str, str], float]:
        best = self.study.best_trial
        return {k: str(v) for k, v in best.params.items()}, float(best.value)
