"""Auditing a privatizer: ``privaudit audit`` (the user's own, checked, its guarantee tested,
then benchmarked) and ``privaudit audit-guarantee`` (each stated guarantee, tested)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from privaudit.cli.base import (
    EXIT_GUARANTEE_VIOLATED,
    app,
    check_cache_dir,
    exit_for_failures,
    user_errors,
)
from privaudit.cli.options import (
    MAP_HELP,
    DeviceOption,
    corpus_params,
    parse_params,
    warnings_as_lines,
)
from privaudit.cli.run import FreshOption
from privaudit.registry import DEFENSES


@app.command()
@user_errors
def audit(
    target: Annotated[
        str, typer.Argument(help="Your privatizer: module:Class or path/file.py:Class.")
    ],
    knob: Annotated[
        str | None,
        typer.Option(
            help="Its privacy knob and the values to sweep: NAME=v1,v2,... (e.g. eta=10,50,100)."
        ),
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option(help="Other constructor parameters, key=value.")
    ] = None,
    preset: Annotated[
        str, typer.Option(help="Grid to run it in: corpus, attacks, utility ('quick', 'smoke').")
    ] = "quick",
    config: Annotated[
        Path | None, typer.Option(help="A grid config file instead of --preset.")
    ] = None,
    compare: Annotated[
        str, typer.Option(help="Built-in defenses drawn beside it, comma-separated.")
    ] = "t2t,pct2t",
    label: Annotated[str | None, typer.Option(help="Its name in tables and plots.")] = None,
    out: Annotated[Path, typer.Option(help="Where run directories are created.")] = Path("reports"),
    run_dir: Annotated[Path | None, typer.Option(help="Write into this directory.")] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    map_: Annotated[str | None, typer.Option("--map", help=MAP_HELP)] = None,
    allow_failures: Annotated[
        bool, typer.Option(help="Exit 0 even when some cells failed (default: exit 3).")
    ] = False,
    strict: Annotated[
        bool, typer.Option(help="Stop, exit 6, when its declared guarantee is violated.")
    ] = False,
    device: DeviceOption = None,
    fresh: FreshOption = False,
) -> None:
    """Audit your privatizer: conformance checks, a test of its declared guarantee, then every
    applicable attack and the utility evaluator at each knob value, beside the built-in
    defenses; writes the report.

    Exit status as for `run`: 0 when every cell is ok or n/a, 2 for an error before any work
    (a failed conformance check included), 3 when some cells failed (0 with
    --allow-failures), 4 when the disk is full, 6 with --strict when the declared guarantee
    is violated (before any grid), 130 on Ctrl-C and 143 on SIGTERM."""
    # lazy: the audit and the terminal tables bring numpy, privaudit.audit and
    # privaudit.leaderboard, which --help does not load
    from privaudit.cli.render import print_summary
    from privaudit.outputs import audit as run_audit
    from privaudit.runtime.cell_store import fresh_cells

    check_cache_dir()
    with warnings_as_lines(), fresh_cells(fresh):
        result = run_audit(
            target,
            knob=knob,
            params=parse_params(param),
            preset=config if config is not None else preset,
            compare=[c.strip() for c in compare.split(",") if c.strip()],
            label=label,
            run_dir=run_dir,
            reports_root=out,
            progress=progress,
            corpus_params=corpus_params(map_),
            device=device,
            strict=strict,
        )
    _print_checks(result)
    if result.run is None:  # --strict and a violated guarantee: nothing was benchmarked
        raise typer.Exit(EXIT_GUARANTEE_VIOLATED)
    print_summary(result.run)
    exit_for_failures(result.run.frame, allow_failures, result.run.strength_failed)


def _print_checks(result: Any) -> None:
    """What the audit says of the privatizer before its grid: the test of its guarantee, the
    conformance checks and their warnings; a failed check is the command's error."""
    for g in result.guarantees:  # the verdict on its own claim comes first
        bad = g.verdict == "violated"
        typer.secho(g.line(), fg=typer.colors.RED if bad else None, bold=bad)
    typer.echo("Conformance checks:")
    for check in result.checks:
        typer.echo(f"  {check.line()}")
    for check in result.warnings:  # e.g. an identity privatizer: the grid ran, but look
        typer.secho(
            f"WARNING: {result.label} {check.detail}", fg=typer.colors.YELLOW, bold=True, err=True
        )
    if result.failed:
        raise ValueError(
            f"{len(result.failed)} conformance check(s) failed; fix the privatizer and rerun "
            "(nothing was benchmarked)."
        )


