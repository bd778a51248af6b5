"""Reach: how much of the victims' language a generative inversion can write at all.

``geia`` and ``vec2text`` write from an output vocabulary (:mod:`privaudit.attacks._inverter`);
their rows record, in ``attack_details``, the share of the victims' tokens (and of their
distinct pieces) that vocabulary holds (``reach_*``) and that their public pre-training text
alone holds (``public_reach_*``: how far the public text fits the victims' domain). A token
the attack cannot write is one it can never recover, so below :data:`REACH_FLOOR` its score
under-states what a stronger attacker gets, and the text family's privacy is over-credited:
the headline says so first. Pure functions of the results table.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: Below this share of the victims' tokens, the headline warns that text privacy is
#: over-credited for this corpus.
REACH_FLOOR = 0.95


def _details(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        out = json.loads(value) if isinstance(value, str) else {}
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {}


def attack_reach(frame: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per attack (base name) that reports it, the lowest ``reach_tokens``,
    ``reach_pieces``, ``public_reach_tokens`` and ``public_reach_pieces`` over its ok rows."""
    if "attack_details" not in frame or "attack" not in frame:
        return {}
    out: dict[str, dict[str, float]] = {}
    ok = frame[frame["status"] == "ok"] if "status" in frame else frame
    for attack, details in ok[["attack", "attack_details"]].itertuples(index=False):
        d = _details(details)
        name = str(attack).split("[", 1)[0]
        for key in ("reach_tokens", "reach_pieces", "public_reach_tokens", "public_reach_pieces"):
            value = d.get(key)
            if isinstance(value, int | float) and value == value:
                seen = out.setdefault(name, {})
                seen[key] = min(float(value), seen.get(key, float("inf")))
    return out


def reach_text(reach: dict[str, float]) -> str:
    """``100 % (99.8 % of pieces); public text 48.6 % (15.8 %)`` for the strength table."""
    parts = []
    for prefix, what in (("", ""), ("public_", "public text ")):
        tokens, pieces = reach.get(f"{prefix}reach_tokens"), reach.get(f"{prefix}reach_pieces")
        if tokens is not None:
            extra = f" ({100 * pieces:.1f} % of pieces)" if pieces is not None else ""
            parts.append(f"{what}{100 * tokens:.1f} %{extra}")
    return "; ".join(parts) or "—"


def reach_cautions(frame: pd.DataFrame) -> list[str]:
    """The headline's first lines: each generative inversion whose output vocabulary holds
    less than :data:`REACH_FLOOR` of the victims' tokens."""
    low = {
        a: r["reach_tokens"]
        for a, r in attack_reach(frame).items()
        if r.get("reach_tokens", 1.0) < REACH_FLOOR
    }
    if not low:
        return []
    shown = ", ".join(f"{a} {100 * v:.1f} %" for a, v in sorted(low.items()))
    return [
        f"Text privacy is over-credited for this corpus: the generative inversions can write "
        f"only part of the victims' tokens ({shown}; below {100 * REACH_FLOOR:.0f} %), so "
        "what they cannot write counts as protected. Pre-train them on public text of the "
        "victims' domain (public_corpus), or let them write every piece of the backbone "
        "(vocabulary: backbone; the per-point fine-tune on the aux teaches the new pieces)."
    ]


def reach_note(frame: pd.DataFrame) -> str | None:
    """A note on how far each generative inversion's public text fits the victims' domain."""
    reach = attack_reach(frame)
    shown = [f"{a}: {reach_text(r)}" for a, r in sorted(reach.items())]
    if not shown:
        return None
    return (
        "Reach of the generative inversions (the share of the victims' tokens, and of their "
        f"distinct pieces, that they can write; then that their public text holds): "
        f"{'; '.join(shown)}. Tokens outside the public text are learnt from the aux only; "
        "public text of the victims' domain (public_corpus) makes the attack stronger."
    )
