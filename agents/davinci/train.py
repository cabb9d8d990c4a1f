"""`kernelgym train sft|rl [--config FILE] [KEY=VALUE ...]` (also `python -m kernelgym.agents.davinci.train`).

Every field of SFTConfig / RLConfig (agents/davinci/config.py) can be set in a TOML or JSON file and
overridden on the command line with dotted keys, e.g.

    kernelgym train sft --config sft.toml backbone.model=smollm2 episode.task_ids='["L1/1_ReLU"]'
    kernelgym train rl backbone.model=runs/davinci-sft/model steps=20 group_size=4 episode.max_turns=2
    kernelgym train rl episode.suite=my_tasks/train heldout_suite=my_tasks/heldout   # folders of task files
"""

from __future__ import annotations

import json
from dataclasses import asdict

import typer

from kernelgym.errors import KernelGymError

app = typer.Typer(help="Train the daVinci agent (skill selection, policy, skill summary on one backbone).",
                  no_args_is_help=True, pretty_exceptions_enable=False)

ConfigOpt = typer.Option(None, "--config", "-c", help="TOML or JSON file with the config's fields")
OverridesArg = typer.Argument(None, help="KEY=VALUE overrides, dotted for sections (episode.max_turns=2)")
PrintOpt = typer.Option(False, "--print-config", help="print the resolved config and exit")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _load_and_run(config_class: str, runner: str, config: str | None, overrides: list[str] | None,
                  print_config: bool, summary) -> None:
    """The config from the file then the overrides; printed, or run by `runner` (imported only then) and its
    result summarised. A KernelGymError ends the command with its message, not a traceback."""
    import importlib

    from kernelgym.agents.davinci import config as configs

    try:
        cfg = configs.load_config(getattr(configs, config_class), config, overrides)
        if print_config:
            typer.echo(json.dumps(asdict(cfg), indent=1))
            return
        module, name = runner.rsplit(".", 1)
        result = getattr(importlib.import_module(module), name)(cfg)
    except KernelGymError as exc:
        _fail(str(exc))
    typer.echo(summary(result))


@app.command("sft", epilog="Example: kernelgym train sft --print-config")
def sft_command(config: str | None = ConfigOpt, overrides: list[str] | None = OverridesArg,
                print_config: bool = PrintOpt) -> None:
    """SFT cold start: replayed bundled solutions, bench runs, external JSONL; filtered; SFTTrainer."""
    _load_and_run("SFTConfig", "kernelgym.agents.davinci.sft.run_sft", config, overrides, print_config,
                  lambda r: f"SFT done: {r.examples} examples (filter: {r.filter_report}); "
                            f"loss {r.train_loss}; model in {r.output_dir}")


@app.command("rl", epilog="Example: kernelgym train rl --config rl.toml --print-config")
def rl_command(config: str | None = ConfigOpt, overrides: list[str] | None = OverridesArg,
               print_config: bool = PrintOpt) -> None:
    """Multi-turn REINFORCE with per-role advantages; resumes from the latest checkpoint in output_dir."""
    _load_and_run("RLConfig", "kernelgym.agents.davinci.rl.run_rl", config, overrides, print_config,
                  lambda r: f"RL done: {r.steps_done} steps; {len(r.admitted)} skills admitted "
                            f"({r.gate_calls} gate calls); "
                            + (f"held-out correct_rate {r.heldout[-1]['correct_rate']:.2f} on "
                               f"{len(r.heldout[-1]['tasks'])} tasks; " if r.heldout else "")
                            + f"outputs in {r.output_dir}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
