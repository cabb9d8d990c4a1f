"""`python -m kernelgym ...` runs the CLI, for environments where the `kernelgym` script is not on PATH
(a source checkout, a venv not activated)."""

from kernelgym.cli import main

main()
