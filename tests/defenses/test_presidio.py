"""The presidio defense (issue 48): Presidio's analyzer on the shipped spaCy pipeline,
offline, its levels (entity sets and a score threshold), its operators and its spans."""

from __future__ import annotations

import socket
from typing import Any

import numpy as np
import pytest

from privaudit.defenses.presidio import DIRECT, PRESETS, Presidio
from privaudit.registry import DEFENSES

TEXT = (
    "Mr John Smith (john.smith@example.com) moved to Oslo, Norway, on 5 May 2001 and joined "
    "Acme Corp."
)

pytestmark = pytest.mark.slow  # loads the spaCy pipeline


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any network connection fails the test: nothing may be downloaded at run time."""

    def refuse(*_a: Any, **_k: Any) -> None:
        raise AssertionError("presidio tried the network")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def _run(**params: Any) -> Any:
    return Presidio(**params).privatize([TEXT], rng=np.random.default_rng(0))


def test_levels_are_entity_sets_with_a_threshold() -> None:
    one, two = _run(level=1), _run(level=2)
    assert one.texts == [
        "Mr <PERSON> (<EMAIL_ADDRESS>) moved to Oslo, Norway, on 5 May 2001 and joined Acme Corp."
    ]
    assert "<LOCATION>" in two.texts[0] and "<DATE_TIME>" in two.texts[0]
    assert "Oslo" not in two.texts[0] and "2001" not in two.texts[0]
    assert set(PRESETS[1][0]) == set(DIRECT) and PRESETS[1][0] == DIRECT
    # the spans it reports are what it replaced, one for one
    spans = one.audit["masked_spans"][0]
    assert [TEXT[s:e] for s, e in spans] == ["John Smith", "john.smith@example.com"]
    rebuilt, pos = [], 0
    for (s, e), (_, _, label) in zip(spans, one.audit["hidden_spans"][0], strict=True):
        rebuilt += [TEXT[pos:s], f"<{label}>"]
        pos = e
    assert "".join([*rebuilt, TEXT[pos:]]) == one.texts[0]
    assert one.public().audit == {}


def test_mask_operator_and_explicit_settings() -> None:
    masked = _run(level=1, operator="mask").texts[0]
    assert masked.startswith("Mr ********** (**********************)")
    only = _run(entities=["LOCATION"], score_threshold=0.1).texts[0]
    assert only == TEXT.replace("Oslo", "<LOCATION>").replace("Norway", "<LOCATION>")
    with pytest.raises(ValueError, match="recognizes no entity 'LOCUS'"):
        _run(entities=["LOCUS"])


def test_registered_with_its_knob() -> None:
    assert DEFENSES.get("presidio") is Presidio
    assert Presidio.knob == "level" and Presidio.levels == (1, 2)
    with pytest.raises(ValueError, match="level"):
        Presidio(level=4)
    same = [_run(level=2).texts for _ in range(2)]
    assert same[0] == same[1]