@app.command("audit-guarantee")
@user_errors
def audit_guarantee_cmd(
    defense: Annotated[
        str,
        typer.Option(
            help="A built-in defense (see `privaudit list defenses`), a plugin "
            "(file.py:Class or module:Class), or 'all'."
        ),
    ] = "all",
    knob: Annotated[
        list[float] | None,
        typer.Option(help="Knob value to test (repeatable); default: the quick levels."),
    ] = None,
    alpha: Annotated[float, typer.Option(help="Error level: confidence is 1 - alpha.")] = 0.05,
    seed: Annotated[int, typer.Option(help="Random seed of the pairs and the draws.")] = 0,
    backbone: Annotated[str | None, typer.Option(help="Model name or path.")] = None,
    param: Annotated[
        list[str] | None, typer.Option(help="Extra defense parameter key=value (repeatable).")
    ] = None,
    strict: Annotated[
        bool, typer.Option(help=f"Exit {EXIT_GUARANTEE_VIOLATED} when a claim is violated.")
    ] = False,
    csv: Annotated[Path | None, typer.Option(help="Also write the table to this CSV.")] = None,
    test: Annotated[
        list[str] | None,
        typer.Option(
            help="Run only this test of a Laplace step (cape, dpnr; repeatable), the others "
            "switched off: 'per coordinate', 'batch of two', 'exact original', "
            "'independence (exact repeat)', 'noise scale', 'per coordinate (δ = 1)', "
            "'whole vector'."
        ),
    ] = None,
) -> None:
    """Test each stated privacy guarantee empirically: an exact lower bound on the privacy
    loss at confidence 1 - alpha, against the claim (the guarantee audit); a claim above what
    the sample could show is "untestable", with the draws that would test it. Exit 6 with
    --strict when a claim is violated."""
    # lazy: the audit brings numpy, scipy and the defenses, which --help does not load
    from privaudit.audit.guarantee_audit import audit_builtins, audit_levels, to_frame
    from privaudit.cli.render import print_guarantees

    if not 0 < alpha < 1:
        raise ValueError(f"--alpha is a probability in (0, 1), got {alpha}.")
    if csv is not None:  # before the audit: it takes minutes, the write an instant
        from privaudit.audit.store import check_output_file  # lazy: privaudit.audit

        check_output_file(csv, "--csv")
    if defense == "all":
        if knob or param or test:
            raise ValueError("--knob, --param and --test need one --defense NAME, not 'all'.")
        audits = audit_builtins(backbone=backbone, alpha=alpha, seed=seed)
    else:
        DEFENSES.get(defense)  # an unknown name: one line with the known ones, before work
        audits = audit_levels(
            defense,
            knob,
            params=parse_params(param),
            backbone=backbone,
            alpha=alpha,
            seed=seed,
            tests=test or None,
        )
    print_guarantees(
        audits,
        f"guarantee audit (confidence {1 - alpha:.0%} per level, seed {seed}; {len(audits)} "
        "levels, not corrected across them)",
    )
    if csv is not None:  # its folder was made by the check above
        from privaudit.audit.store import write_atomic  # lazy: privaudit.audit

        table = to_frame(audits)
        write_atomic(csv, lambda p: table.to_csv(p, index=False))
        typer.echo(f"Wrote: {csv}")
    if strict and any(a.verdict == "violated" for a in audits):
        raise typer.Exit(EXIT_GUARANTEE_VIOLATED)
