"""`kernelgym tasks list --level N`: a level the suite lacks is one error line and a non-zero exit."""

from __future__ import annotations

from typer.testing import CliRunner

from kernelgym.cli import app


def test_unknown_level_is_an_error():
    result = CliRunner().invoke(app, ["tasks", "list", "--level", "7"])
    assert result.exit_code == 1
    expected = "error: --level 7: the bundled suite has no such level; its levels: 1, 2, 3"
    assert result.output.strip() == expected


def test_known_level_lists_its_tasks():
    result = CliRunner().invoke(app, ["tasks", "list", "--level", "3", "--json"])
    assert result.exit_code == 0
    assert result.output.count('"level": 3') == len(result.output.strip().splitlines()) > 0
