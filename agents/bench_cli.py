"""`kernelgym bench`: a typer command function; kernelgym/cli.py mounts it with
`app.command("bench")(bench_command)`."""

from __future__ import annotations

import shlex
import sys

import typer

from kernelgym.agents.baselines import BASELINES


def bench_command(
    env: str = typer.Option("KernelGym-v0", "--env",
                            help="env id (KernelGym-L1-v0), a comma list, or a family for all levels "
                                 "(KernelGym-v0)"),
    policy: str = typer.Option("replay:cpp+cheats", "--policy",
                               help="replay:cpp[+cheats] | replay:PATH | smollm2 | hf:PATH_OR_NAME | "
                                    "openai:MODEL@BASE_URL | scripted:... | davinci:CHECKPOINT"),
    backend: str = typer.Option("cpp", "--backend", help="cpp, triton or cuda"),
    size: str = typer.Option("cpu", "--size", help="cpu or gpu problem sizes"),
    tasks: str = typer.Option("auto", "--tasks",
                              help="auto (the tasks the policy covers, else all), all, or globs/substrings, "
                                   "comma-separated (e.g. 'L1/*,*Gemm*')"),
    samples: int = typer.Option(1, "--samples", help="independent episodes per task"),
    turns: int | None = typer.Option(None, "--turns",
                                     help="replies per episode (best_of_n: N); default: replay's file count, "
                                          "else 4"),
    baseline: str | None = typer.Option(None, "--baseline",
                                        help=f"one of {', '.join(BASELINES)}; default: davinci for a "
                                             "davinci: policy, else refine"),
    concurrency: int = typer.Option(1, "--concurrency",
                                    help="episodes in flight (each evaluation uses a core)"),
    out: str | None = typer.Option(None, "--out",
                                   help="output folder (default runs/bench/<env>__<policy>__<baseline>)"),
    reward: str = typer.Option("speedup", "--reward", help="reward function name (kernelgym.rewards)"),
    seed: int = typer.Option(0, "--seed"),
    kernelbench_root: str | None = typer.Option(None, "--kernelbench-root",
                                                help="KernelBench checkout for KernelBench-*"),
    baseline_option: list[str] = typer.Option([], "--baseline-option", "-o",
                                               help="KEY=VALUE for the baseline's config (e.g. history=3), "
                                                    "repeatable"),
    eval_option: list[str] = typer.Option([], "--eval-option",
                                           help="KEY=VALUE for the judge (EvalOptions, e.g. "
                                                "timing_trials=20), repeatable"),
    evaluator: str = typer.Option("local", "--evaluator",
                                  help="local (worker processes here) or ray[://ADDRESS] (Ray actors; needs "
                                       "kernelgym[dist]; 'ray' alone: $RAY_ADDRESS or a new local cluster)"),
    no_tensorboard: bool = typer.Option(False, "--no-tensorboard", help="skip the TensorBoard scalars"),
    shapes: str = typer.Option("shown", "--shapes",
                               help="shown, or heldout: correctness also at shapes the judge draws"),
    dtype: str | None = typer.Option(None, "--dtype", help="fp32, bf16 or fp16 (default: the tasks' own)"),
    suite: str | None = typer.Option(None, "--suite",
                                     help="the tasks: bundled, backward, curriculum, kernelbench, hf, or a "
                                          "folder of task files (levelN/ subfolders, or flat)"),
) -> None:
    """Run a policy over a task set (resumable: rerun the same command to continue), then report fast_p."""
    from kernelgym.agents.bench_config import DEFAULT_ENV, SUITE_ENVS, BenchConfig

    if baseline is None:  # a daVinci checkpoint is benched the way it was trained: skills in the prompt
        baseline = "davinci" if policy.startswith("davinci:") else "refine"
    if suite in SUITE_ENVS and env == DEFAULT_ENV:  # a suite with ids of its own: recorded as those ids
        env, suite = SUITE_ENVS[suite], None
    options = _key_values("--baseline-option", baseline_option)
    judge = _key_values("--eval-option", eval_option)
    config = BenchConfig(env=env, suite=suite, policy=policy, baseline=baseline, backend=backend, size=size,
                         tasks=tasks, samples=samples, turns=turns, concurrency=concurrency, out=out,
                         reward=reward, seed=seed, kernelbench_root=kernelbench_root,
                         tensorboard=not no_tensorboard, baseline_options=options, eval_options=judge,
                         evaluator=evaluator, shapes=shapes, dtype=dtype)
    _run_and_report(config, "kernelgym bench " + " ".join(shlex.quote(a) for a in _bench_args()))


def _run_and_report(config, command: str) -> None:
    """One run; a bad configuration is a one-line error, an interruption keeps what finished."""
    from kernelgym.agents.bench import run_bench
    from kernelgym.errors import KernelGymError

    try:
        outcome = run_bench(config, command=command)
    except (KernelGymError, ValueError, TypeError, FileNotFoundError, ModuleNotFoundError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("interrupted: finished episodes are saved; rerun the same command to continue", err=True)
        raise typer.Exit(130) from None
    typer.echo(f"one page for the whole run: kernelgym view {outcome.out_dir}")
    if outcome.errors:
        raise typer.Exit(2)


def _key_values(flag: str, items: list[str]) -> dict:
    """Repeated KEY=VALUE options as a dict (values typed as in policy specs)."""
    from kernelgym.agents.policies import split_options

    bad = [o for o in items if "=" not in o]
    if bad:
        typer.echo(f"error: {flag} takes KEY=VALUE, not {bad[0]!r}", err=True)
        raise typer.Exit(1)
    return split_options("x?" + "&".join(items))[1] if items else {}


def _bench_args() -> list[str]:
    """The command line's arguments after the word `bench` (or all of them under `python -m`)."""
    args = sys.argv[1:]
    return args[args.index("bench") + 1:] if "bench" in args else args


def main() -> None:
    """`python -m kernelgym.agents.bench_cli ...` (the same command before kernelgym/cli.py mounts it)."""
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command("bench")(bench_command)
    app(sys.argv[1:])


if __name__ == "__main__":
    main()
