"""The ``privaudit`` command line: the commands, their options and how they end.

What the commands share in reading their input is in :mod:`privaudit.cli.options`, what they
print to the terminal in :mod:`privaudit.cli.render`. Heavy libraries (and the run store, the
runner and the leaderboard) load inside the commands that use them, so ``privaudit --help``
and ``privaudit list`` answer at once and ``privaudit privatize`` loads only its defense.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from enum import StrEnum
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from privaudit import __version__
from privaudit.cli.options import (
    MAP_HELP,
    DeviceOption,
    corpus_params,
    on_device,
    parse_params,
    read_stdin_lines,
    warnings_as_lines,
)
from privaudit.registry import ATTACKS, CORPORA, DEFENSES, UTILITY, build_defense
from privaudit.runtime.devices import check_device

app = typer.Typer(
    name="privaudit",
    help="Adversarial privacy auditing for text privatization: attack every defense, measure "
    "utility, and plot the privacy-utility frontier.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])

#: Exit codes: 0 every cell ok or n/a; 2 a user error before any work; 3 the run finished but
#: some cells failed (their reasons are in the summary and the report; --allow-failures: 0);
#: 4 the disk (or quota) is full: finished cells are kept, free space and --resume; 130 Ctrl-C
#: and 143 SIGTERM (128 + the signal, as a shell reports it): the run stopped cleanly, its
#: workers ended, finished cells kept, and the --resume command is printed. `report` and
#: `leaderboard` exit 5 on an unfinished run (its run.json says finished: false): the files
#: are written, and the first line says how many cells are missing and how to --resume.
#: `audit-guarantee --strict` and `audit --strict` exit 6 when a stated guarantee is violated.
EXIT_USAGE, EXIT_CELLS_FAILED, EXIT_DISK_FULL, EXIT_UNFINISHED = 2, 3, 4, 5
EXIT_GUARANTEE_VIOLATED = 6
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


def _version(value: bool) -> None:
    if value:
        typer.echo(f"privaudit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Adversarial privacy auditing for text privatization: attack every defense, measure
    utility, and plot the privacy-utility frontier."""


