"""``privaudit tab-score``: a defense on TAB's court cases, scored by TAB's evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from privaudit.cli.base import _user_errors, app
from privaudit.cli.options import parse_params, warnings_as_lines
from privaudit.registry import build_defense


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
