"""Every `kernelgym ... --help` page gives one example; `kernelgym --version` prints the package's version."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

import kernelgym
from kernelgym.cli import app

runner = CliRunner()


def _command_paths() -> list[list[str]]:
    """Every command and group of the CLI, as the words that name it (the root is [])."""
    root = typer.main.get_command(app)
    paths, todo = [], [([], root)]
    while todo:
        path, command = todo.pop()
        paths.append(path)
        if hasattr(command, "list_commands"):  # a group (typer bundles its own click: no isinstance)
            context = command.context_class(command)
            todo += [([*path, name], command.get_command(context, name))
                     for name in command.list_commands(context)]
    return paths


def test_every_help_page_gives_one_example():
    paths = _command_paths()
    assert ["tasks", "list"] in paths and ["skills", "search"] in paths and ["train", "rl"] in paths
    lacking = []
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (path, result.output)
        examples = [line for line in result.output.splitlines() if "Example: kernelgym " in line]
        if len(examples) != 1:
            lacking.append(" ".join(path) or "kernelgym")
    assert not lacking, f"help pages without exactly one example: {lacking}"


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"kernelgym {kernelgym.__version__}"
