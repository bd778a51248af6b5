"""``privaudit tab-score``: defenses on TAB's court cases, scored by TAB's evaluation."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from privaudit.cli.base import app, user_errors
from privaudit.cli.options import parse_params, warnings_as_lines
from privaudit.registry import build_defense

SPLITS = {"test": "test", "dev": "aux", "train": "train", "all": None}
#: ``--preset tab``: HaS at each level and with identifiers, Presidio at its levels.
TAB_PRESET = (
    "has@1",
    "has@2",
    "has@3",
    "has@4",
    "has@4,identifiers=true",
    "presidio@1",
    "presidio@2",
)


@dataclass
class Entry:
    """One anonymizer of the table: a defense (name or file.py:Class, level, parameters) or
    a file of masked spans (TAB's masked-output format)."""

    label: str
    defense: str | None = None
    level: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    masks: Path | None = None
    obj: Any = None


def parse_entry(spec: str, level: float | None, params: dict[str, Any]) -> Entry:
    """``NAME[@LEVEL][,key=value...]`` (NAME a built-in or ``file.py:Class``)."""
    head, *pairs = spec.split(",")
    name, at, lvl = head.partition("@")
    if not name:
        raise ValueError(f"--defense {spec!r} names no defense; e.g. has@3 or my.py:Class@2.")
    value = level
    if at:
        try:
            value = float(lvl)
        except ValueError:
            raise ValueError(
                f"--defense {spec!r}: the level after @ must be a number, got {lvl!r}."
            ) from None
    own = {**params, **parse_params(pairs)}
    extra = "".join(f",{k}={v}" for k, v in own.items() if k not in params)
    label = name + ("" if value is None else f"@{value:g}") + extra
    return Entry(label, defense=name, level=value, params=own)


def build(entry: Entry) -> Any:
    """The entry's defense object (a wrong name or value fails here, before any work)."""

    name, level, params = entry.defense, entry.level, entry.params
    assert name is not None
    if ":" in name:  # the user's class, wrapped as `privaudit audit` wraps it
        from privaudit.audit.wrapper import UserDefense  # lazy: privaudit.audit

        extra = {} if level is None else {"level": level}
        obj: Any = UserDefense(name, "level" if level is not None else None, **params, **extra)
        obj.check()
        return obj
    obj = build_defense(name, params, None)
    return obj if level is None else obj.with_knob(level)


def _probe(entry: Entry, seed: int) -> None:
    """Privatize one short text: a defense that does not release text (dpnr, embedding-dx)
    is refused before the corpus is read and privatized."""
    import numpy as np

    release = entry.obj.privatize(
        ["The applicant was born in 1970."], rng=np.random.default_rng(seed)
    )
    if release.kind != "text":
        raise ValueError(
            f"Defense {entry.label!r} releases {release.kind}, not text; TAB scores masked "
            "text (choose a text defense: has, presidio, t2t, ...)."
        )


def _read_masks(path: Path) -> dict[str, Any]:
    """A masked-output file as evaluation.py reads it: {doc_id: [[start, end], ...]}."""
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"--masks {path}: cannot read it as JSON ({exc}).") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(
            f"--masks {path}: expected TAB's masked-output format, an object doc_id → list of "
            "[start, end] spans."
        )
    return data


@app.command("tab-score")
@user_errors
def tab_score(
    data: Annotated[
        str,
        typer.Option(help="TAB's JSON (e.g. echr_test.json), or the folder with its 3 files."),
    ],
    defense: Annotated[
        list[str] | None,
        typer.Option(
            help="A built-in defense (has, presidio, ...) or yours (path/file.py:Class), "
            "optionally @LEVEL and ,key=value (has@4,identifiers=true); repeat for a table."
        ),
    ] = None,
    level: Annotated[
        float | None,
        typer.Option(help="Its privacy knob (HaS: 1-4); for your class, its `level` argument."),
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option(help="Constructor parameters of every defense, key=value.")
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(help="tab: HaS at levels 1-4 and with identifiers, Presidio at 1 and 2."),
    ] = None,
    masks: Annotated[
        list[Path] | None,
        typer.Option(help="A file of masked spans per doc_id, (start, end) pairs (TAB's format)."),
    ] = None,
    split: Annotated[
        str, typer.Option(help="TAB documents to score: test, dev, train or all.")
    ] = "test",
    seed: Annotated[int, typer.Option(help="Random seed of the defense.")] = 0,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Also write the scores to this JSON file.")
    ] = None,
    table: Annotated[
        Path | None,
        typer.Option(help="Also write the table (TAB paper's layout) here: .md or .csv."),
    ] = None,
) -> None:
    """Privatize TAB's court cases with defenses (or read masked-span files) and print TAB's
    evaluation: entity recall on direct and quasi identifiers, mention and token recall (also
    per entity type), token and mention precision (uniform weights). A defense that reports
    what it replaced (has, presidio, a Release with audit["masked_spans"]) is scored on those
    spans; otherwise its output text is aligned to the original (privaudit.metrics.tab_align.align).
    Several anonymizers (repeated --defense, --masks, --preset tab) give one table."""
    # lazy: the corpus, the metric and the defenses bring numpy, datasets and spaCy, which
    # --help does not load
    from privaudit.audit.store import check_output_file

    if split not in SPLITS:
        raise ValueError(f"--split must be one of {', '.join(SPLITS)}, got {split!r}.")
    if preset not in (None, "tab"):
        raise ValueError(f"--preset must be tab, got {preset!r}.")
    params = parse_params(param)
    specs = [*(TAB_PRESET if preset else ()), *(defense or [])]
    entries = [parse_entry(s, level, params) for s in specs]
    for path in masks or []:
        entries.append(Entry(path.stem, masks=path))
    if not entries:
        raise ValueError("Nothing to score: give --defense, --masks or --preset tab.")
    if table is not None and table.suffix.lower() not in (".md", ".csv"):
        raise ValueError(f"--table {table}: give a .md or .csv file name.")
    for path, option in ((json_out, "--json"), (table, "--table")):
        if path is not None:
            check_output_file(path, option)
    mask_files = {e.label: _read_masks(e.masks) for e in entries if e.masks is not None}
    with warnings_as_lines():
        for e in entries:
            if e.defense is not None:
                e.obj = build(e)
                _probe(e, seed)
    results = _score(data, split, seed, entries, mask_files)
    _report(data, split, seed, results, json_out, table)


