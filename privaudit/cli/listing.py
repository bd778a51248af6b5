"""``privaudit list``: the registered defenses, attacks, metrics, corpora and utility
evaluators, one line each."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from privaudit.cli.base import app, user_errors
from privaudit.registry import ATTACKS, CORPORA, DEFENSES, UTILITY


class Listing(StrEnum):
    defenses = "defenses"
    attacks = "attacks"
    metrics = "metrics"
    corpora = "corpora"
    utility = "utility"
    all = "all"


@app.command("list")
@user_errors
def list_cmd(
    what: Annotated[Listing, typer.Argument(help="Which registry to list.")] = Listing.all,
) -> None:
    """List the registered defenses, attacks, metrics, corpora and utility evaluators."""
    registries = {
        "defenses": DEFENSES,
        "attacks": ATTACKS,
        "corpora": CORPORA,
        "utility": UTILITY,
    }
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
