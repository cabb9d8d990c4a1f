"""KernelBench level 4 offline: the 20 whole-model problems, built at random weights from kept config data.

KernelBench's level-4 files load Hugging Face models with `from_pretrained`, which needs the Hub. Here each
problem is generated as a KernelBench-format module that builds the same architecture with
`AutoModelForCausalLM.from_config` from the model's published configuration numbers, kept in
`kernelgym/suites/level4/models.json` (speed does not depend on the weights' values). Where the local Hugging
Face cache holds a model's real `config.json`, its numbers are used instead (nothing is ever downloaded).

The config keys that the cpu size replaces become module-level constants of the generated file, so the cpu
size is an ordinary `KERNELGYM["sizes"]["cpu"]` dict: fewer and narrower layers, a smaller batch and sequence,
the same vocabulary and the same kind of blocks. The models need `transformers` (extra `level4` or `agents`).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from pprint import pformat
from typing import Any

from kernelgym.errors import SuiteUnavailableError
from kernelgym.tasks.task import Task, constant_values, task_from_source
from kernelgym.tasks.taskset import TaskSet

LEVEL = 4
SUITE = "kernelbench"
INSTALL_HINT = "pip install 'kernelgym[level4]' (transformers>=5.2; the agents extra has it too)"
# Bookkeeping keys of a real config.json that say nothing about the forward pass.
_NOT_ARCHITECTURE = {"architectures", "_name_or_path", "transformers_version", "task_specific_params",
                     "torch_dtype", "dtype", "id2label", "label2id", "model_type"}
# Constants of a generated problem that are not config numbers.
_NOT_CONFIG = {"model_name", "model_type", "batch_size", "sequence_length", "other_config", "KERNELGYM"}


@dataclass(frozen=True)
class Problem:
    problem_id: int
    model_name: str
    batch_size: int
    sequence_length: int

    @property
    def file_name(self) -> str:
        """KernelBench's own name: `7_gpt2_bs32_seq256.py`."""
        model = self.model_name.replace("/", "-").replace(".", "p")
        return f"{self.problem_id}_{model}_bs{self.batch_size}_seq{self.sequence_length}.py"

    @property
    def cpu_batch_size(self) -> int:
        return 1 if self.batch_size == 1 else 2 if self.batch_size <= 32 else 4

    @property
    def cpu_sequence_length(self) -> int:
        return max(16, min(self.sequence_length // 8, 128))


def _data_path() -> Path:
    return Path(str(resources.files("kernelgym") / "suites" / "level4" / "models.json"))


@cache
def _data() -> dict[str, Any]:
    return json.loads(_data_path().read_text())


def problems() -> list[Problem]:
    return [Problem(*row) for row in _data()["problems"]]


def kept_config(model_name: str) -> dict[str, Any]:
    """The published numbers kernelgym keeps for a model (model_type included)."""
    return dict(_data()["models"][model_name]["config"])


def cached_config(model_name: str) -> dict[str, Any] | None:
    """The model's real config.json from the local Hugging Face cache, or None (never downloads)."""
    home = os.environ.get("HF_HOME", os.path.join(os.path.expanduser("~"), ".cache", "huggingface"))
    hub = Path(os.environ.get("HF_HUB_CACHE", os.path.join(home, "hub")))
    repo = hub / f"models--{model_name.replace('/', '--')}"
    try:
        revision = (repo / "refs" / "main").read_text().strip()
        return json.loads((repo / "snapshots" / revision / "config.json").read_text())
    except (OSError, ValueError):
        return None


def model_config(model_name: str) -> tuple[dict[str, Any], str]:
    """(config numbers, where they came from): the cached real config.json, else the kept numbers."""
    kept = kept_config(model_name)
    real = cached_config(model_name)
    if real is None or real.get("model_type") != kept["model_type"]:
        return kept, "kept in kernelgym/suites/level4/models.json"
    numbers = {k: v for k, v in real.items() if k not in _NOT_ARCHITECTURE}
    # Over the kept numbers: a key the real file leaves to its class's default keeps the published value.
    return {**kept, **numbers}, "the local Hugging Face cache's config.json"


def fetch_configs() -> list[str]:
    """Download each level-4 model's config.json (a few KB, no weights) into the local Hugging Face cache,
    where the problems then read it; needs the Hub and `huggingface_hub` (installed with transformers)."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise SuiteUnavailableError(f"fetching the configs needs huggingface_hub: {INSTALL_HINT}") from None
    paths = []
    for name in _data()["models"]:
        try:
            paths.append(hf_hub_download(name, "config.json"))
        except Exception as exc:  # noqa: BLE001 (offline, a firewall, a moved repository: one clear message)
            raise SuiteUnavailableError(f"could not fetch {name}'s config.json ({type(exc).__name__}: "
                                        f"{str(exc)[:200]}); the kept numbers stay in use") from None
    return paths


def problem_source(problem: Problem) -> str:
    """The problem as a KernelBench-format module (the gpu size is KernelBench's own batch and sequence)."""
    config, origin = model_config(problem.model_name)
    model_type = config.pop("model_type")
    cpu = dict(_data()["models"][problem.model_name]["cpu"])
    sized = {name: config[name] for name in cpu}  # config keys the cpu size replaces: module constants
    rest = {k: v for k, v in config.items() if k not in sized and k != "vocab_size"}
    constants = "\n".join(f"{name} = {value!r}" for name, value in sized.items())
    merged = ", ".join(f"{name!r}: {name}" for name in ["vocab_size", *sized])
    cpu_size = {"batch_size": problem.cpu_batch_size, "sequence_length": problem.cpu_sequence_length, **cpu}
    return f'''import torch
import torch.nn as nn
from transformers import AutoConfig, AutoModelForCausalLM


class Model(nn.Module):
    """{problem.model_name} as a causal language model, returning the logits (KernelBench level 4).

    Built from its configuration at random weights, in eval mode as `from_pretrained` leaves a model
    (dropout off). The configuration's numbers are {origin}.
    """

    def __init__(self, model_type, config_items):
        super().__init__()
        config = AutoConfig.for_model(model_type, **dict(config_items))
        self.model = AutoModelForCausalLM.from_config(config)
        self.model.eval()

    def forward(self, x):
        return self.model(x).logits


model_name = {problem.model_name!r}
model_type = {model_type!r}
batch_size = {problem.batch_size}
sequence_length = {problem.sequence_length}
vocab_size = {config["vocab_size"]}
{constants}
other_config = {pformat(rest, width=100, sort_dicts=False)}


def get_inputs():
    return [torch.randint(0, vocab_size, (batch_size, sequence_length))]


def get_init_inputs():
    # (key, value) pairs: init inputs travel to the judge's worker as plain values and lists
    return [model_type, list({{**other_config, {merged}}}.items())]


KERNELGYM = {{"category": "architecture", "sizes": {{"cpu": {cpu_size!r}}}}}
'''


def tasks() -> TaskSet:
    """The 20 level-4 problems (generated when read; building a model needs `transformers`)."""

    def load() -> list[Task]:
        return [task_from_source(problem_source(p), suite=SUITE, level=LEVEL, file_name=p.file_name)
                for p in problems()]

    return TaskSet(load, "kernelbench L4 (offline)")


def is_level4(task: Task) -> bool:
    return task.suite == SUITE and task.level == LEVEL


def unbuildable_reason(task: Task) -> str | None:
    """Why this level-4 problem's architecture cannot be built here, or None when it can.

    Checks what building needs without building the (possibly billions of parameters) model: transformers,
    a configuration class for the model type that accepts the numbers, and a causal-LM class for it.
    """
    try:
        import transformers
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    except ImportError:
        return f"level 4 builds its models with transformers, which is not installed: {INSTALL_HINT}"
    model_type, config = _config_of(task.source)
    class_name = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(model_type)
    if class_name is None:
        return (f"transformers {transformers.__version__} has no causal-LM class for model type "
                f"{model_type!r}")
    try:
        getattr(transformers, class_name)
        transformers.AutoConfig.for_model(model_type, **config)
    except Exception as exc:  # noqa: BLE001 (a removed model or a config the version refuses)
        return (f"transformers {transformers.__version__} cannot build {class_name} "
                f"({type(exc).__name__}: {str(exc)[:200]})")
    return None


def _config_of(source: str) -> tuple[str, dict[str, Any]]:
    """(model type, config numbers) of a generated problem, read from its constants without running it."""
    values = constant_values(source)
    config = {k: v for k, v in values.items() if k not in _NOT_CONFIG}
    return values["model_type"], {**values["other_config"], **config}


def without_unbuildable(tasks: Iterable[Task], *, named: bool = False) -> list[Task]:
    """`tasks` less the level-4 problems that cannot be built here, each named with its reason.

    When they were asked for by name (`named`), or none is left, that is an error; otherwise a warning.
    """
    kept, refused = [], []
    for task in tasks:
        reason = unbuildable_reason(task) if is_level4(task) else None
        (refused if reason else kept).append((task, reason))
    if not refused:
        return [t for t, _ in kept]
    lines = "; ".join(f"{t.id}: {reason}" for t, reason in refused)
    if named or not kept:
        raise SuiteUnavailableError(f"cannot build these level-4 problems here: {lines}")
    warnings.warn(f"left out level-4 problems that cannot be built here: {lines}", stacklevel=2)
    return [t for t, _ in kept]