def _score(
    data: str, split: str, seed: int, entries: list[Entry], mask_files: dict[str, Any]
) -> list[tuple[Entry, dict[str, Any]]]:
    # lazy: TAB's loader and scorer bring numpy, datasets and spaCy, not for --help
    import numpy as np

    from privaudit.corpora.tab import load_tab
    from privaudit.metrics.tab import SPANS_KEY, gold_documents, score_anonymizer

    with warnings_as_lines():
        corpus = load_tab(data, label=None)
    names = list(corpus.splits) if SPLITS[split] is None else [SPLITS[split]]
    gold = [g for n in names if n in corpus.splits for g in gold_documents(corpus, n)]
    if not gold:
        raise ValueError(f"{data} has no TAB {split} document to score; try --split all.")
    texts = [g.text for g in gold]
    out = []
    for e in entries:
        if e.masks is not None:
            known = {g.doc_id for g in gold}
            spans = {k: v for k, v in mask_files[e.label].items() if k in known}
            if not spans:
                raise ValueError(f"--masks {e.masks} names none of the {split} documents.")
            out.append((e, score_anonymizer(gold, spans)))
            continue
        with warnings_as_lines():
            release = e.obj.privatize(texts, rng=np.random.default_rng(seed))
        reported = release.audit.get(SPANS_KEY)
        if reported is not None and len(reported) == len(texts):
            items: list[Any] = [[(int(s), int(t)) for s, t, *_ in d] for d in reported]
        else:
            items = list(release.content_texts())
        out.append((e, score_anonymizer(gold, items)))
    return out


def _report(
    data: str,
    split: str,
    seed: int,
    results: list[tuple[Entry, dict[str, Any]]],
    json_out: Path | None,
    table: Path | None,
) -> None:
    import json

    # lazy: TAB's scorer brings numpy and spaCy, the store privaudit.audit
    from privaudit.audit.store import write_text
    from privaudit.metrics.tab import format_scores, scores_table

    n = results[0][1]["n_documents"]
    if len(results) == 1:
        e, scores = results[0]
        shown = (
            e.label
            if e.defense is None
            else e.defense + ("" if e.level is None else f" (level {e.level:g})")
        )
        typer.echo(format_scores(scores, f"TAB evaluation of {shown}: {n} {split} documents"))
    else:
        typer.echo(f"TAB evaluation, {n} {split} documents (R TYPE: token recall per type)")
    rows = [(e.label, s) for e, s in results]
    if len(results) > 1 or table is not None:
        typer.echo(scores_table(rows))
    if table is not None:
        table.parent.mkdir(parents=True, exist_ok=True)
        write_text(table, scores_table(rows, markdown=table.suffix.lower() == ".md") + "\n")
        typer.echo(f"Table written to {table}.")
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        run: dict[str, Any] = {"data": str(data), "split": split, "seed": seed}
        items = [
            {
                "label": e.label,
                "defense": e.defense,
                "level": e.level,
                "params": e.params,
                "masks": None if e.masks is None else str(e.masks),
                "scores": s,
            }
            for e, s in results
        ]
        if len(items) == 1:  # one anonymizer: its fields at the top, as before
            body = {**run, **{k: v for k, v in items[0].items() if k != "label"}}
        else:
            body = {**run, "anonymizers": items}
        write_text(json_out, json.dumps(body, indent=2) + "\n")
        typer.echo(f"Scores written to {json_out}.")
