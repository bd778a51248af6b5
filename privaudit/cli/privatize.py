"""A defense on the user's own text: ``privaudit privatize`` (standard input to standard
output) and ``privaudit calibrate`` (its knob against the measured replacement rate)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from privaudit.cli.base import app, user_errors
from privaudit.cli.options import (
    MAP_HELP,
    DeviceOption,
    corpus_params,
    on_device,
    parse_params,
    read_stdin_lines,
    warnings_as_lines,
)
from privaudit.registry import build_defense


@app.command()
@user_errors
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
@user_errors
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