def _user_errors(func: F) -> F:
    """Errors a user can cause end in one clear line and exit code 2, not a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except typer.Exit:  # a deliberate exit status (click's Exit is a RuntimeError)
            raise
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM during a run (Interrupted)
            # lazy (both): privaudit.audit brings numpy and pydantic; only these errors need
            # it, and --help and privatize must not load it
            from privaudit.audit.executors import Interrupted

            message = str(exc) if isinstance(exc, Interrupted) else "Interrupted."
            typer.secho(message, fg=typer.colors.YELLOW, err=True)
            code = exc.exit_code if isinstance(exc, Interrupted) else EXIT_INTERRUPTED
            raise typer.Exit(code) from None
        except OSError as exc:
            from privaudit.audit.store import DiskFull, is_disk_full

            if not is_disk_full(exc):
                if isinstance(exc, FileNotFoundError):
                    typer.secho(f"Error: {exc}", fg=typer.colors.RED, err=True)
                    raise typer.Exit(EXIT_USAGE) from None
                raise
            if not isinstance(exc, DiskFull):  # not one of our writes: name what it could
                exc = DiskFull(Path(exc.filename or "a file"))
            typer.secho(f"Error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(EXIT_DISK_FULL) from None
        except (ValueError, TypeError, RuntimeError) as exc:
            typer.secho(f"Error: {exc}", fg=typer.colors.RED, err=True)
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper  # type: ignore[return-value]


class Listing(StrEnum):
    defenses = "defenses"
    attacks = "attacks"
    metrics = "metrics"
    corpora = "corpora"
    utility = "utility"
    all = "all"


@app.command("list")
@_user_errors
def list_cmd(
    what: Annotated[Listing, typer.Argument(help="Which registry to list.")] = Listing.all,
) -> None:
    """List the registered defenses, attacks, metrics, corpora and utility evaluators."""
    registries = {
        "defenses": DEFENSES, "attacks": ATTACKS, "corpora": CORPORA, "utility": UTILITY,
    }  # fmt: skip
    chosen = [w for w in Listing if w is not Listing.all] if what is Listing.all else [what]
    for title in (w.value for w in chosen):
        typer.secho(title, bold=True)
        if title == "metrics":
            _list_metrics()
            continue
        registry = registries[title]
        for name in registry.names():
            try:
                obj = registry.get(name)
            except Exception as exc:  # a broken plugin must not hide the others
                typer.echo(f"  {name:<20} (cannot load: {exc})")
                continue
            doc = (obj.__doc__ or "").strip().splitlines()[0] if obj.__doc__ else ""
            extra = ""
            if title == "defenses":
                extra = f"  [knob: {obj.knob or '-'}; guarantee: {obj.guarantee.describe()}]"
            elif title == "attacks":
                needs = [
                    label
                    for flag, label in (
                        (obj.needs_white_box, "white box"),
                        (obj.needs_query, "query access"),
                        (obj.needs_aux, "aux split"),
                    )
                    if flag
                ] + sorted(getattr(obj, "needs_knowledge", ()))  # declared records: background
                extra = (
                    f"  [reads: {', '.join(sorted(obj.accepts))}; metric: {obj.metric}"
                    f"{_direction_of(obj.metric)}; needs: {', '.join(needs) or 'the release only'}]"
                )
            typer.echo(f"  {name:<20} {doc}{extra}")


def _direction(higher_is_stronger: bool) -> str:
    return f"{'higher' if higher_is_stronger else 'lower'} = stronger attack"


def _direction_of(metric: str) -> str:
    """`` (higher = stronger attack)`` for a registered metric, nothing for another."""
    # lazy: the metric registry brings numpy and pydantic, which --help does not load
    from privaudit.metrics import find_metric

    spec = find_metric(metric)
    return f" ({_direction(spec.higher_is_stronger)})" if spec is not None else ""


def _list_metrics() -> None:
    """One line per registered metric (its family, direction, prediction kind, baseline and
    description), then the attack families."""
    # lazy: the metric registry brings numpy and pydantic, which --help does not load
    from privaudit.metrics import families, metrics

    for name in ATTACKS.names():  # a plugin's metric is registered when its attack loads
        try:
            ATTACKS.get(name)
        except Exception:  # `privaudit list attacks` says why it cannot load
            continue
    for name, spec in metrics().items():
        baseline = spec.baseline.label if spec.baseline is not None else "none"
        typer.echo(
            f"  {name:<20} {spec.description}  [family: {spec.family}; "
            f"{_direction(spec.higher_is_stronger)}; predictions: {spec.prediction_kind}; "
            f"baseline: {baseline}]"
        )
    typer.secho("metric families", bold=True)
    for name, family in families().items():
        each = f" (one per target: {family.of('<target>')})" if family.per_target else ""
        typer.echo(f"  {name:<20} {family.description}{each}")


@app.command()
@_user_errors
def run(
    preset: Annotated[
        str,
        typer.Option(
            help="Built-in grid: 'quick' (default), 'real' (the quick grid on SynthPAI), 'paper' "
            "(RAPT's; big machine) or 'smoke'."
        ),
    ] = "quick",
    config: Annotated[
        Path | None, typer.Option(help="A YAML or JSON grid config (overrides --preset).")
    ] = None,
    out: Annotated[Path, typer.Option(help="Where run directories are created.")] = Path("reports"),
    run_dir: Annotated[
        Path | None, typer.Option(help="Write into this directory instead of a new one.")
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    resume: Annotated[
        Path | None,
        typer.Option(
            help="Finish an interrupted run: its config, its directory; finished cells are skipped."
        ),
    ] = None,
    executor: Annotated[
        str | None, typer.Option(help="'local' or 'ray' (default: the config's, else local).")
    ] = None,
    jobs: Annotated[
        int | None, typer.Option(help="Parallel worker processes for the local executor.")
    ] = None,
    address: Annotated[
        str | None, typer.Option(help="Ray cluster: 'auto' or HOST:PORT (default: start one).")
    ] = None,
    allow_failures: Annotated[
        bool, typer.Option(help="Exit 0 even when some cells failed (default: exit 3).")
    ] = False,
    overwrite: Annotated[
        bool, typer.Option(help="Let this config take over --run-dir from a run of another config.")
    ] = False,
    map_: Annotated[str | None, typer.Option("--map", help=MAP_HELP)] = None,
    show_examples: Annotated[
        bool,
        typer.Option(
            "--show-examples",
            help="Keep a few original/released texts per point in the run directory "
            "(examples.json, for `report --show-examples`); by default it holds no corpus text.",
        ),
    ] = False,
    estimate: Annotated[
        bool,
        typer.Option(
            "--estimate",
            help="Print the grid's size and its estimated wall time on this machine, then exit "
            "(nothing is run or written; with --resume or --run-dir, finished cells are free).",
        ),
    ] = False,
    device: DeviceOption = None,
) -> None:
    """Run a grid: every defense at every privacy level against every attack, with utility.

    Every finished cell is stored as it finishes; re-running a config into the same
    --run-dir (or --resume RUN_DIR) skips the finished ones. Exit status: 0 when every cell
    is ok or n/a, 2 for an error before any work, 3 when some cells failed, 4 when the disk
    is full, 130 on Ctrl-C and 143 on SIGTERM (both print the --resume command)."""
    # lazy: the config, runner, estimate and terminal tables bring pydantic, numpy,
    # privaudit.audit and privaudit.leaderboard, which --help does not load
    from privaudit.audit.config import load_config
    from privaudit.audit.estimate import estimate_config
    from privaudit.cli.render import print_summary
    from privaudit.outputs import run_grid

    if jobs is not None and jobs < 1:  # before the config is read: nothing else depends on it
        raise ValueError(f"--jobs is a number of worker processes, at least 1; got {jobs}.")
    _check_cache()
    if resume is not None:
        saved = resume / "config.json"
        if not saved.is_file():
            raise ValueError(f"{resume} has no config.json: is it a privaudit run directory?")
        if config is not None or run_dir is not None or map_ is not None:
            raise ValueError(
                "--resume takes its config and directory from the run; drop "
                "--config/--run-dir/--map (or use them without --resume)."
            )
        config, run_dir = saved, resume
    cfg = load_config(config if config is not None else preset)
    cfg.corpus.params.update(corpus_params(map_))
    if show_examples:  # an output choice: no cell key changes, so --resume may add it
        cfg = cfg.model_copy(update={"show_examples": True})
    if device is not None:  # no cell key either: --resume may continue on another device
        cfg = cfg.model_copy(update={"device": check_device(device)})
    if estimate:
        if (executor or cfg.executor.kind) != "ray":  # a run would refuse a missing GPU too
            from privaudit.runtime.devices import resolve_device

            resolve_device(cfg.device)
        with warnings_as_lines():
            forecast = estimate_config(cfg, run_dir=run_dir, jobs=jobs)
        typer.echo("\n".join(forecast.lines()))
        return
    with warnings_as_lines():
        result = run_grid(cfg, reports_root=out, run_dir=run_dir, progress=progress,
                          executor=executor, jobs=jobs, address=address,
                          overwrite=overwrite)  # fmt: skip
    print_summary(result)
    _exit_for_failures(result.frame, allow_failures, result.strength_failed)


def _exit_for_failures(frame: Any, allow: bool, strength_failed: int = 0) -> None:
    """One line on the failed cells (and failed strength.csv rows), then exit 3 (0 with
    --allow-failures)."""
    from privaudit.audit.store import cell_counts  # lazy: privaudit.audit is not for --help

    failed = frame[frame["status"] == "failed"]
    if strength_failed:  # a failed refit fails the run as a cell does
        typer.secho(
            f"{strength_failed} row(s) of strength.csv failed (their reasons are above)."
            + ("" if allow or not failed.empty else " Exit status 3; --allow-failures exits 0."),
            fg=typer.colors.RED, err=True,
        )  # fmt: skip
        if failed.empty and not allow:
            raise typer.Exit(EXIT_CELLS_FAILED)
    if failed.empty:
        return
    reasons = failed["reason"].astype(str).str.split(" at ").str[0].nunique()
    counts = cell_counts(frame)
    typer.secho(
        f"{counts['failed']} of {counts['all']} cells failed ({reasons} distinct reason(s); see "
        "above and the report's Failures section)."
        + ("" if allow else " Exit status 3; --allow-failures exits 0."),
        fg=typer.colors.RED, err=True,
    )  # fmt: skip
    if not allow:
        raise typer.Exit(EXIT_CELLS_FAILED)


def _check_cache() -> bool:
    """The cache directory, before any work: unusable → one line (CacheUnusable, exit 2);
    read-only → said once here, then used for reading. Whether it can be written."""
    from privaudit.runtime.cache import check_cache

    note = check_cache()
    if note is not None:
        typer.secho(f"Warning: {note}", fg=typer.colors.YELLOW, err=True)
    return note is None


@app.command()
@_user_errors
@on_device
def pretrain(
    preset: Annotated[str, typer.Option(help="Built-in grid whose attacks to prepare.")] = "quick",
    config: Annotated[
        Path | None, typer.Option(help="A YAML or JSON grid config (overrides --preset).")
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    device: DeviceOption = None,
) -> None:
    """Build the pre-trained models a grid's attacks keep on disk (geia's and vec2text's
    inverter, trained on public text only, and those of the strength curve's
    public_fractions), so the run finds them cached.

    Each is keyed by the backbone's fingerprint, the public corpus and the parameters that
    shape it (see `privaudit list attacks`); one already cached is not rebuilt."""
    # lazy: the config and the components bring pydantic, numpy and the registry
    from privaudit.audit.cells import build_components
    from privaudit.audit.config import load_config
    from privaudit.audit.estimate import prepared_attacks
    from privaudit.models.backbone import backbone as load_backbone

    writable = _check_cache()
    cfg = load_config(config if config is not None else preset)
    _, attacks, _ = build_components(cfg)
    ready = {label: a for label, a in prepared_attacks(cfg, attacks).items()
             if callable(getattr(a, "prepare", None))}  # fmt: skip
    if not ready:
        typer.echo("No attack of this grid keeps a pre-trained model on disk; nothing to do.")
        return
    bb = load_backbone(cfg.backbone)
    missing = [label for label, a in ready.items() if not a.spec().path(bb).is_file()]
    if not writable and missing:  # a model trained here could not be kept: refuse, not waste
        raise ValueError(
            f"{', '.join(missing)}: not in the read-only cache, and what privaudit pretrain "
            "builds could not be kept there; point PRIVAUDIT_CACHE at a directory you can write."
        )
    for label, attack in ready.items():
        attack.progress = progress
        note = attack.prepare(bb)
        what = "found in the cache" if note["cache"] == "hit" else f"built in {note['seconds']} s"
        typer.echo(f"{label}: pre-trained model {what} ({attack.spec().path(bb)})")


@app.command()
@_user_errors
@on_device
def privatize(
    defense: Annotated[str, typer.Option(help="Defense name (see `privaudit list defenses`).")],
    knob: Annotated[
        float | None, typer.Option(help="Value of the defense's privacy knob, e.g. eta.")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed; same seed, same output.")] = 0,
    backbone: Annotated[str | None, typer.Option(help="Model name or path.")] = None,
    param: Annotated[
        list[str] | None, typer.Option(help="Extra defense parameter key=value (repeatable).")
    ] = None,
    device: DeviceOption = None,
) -> None:
    """Privatize standard input, one document per line, to standard output.

    Input is read as UTF-8; bytes that are not valid UTF-8 are replaced with U+FFFD (the
    replacement character) and one warning on standard error names the lines."""
    import numpy as np  # lazy: --help does not load numpy

    obj = build_defense(defense, parse_params(param), backbone)
    if knob is not None:
        obj = obj.with_knob(knob)
    lines = read_stdin_lines()
    release = obj.privatize(lines, rng=np.random.default_rng(seed))
    if release.kind != "text":
        raise ValueError(
            f"Defense {defense!r} releases {release.kind}, not text; use the Python API."
        )
    for text in release.texts or []:
        sys.stdout.write(text.replace("\n", " ") + "\n")


@app.command()
@_user_errors
@on_device
def calibrate(
    defense: Annotated[str, typer.Option(help="Defense with an eta-like knob, e.g. t2t.")],
    rate: Annotated[
        float | None, typer.Option(help="Solve for the knob value reaching this rate.")
    ] = None,
    values: Annotated[
        str | None, typer.Option(help="Comma-separated knob values to measure.")
    ] = None,
    corpus: Annotated[
        str | None,
        typer.Option(help="Corpus to measure on (default: --config's, else synthetic-reviews)."),
    ] = None,
    n_docs: Annotated[int, typer.Option(help="Documents sampled from its train split.")] = 150,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    backbone: Annotated[str | None, typer.Option(help="Model name or path.")] = None,
    config: Annotated[
        Path | None,
        typer.Option(help="A grid config (or preset name): its corpus and backbone are used."),
    ] = None,
    corpus_param: Annotated[
        list[str] | None, typer.Option(help="A corpus parameter key=value (repeatable).")
    ] = None,
    map_: Annotated[str | None, typer.Option("--map", help=MAP_HELP)] = None,
    device: DeviceOption = None,
) -> None:
    """Map the privacy knob to the measured replacement rate (or solve for a target rate).

    The corpus is given as in a grid: --config GRID.yaml (its corpus and backbone), or
    --corpus NAME with --map / --corpus-param for its parameters (e.g. --corpus file
    --map path=reviews.csv,text=review,label=stars)."""
    # lazy: calibration, the config and the terminal tables bring numpy, pydantic,
    # privaudit.audit and privaudit.leaderboard, which --help does not load
    from privaudit.audit.calibration import calibrate as run_calibration
    from privaudit.audit.calibration import check_calibratable, sample_texts
    from privaudit.audit.config import load_config
    from privaudit.cli.render import print_calibration
    from privaudit.params import ParamError

    params: dict[str, Any] = {}
    if config is not None:
        grid_cfg = load_config(config)
        if corpus is None or corpus == grid_cfg.corpus.name:
            corpus, params = grid_cfg.corpus.name, dict(grid_cfg.corpus.params)
        backbone = backbone if backbone is not None else grid_cfg.backbone
    corpus = corpus or "synthetic-reviews"
    params.update(corpus_params(map_, corpus_param))

    grid = None
    if values:
        try:
            grid = [float(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise ValueError(
                f"--values expects numbers separated by commas, got {values!r}."
            ) from None
    obj = build_defense(defense, {}, backbone)
    check_calibratable(obj)  # before the corpus is loaded
    try:
        with warnings_as_lines():
            texts = sample_texts(corpus, n_docs=n_docs, seed=seed, params=params)
    except ParamError as exc:
        raise ValueError(
            f"--corpus {corpus}: {exc} Give corpus parameters with --map key=value,... or "
            "--corpus-param key=value, or use a grid's corpus with --config GRID.yaml."
        ) from None
    result = run_calibration(obj, texts, values=grid, target=rate, seed=seed)
    print_calibration(result, len(texts), rate)


@app.command()
@_user_errors
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

    _check_cache()
    with warnings_as_lines():
        result = run_audit(
            target, knob=knob, params=parse_params(param),
            preset=config if config is not None else preset,
            compare=[c.strip() for c in compare.split(",") if c.strip()], label=label,
            run_dir=run_dir, reports_root=out, progress=progress,
            corpus_params=corpus_params(map_), device=device, strict=strict,
        )  # fmt: skip
    for g in result.guarantees:  # the verdict on its own claim comes first
        bad = g.verdict == "violated"
        typer.secho(g.line(), fg=typer.colors.RED if bad else None, bold=bad)
    typer.echo("Conformance checks:")
    for check in result.checks:
        typer.echo(f"  {check.line()}")
    for check in result.warnings:  # e.g. an identity privatizer: the grid ran, but look
        typer.secho(f"WARNING: {result.label} {check.detail}", fg=typer.colors.YELLOW,
                    bold=True, err=True)  # fmt: skip
    if result.failed:
        raise ValueError(
            f"{len(result.failed)} conformance check(s) failed; fix the privatizer and rerun "
            "(nothing was benchmarked)."
        )
    if result.run is None:  # --strict and a violated guarantee: nothing was benchmarked
        raise typer.Exit(EXIT_GUARANTEE_VIOLATED)
    print_summary(result.run)
    _exit_for_failures(result.run.frame, allow_failures, result.run.strength_failed)


@app.command("audit-guarantee")
@_user_errors
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
        from privaudit.audit.store import check_output_file

        check_output_file(csv, "--csv")
    if defense == "all":
        if knob or param:
            raise ValueError("--knob and --param need one --defense NAME, not 'all'.")
        audits = audit_builtins(backbone=backbone, alpha=alpha, seed=seed)
    else:
        DEFENSES.get(defense)  # an unknown name: one line with the known ones, before work
        audits = audit_levels(defense, knob, params=parse_params(param), backbone=backbone,
                              alpha=alpha, seed=seed)  # fmt: skip
    print_guarantees(
        audits,
        f"guarantee audit (confidence {1 - alpha:.0%} per level, seed {seed}; {len(audits)} "
        "levels, not corrected across them)",
    )
    if csv is not None:
        to_frame(audits).to_csv(csv, index=False)
        typer.echo(f"Wrote: {csv}")
    if strict and any(a.verdict == "violated" for a in audits):
        raise typer.Exit(EXIT_GUARANTEE_VIOLATED)


@app.command("leaderboard")
@_user_errors
def leaderboard_cmd(
    run_dirs: Annotated[
        list[Path], typer.Argument(help="Run directories to merge (later runs win on repeats).")
    ],
    out: Annotated[
        Path | None,
        typer.Option(help="Where leaderboard.md/.csv/.html go (default: the first run dir)."),
    ] = None,
    chance: Annotated[
        float | None,
        typer.Option(help="The utility chance level, if the runs have no run.json."),
    ] = None,
    mixed_corpora: Annotated[
        bool,
        typer.Option(
            "--mixed-corpora",
            help="Put runs of different corpora on one board, each row labelled "
            "'label @ corpus' (refused without it).",
        ),
    ] = False,
) -> None:
    """Rank defenses per attack family by worst-case privacy-utility hypervolume, with
    bootstrap intervals and rank stability.

    Exit status: 0; 2 for an error (nothing written); 5 when a run is unfinished (the files
    are written, and the first line says how many cells are missing and how to --resume)."""
    # lazy: the leaderboard, the run loader and the terminal tables bring numpy, pydantic,
    # privaudit.audit and privaudit.leaderboard, which --help does not load
    from privaudit.audit.store import check_writable
    from privaudit.cli.render import print_board
    from privaudit.leaderboard.board import leaderboard
    from privaudit.outputs.leaderboard import write_leaderboard
    from privaudit.outputs.runs import load_runs

    partial = [_say_unfinished(d) for d in run_dirs]  # before anything else is printed
    target = out if out is not None else (run_dirs[0] if run_dirs else None)
    if target is not None and (out is not None or target.is_dir()):  # else: not a run dir
        check_writable(target, "--out")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = load_runs(run_dirs, chance=chance, mixed_corpora=mixed_corpora)
    for warning in caught:  # one readable line each, not a warnings.warn source excerpt
        typer.secho(f"Warning: {warning.message}", fg=typer.colors.YELLOW, err=True)
    board = leaderboard(runs.frame, runs.chance, outcomes=runs.outcomes, bootstrap=runs.bootstrap)
    print_board(board, f"privaudit leaderboard ({len(run_dirs)} run(s))")
    typer.echo("Wrote:")
    target = out if out is not None else run_dirs[0]
    for path in write_leaderboard(board, target, runs.guarantees, frame=runs.frame,
                                  strength=runs.strength):  # fmt: skip
        typer.echo(f"  {path}")
    if any(partial):
        raise typer.Exit(EXIT_UNFINISHED)


def _say_unfinished(run_dir: Path) -> bool:
    """Print, first, that ``run_dir`` is an unfinished run (how many cells are missing, the
    --resume command); whether it is. A directory that cannot be read says nothing here:
    reading it later names what is wrong."""
    # lazy: the run store brings numpy and pandas, which --help does not load
    from privaudit.audit.store import RunDir
    from privaudit.outputs.runs import unfinished

    rd = RunDir(run_dir)
    try:
        meta = rd.read_meta()
        if meta.get("finished") is not False:
            return False
        note = unfinished(run_dir, rd.read_results(), meta)
    except (OSError, ValueError):
        return False
    if note is not None:
        typer.secho(f"Warning: {note}", fg=typer.colors.YELLOW, bold=True, err=True)
    return note is not None


@app.command()
@_user_errors
def report(
    run_dir: Annotated[Path, typer.Argument(help="A run directory written by `privaudit run`.")],
    show_examples: Annotated[
        bool,
        typer.Option(
            "--show-examples",
            help="Include original texts from the run dir's examples.json (off by default).",
        ),
    ] = False,
    out: Annotated[
        Path | None, typer.Option(help="Report file (default: RUN_DIR/report.html).")
    ] = None,
) -> None:
    """Write one self-contained HTML report (leaderboard, plots, cells, failures) for a run.

    Exit status: 0; 2 for an error (nothing written); 5 when the run is unfinished (the
    report is written with a banner at its top, and the first line printed says how many
    cells are missing and how to --resume)."""
    # lazy: the run store and the report writer bring numpy, pydantic and privaudit.audit,
    # which --help does not load
    from privaudit.audit.store import RunDir, check_output_file
    from privaudit.outputs.report import no_examples, write_report

    partial = _say_unfinished(run_dir)  # before anything else is printed
    if out is not None and out.is_dir():
        raise ValueError(f"--out {out} is a directory; give the report's file name.")
    if out is not None:
        check_output_file(out, "--out")
    elif run_dir.is_dir():  # else reading it says it is not a run dir
        check_output_file(run_dir / "report.html", "the run directory")
    path = write_report(run_dir, show_examples=show_examples, out=out)
    if show_examples and not RunDir(run_dir).examples_json.is_file():
        typer.secho(no_examples(run_dir), fg=typer.colors.YELLOW, err=True)
    typer.echo(str(path))
    if partial:
        raise typer.Exit(EXIT_UNFINISHED)


@app.command("tab-score")
@_user_errors
def tab_score(
    data: Annotated[
        str,
        typer.Option(help="TAB's JSON (e.g. echr_test.json), or the folder with its 3 files."),
    ],
    defense: Annotated[
        str, typer.Option(help="A built-in defense (has, ...) or yours: path/file.py:Class.")
    ],
    level: Annotated[
        float | None,
        typer.Option(help="Its privacy knob (HaS: 1-4); for your class, its `level` argument."),
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option(help="Other constructor parameters, key=value.")
    ] = None,
    split: Annotated[
        str, typer.Option(help="TAB documents to score: test, dev, train or all.")
    ] = "test",
    seed: Annotated[int, typer.Option(help="Random seed of the defense.")] = 0,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the scores to this JSON file.")
    ] = None,
) -> None:
    """Privatize TAB's court cases with a defense and print TAB's evaluation: entity recall on
    direct and quasi identifiers, mention and token recall, token precision (uniform weights).
    The output text is aligned to the original to find what was masked (see
    privaudit.metrics.tab.masked_spans)."""
    # lazy: the corpus, the metric and the defense bring numpy, datasets and spaCy, which
    # --help does not load
    import json

    import numpy as np

    from privaudit.corpora.tab import load_tab
    from privaudit.metrics.tab import format_scores, score_anonymizer

    splits = {"test": "test", "dev": "aux", "train": "train", "all": None}
    if split not in splits:
        raise ValueError(f"--split must be one of {', '.join(splits)}, got {split!r}.")
    with warnings_as_lines():
        corpus = load_tab(data)
    names = list(corpus.splits) if splits[split] is None else [splits[split]]
    texts = [t for name in names if name in corpus.splits for t in corpus.texts(name)]
    if not texts:
        raise ValueError(f"{data} has no TAB {split} document to score; try --split all.")
    params = parse_params(param)
    if ":" in defense:  # the user's class, wrapped as `privaudit audit` wraps it
        from privaudit.audit.wrapper import UserDefense

        extra = {} if level is None else {"level": level}
        obj: Any = UserDefense(defense, "level" if level is not None else None, **params, **extra)
    else:
        obj = build_defense(defense, params, None)
        if level is not None:
            obj = obj.with_knob(level)
    release = obj.privatize(texts, rng=np.random.default_rng(seed))
    if release.kind != "text":
        raise ValueError(f"Defense {defense!r} releases {release.kind}, not text.")
    scores = score_anonymizer(corpus, release.content_texts(), split=splits[split])
    shown = defense + ("" if level is None else f" (level {level:g})")
    typer.echo(format_scores(scores, f"TAB evaluation of {shown}: {len(texts)} {split} documents"))
    if json_out is not None:
        run = {"data": str(data), "defense": defense, "level": level, "params": params,
               "split": split, "seed": seed}  # fmt: skip
        json_out.write_text(json.dumps({**run, "scores": scores}, indent=2) + "\n")
        typer.echo(f"Scores written to {json_out}.")


def main() -> None:  # pragma: no cover
    app()
