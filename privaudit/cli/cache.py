"""``privaudit cache``: this machine's cell store (:mod:`privaudit.runtime.cell_store`), shown
(size, entries, by corpus and by component) and pruned (``cache prune [--max-size]``) or
cleared (``cache clear``). Loads nothing heavy: no torch, pandas or numpy."""

from __future__ import annotations

from collections import Counter
from typing import Annotated

import typer

from privaudit.cli.base import app, user_errors
from privaudit.runtime.cell_store import (
    MAX_ENV,
    SWITCH_ENV,
    CellStore,
    enabled,
    max_bytes,
    parse_size,
    shown_size,
)

cache_app = typer.Typer(
    help="This machine's cell store: finished cells that later runs and audits reuse.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(cache_app, name="cache")


@cache_app.callback()
@user_errors
def cache_show(ctx: typer.Context) -> None:
    """Show the cell store: where it is, its size against its bound, its entries by corpus
    and by component. `prune` and `clear` make it smaller."""
    if ctx.invoked_subcommand is not None:
        return
    store = CellStore()
    if not enabled():
        typer.echo(f"The cell store is off (${SWITCH_ENV}); runs compute every cell.")
        return
    if store.root is None:
        raise ValueError("The cache directory cannot be used; point PRIVAUDIT_CACHE at one.")
    entries = store.entries()
    size = sum(e.size for e in entries)
    typer.echo(f"Cell store: {store.root}")
    typer.echo(
        f"{len(entries)} cells, {shown_size(size)} of at most {shown_size(max_bytes())} "
        f"(${MAX_ENV}; the least recently used go first)"
    )
    for title, field in (("corpus", "corpus"), ("component", "component")):
        counts: Counter[str] = Counter()
        sizes: Counter[str] = Counter()
        for entry in entries:
            name = str(entry.meta.get(field) or "?")
            counts[name] += 1
            sizes[name] += entry.size
        if counts:
            typer.echo(f"By {title}:")
            for name, n in sorted(counts.items(), key=lambda kv: (-sizes[kv[0]], kv[0])):
                typer.echo(f"  {name:<32} {n:>6} cells  {shown_size(sizes[name]):>9}")


@cache_app.command("prune")
@user_errors
def cache_prune(
    max_size: Annotated[
        str | None,
        typer.Option(
            "--max-size",
            help="Keep at most this much (e.g. 200MB, 1GB); default: the store's bound.",
        ),
    ] = None,
) -> None:
    """Remove the least recently used cells until the store is within its bound."""

    limit = parse_size(max_size, "--max-size") if max_size is not None else max_bytes()
    store = CellStore()
    removed, freed = store.prune(limit, to=1.0)
    typer.echo(
        f"Removed {removed} cells ({shown_size(freed)}); the store holds "
        f"{shown_size(store.size())} (at most {shown_size(limit)})."
    )


@cache_app.command("clear")
@user_errors
def cache_clear() -> None:
    """Remove every cell of the store (pre-trained models and measured costs stay)."""

    removed, freed = CellStore().clear()
    typer.echo(f"Removed {removed} cells ({shown_size(freed)}).")
