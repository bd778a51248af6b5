"""Published attack strengths: what each attack's paper reports, with the paper's setting.

The one place the report's "Attack strength" section reads them from. A figure is given only
where it was checked against the paper (or, for a reproduction, against the source named);
an attack whose paper reports nothing comparable has ``figure=None`` and says why in
``setting``. Keyed by the attack's registered name; an attack that is not in a run is simply
not shown, and one not listed here gets an empty cell.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Published:
    """One published result of an attack: ``figure`` (text, with its unit, or None when none
    is comparable), the ``metric`` it is in, the paper's ``setting`` (encoder, data, length,
    attacker's budget) and the ``source`` (paper, venue, year; table or section)."""

    figure: str | None
    metric: str
    setting: str
    source: str


#: Attack name → its published results, strongest setting first.
PUBLISHED: dict[str, tuple[Published, ...]] = {
    "vec2text": (
        Published(
            figure="92 % exact; token F1 ≈ 0.99",
            metric="exact recovery, token F1",
            setting="GTR-base embeddings of 32-token inputs, 50 correction steps + sequence beam 8",
            source="Morris et al., EMNLP 2023, Text Embeddings Reveal (Almost) As Much As Text",
        ),
        Published(
            figure="BLEU 83; token F1 0.95",
            metric="BLEU, token F1",
            setting="a public reproduction of the same setting with 20 correction steps",
            source="reproduction cited in issue 25 (not the paper)",
        ),
    ),
    "geia": (
        Published(
            figure=None,
            metric="ROUGE-L, word F1",
            setting="not reported here: no number from the paper (GPT-2 decoder, Sentence-BERT "
            "/ SimCSE / Sentence-T5 / MPNet on PersonaChat and QNLI) could be checked",
            source="Li, Xu & Song, Findings of ACL 2023",
        ),
    ),
    "bow-inversion": (
        Published(
            figure="F1 0.5–0.7",
            metric="F1 of the recovered input words",
            setting="their inversion attacks on popular sentence embeddings (the range over "
            "encoders and attacks, as stated in the abstract)",
            source="Song & Raghunathan, CCS 2020, Information Leakage in Embedding Models",
        ),
    ),
}


def published(attack: str) -> tuple[Published, ...]:
    """The published results of ``attack`` (a registered name), or ``()``."""
    return PUBLISHED.get(attack, ())
