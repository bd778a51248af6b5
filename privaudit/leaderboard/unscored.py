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
    ran = (frame["attack_seconds"].astype(float).notna() if "attack_seconds" in frame
           else pd.Series(False, index=frame.index))  # fmt: skip
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
        reasons = sorted({f"{a}: {r}" for a, r in zip(g["attack"][truth], g["reason"][truth],
                                                     strict=True)})  # fmt: skip
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
    return ("all n/a: some attacks of this family could not read its releases, the corpus has "
            "no truth to score the others")  # fmt: skip
