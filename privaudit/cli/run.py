"""Running a grid: ``privaudit run`` (or its ``--estimate``) and ``privaudit pretrain``, which
builds the pre-trained models a grid's attacks keep on disk before the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from privaudit.cli.base import app, check_cache_dir, exit_for_failures, user_errors
from privaudit.cli.options import (
    MAP_HELP,
    DeviceOption,
    corpus_params,
    on_device,
    warnings_as_lines,
)
from privaudit.runtime.cell_store import fresh_cells
from privaudit.runtime.devices import check_device, resolve_device

if TYPE_CHECKING:
    from privaudit.audit.config import GridConfig


#: ``--fresh`` of run and audit (privaudit.runtime.cell_store).
FreshOption = Annotated[
    bool,
    typer.Option(
        "--fresh",
        help="Compute every cell, taking none from this machine's cell store (what is "
        "computed replaces the stored cells); see `privaudit cache`.",
    ),
]

#: ``--preset``: the built-in grid run.
PresetOption = Annotated[
    str,
    typer.Option(
        help="Built-in grid: 'quick' (default), 'real' (the quick grid on SynthPAI), 'paper' "
        "(RAPT's; big machine) or 'smoke'."
    ),
]
#: ``--resume``: the run directory of an interrupted run.
ResumeOption = Annotated[
    Path | None,
    typer.Option(
        help="Finish an interrupted run: its config, its directory; finished cells are skipped."
    ),
]
#: ``--show-examples``: keep a few released texts per point.
ShowExamplesOption = Annotated[
    bool,
    typer.Option(
        "--show-examples",
        help="Keep a few original/released texts per point in the run directory "
        "(examples.json, for `report --show-examples`); by default it holds no corpus text.",
    ),
]
#: ``--estimate``: print the grid's size and wall time, run nothing.
EstimateOption = Annotated[
    bool,
    typer.Option(
        "--estimate",
        help="Print the grid's size and its estimated wall time on this machine, then exit "
        "(nothing is run or written; with --resume or --run-dir, finished cells are free).",
    ),
]


@app.command()
@user_errors
def run(
    preset: PresetOption = "quick",
    config: Annotated[
        Path | None, typer.Option(help="A YAML or JSON grid config (overrides --preset).")
    ] = None,
    out: Annotated[Path, typer.Option(help="Where run directories are created.")] = Path("reports"),
    run_dir: Annotated[
        Path | None, typer.Option(help="Write into this directory instead of a new one.")
    ] = None,
    progress: Annotated[bool, typer.Option(help="Show a progress bar.")] = True,
    resume: ResumeOption = None,
    executor: Annotated[
        str | None, typer.Option(help="'local' or 'ray' (default: the config's, else local).")
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            help="Parallel worker processes for the local executor. Each loads its own "
            "models: on two cores, 2 workers ran the quick grid's first 8 points 1.6× "
            "slower than 1."
        ),
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
    show_examples: ShowExamplesOption = False,
    estimate: EstimateOption = False,
    device: DeviceOption = None,
    fresh: FreshOption = False,
) -> None:
    """Run a grid: every defense at every privacy level against every attack, with utility.

    Every finished cell is stored as it finishes; re-running a config into the same
    --run-dir (or --resume RUN_DIR) skips the finished ones. Exit status: 0 when every cell
    is ok or n/a, 2 for an error before any work, 3 when some cells failed, 4 when the disk
    is full, 130 on Ctrl-C and 143 on SIGTERM (both print the --resume command)."""
    # lazy: the runner and the terminal tables bring numpy and pydantic, not for --help
    from privaudit.cli.render import print_summary
    from privaudit.outputs import run_grid

    if jobs is not None and jobs < 1:  # before the config is read: nothing else depends on it
        raise ValueError(f"--jobs is a number of worker processes, at least 1; got {jobs}.")
    check_cache_dir()
    config, run_dir = _resumed(resume, config, run_dir, map_)
    cfg = _grid_config(config if config is not None else preset, map_, show_examples, device)
    if estimate:
        with fresh_cells(fresh):  # --fresh --estimate: nothing from the cell store is free
            _print_estimate(cfg, executor, run_dir, jobs)
        return
    with warnings_as_lines():
        result = run_grid(
            cfg,
            reports_root=out,
            run_dir=run_dir,
            progress=progress,
            executor=executor,
            jobs=jobs,
            address=address,
            overwrite=overwrite,
            fresh=fresh,
        )
    print_summary(result)
    exit_for_failures(result.frame, allow_failures, result.strength_failed)


def _resumed(
    resume: Path | None, config: Path | None, run_dir: Path | None, map_: str | None
) -> tuple[Path | None, Path | None]:
    """The config and run directory to use: with ``--resume RUN_DIR`` the run's saved config
    and its directory (refused beside --config, --run-dir or --map, which the run already
    fixed), else ``config`` and ``run_dir`` as given."""
    from privaudit.audit.store import RunDir  # lazy: privaudit.audit is not for --help

    if resume is None:
        return config, run_dir
    saved = RunDir(resume).config_json
    if not saved.is_file():
        raise ValueError(f"{resume} has no {saved.name}: is it a privaudit run directory?")
    if config is not None or run_dir is not None or map_ is not None:
        raise ValueError(
            "--resume takes its config and directory from the run; drop "
            "--config/--run-dir/--map (or use them without --resume)."
        )
    return saved, resume


def _grid_config(
    source: Path | str, map_: str | None, show_examples: bool, device: str | None
) -> GridConfig:
    """The grid config of ``source`` (a file or a preset's name) with the command line's
    corpus parameters, --show-examples and --device over it."""
    # lazy: the config brings pydantic and numpy, which --help does not load
    from privaudit.audit.config import load_config

    cfg = load_config(source)
    cfg.corpus.params.update(corpus_params(map_))
    if show_examples:  # an output choice: no cell key changes, so --resume may add it
        cfg = cfg.model_copy(update={"show_examples": True})
    if device is not None:  # no cell key either: --resume may continue on another device
        cfg = cfg.model_copy(update={"device": check_device(device)})
    return cfg


def _print_estimate(
    cfg: GridConfig, executor: str | None, run_dir: Path | None, jobs: int | None
) -> None:
    """``run --estimate``: the grid's size and its estimated wall time here; nothing is run."""
    # lazy: the estimate brings numpy and privaudit.audit, which --help does not load
    from privaudit.audit.forecast import estimate_config

    if (executor or cfg.executor.kind) != "ray":  # a run would refuse a missing GPU too
        resolve_device(cfg.device)
    with warnings_as_lines():
        forecast = estimate_config(cfg, run_dir=run_dir, jobs=jobs)
    typer.echo("\n".join(forecast.lines()))


@app.command()
@user_errors
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
    from privaudit.audit.forecast import prepared_attacks
    from privaudit.models.backbone import backbone as load_backbone

    writable = check_cache_dir()
    cfg = load_config(config if config is not None else preset)
    built = build_components(cfg)
    ready = {
        label: (a, plan)
        for label, (a, plan) in prepared_attacks(cfg, built.attacks, built.plans).items()
        if callable(getattr(a, "prepare", None))
    }
    if not ready:
        typer.echo("No attack of this grid keeps a pre-trained model on disk; nothing to do.")
        return
    bb = load_backbone(cfg.backbone)
    # whole on disk: a truncated model is rebuilt, so a read-only cache cannot serve it
    missing = [label for label, (a, plan) in ready.items() if not a.cached(bb, plan)]
    if not writable and missing:  # a model trained here could not be kept: refuse, not waste
        raise ValueError(
            f"{', '.join(missing)}: not in the read-only cache, and what privaudit pretrain "
            "builds could not be kept there; point PRIVAUDIT_CACHE at a directory you can write."
        )
    for label, (attack, plan) in ready.items():
        attack.progress = progress
        note = attack.prepare(bb, plan)
        what = "found in the cache" if note["cache"] == "hit" else f"built in {note['seconds']} s"
        typer.echo(f"{label}: pre-trained model {what} ({attack.spec(plan).path(bb)})")
