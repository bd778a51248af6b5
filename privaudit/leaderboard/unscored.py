"""Which rows the corpus could not score, and why: each n/a row's cause (an unreadable release,
or no truth to score the attack) and the families a corpus cannot judge at all."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


def na_causes(frame: pd.DataFrame) -> pd.Series:
    """Per row, why it is n/a: ``truth`` (the attack ran; the corpus has no truth to score it:
    :class:`~privaudit.metrics.truth.NotScorable`), ``release`` (the attack cannot read the
    release), "" (not n/a). The ``na_cause`` column records it; in older results an n/a row
    with attack seconds ran, so the truth could not judge it."""
    import pandas as pd

    cause = frame["na_cause"] if "na_cause" in frame else pd.Series(None, index=frame.index)
    ran = (
        frame["attack_seconds"].astype(float).notna()
        if "attack_seconds" in frame
        else pd.Series(False, index=frame.index)
    )
    out = cause.where(cause.isin(["truth", "release"]), np.where(ran, "truth", "release"))
    return out.where(frame["status"] == "n/a", "")


def unscorable_families(frame: pd.DataFrame) -> dict[str, str]:
    """Families this corpus cannot score: every row n/a, and every attack n/a somewhere for
    want of truth (not of a readable release); with the reasons, ``attack: reason``."""
    out: dict[str, str] = {}
    if "family" not in frame or frame.empty:
        return out
    causes = na_causes(frame)
    for family, g in frame.groupby("family", sort=True):
        truth = causes[g.index] == "truth"
        if (g["status"] != "n/a").any() or not truth.groupby(g["attack"]).any().all():
            continue
        reasons = sorted(
            {f"{a}: {r}" for a, r in zip(g["attack"][truth], g["reason"][truth], strict=True)}
        )
        out[str(family)] = "; ".join(reasons)
    return out


def na_reason(rows: pd.DataFrame) -> str:
    """Why a label has no ok row in a family whose rows are all n/a, by cause."""
    causes = set(na_causes(rows)) - {""}
    if causes == {"truth"}:
        shown = "; ".join(sorted({str(r) for r in rows["reason"]}))
        return f"all n/a: the corpus has no truth to score this family's attacks ({shown})"
    if causes == {"release"}:
        return "no attack of this family could read its releases (all n/a)"
    return (
        "all n/a: some attacks of this family could not read its releases, the corpus has "
        "no truth to score the others"
    )


def na_summary(frame: pd.DataFrame) -> str | None:
    """One line on a results table's n/a cells, by cause (None when there are none): those the
    corpus cannot score say so, with the corpus's reasons (entity annotations, background
    documents), and only those the attack cannot read are said to be unreadable. A cell is
    counted as :func:`privaudit.audit.store.cell_counts` counts it (n/a when all its rows
    are), under its first row's cause."""
    import pandas as pd

    if frame.empty:
        return None
    cell = frame["cell_key"] if "cell_key" in frame else pd.Series(frame.index, frame.index)
    if "cell" in frame:
        cell = frame["cell"].where(frame["cell"].notna(), cell)
    all_na = (frame["status"] == "n/a").groupby(cell).transform("all")
    na = frame[all_na & ~cell.duplicated()]
    if na.empty:
        return None
    causes = na_causes(frame)[na.index]
    truth, release = int((causes == "truth").sum()), int((causes != "truth").sum())
    parts = []
    if truth:
        reasons = sorted({str(r) for r in na["reason"][causes == "truth"]})
        shown = "; ".join(reasons[:3]) + ("; …" if len(reasons) > 3 else "")
        parts.append(f"{truth} because the corpus cannot score the attack ({shown})")
    if release:
        parts.append(f"{release} because the attack cannot read the release")
    return (
        f"{len(na)} of {cell.nunique()} cells are n/a: {', '.join(parts)}; the report "
        "lists the reasons."
    )
