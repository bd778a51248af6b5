"""Person-level attribute inference: a linked account's releases pooled, each person scored
once; n/a where the corpus has no people; end to end through the runner and the board."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from privaudit.api import Knowledge, Release
from privaudit.attacks.person_attribute_inference import PersonAttributeInference
from privaudit.audit.config import PRESETS, load_config
from privaudit.metrics import Truth, score_predictions
from privaudit.metrics.linked import NO_LINKS
from privaudit.outputs import run_grid

FILLER = ["the service was fine", "we came back later", "nothing to add here", "ok overall"]


def _people(n_people: int, per: int, rng: np.random.Generator, start: int = 0) -> pd.DataFrame:
    """Each person writes ``per`` documents; one of them names their attribute's cue word,
    the rest are filler: one document says little, the person says it all."""
    rows = []
    for p in range(start, start + n_people):
        value = "F" if p % 2 else "M"
        cue = "knitting" if value == "F" else "football"
        for d in range(per):
            words = [FILLER[int(rng.integers(len(FILLER)))]]
            if d == 0:
                words.append(cue)
            rows.append({"text": " ".join(words), "author": f"p{p}", "gender": value})
    return pd.DataFrame(rows)


def _knowledge(aux: pd.DataFrame, links: list[int] | None) -> Knowledge:
    import datasets

    ds = datasets.Dataset.from_dict(
        {
            "text": aux["text"].tolist(),
            "author": aux["author"].tolist(),
            "attributes": [{"gender": g} for g in aux["gender"]],
        }
    )
    return Knowledge(
        white_box=False,
        query_mechanism=lambda texts: Release("text", texts=list(texts)),
        aux=ds,
        extra={} if links is None else {"links": links},
    )


def test_pooling_a_persons_releases_recovers_what_one_document_hides() -> None:
    rng = np.random.default_rng(0)
    aux, victims = _people(40, 4, rng), _people(20, 4, rng, start=100)
    links = [int(a[1:]) - 100 for a in victims["author"]]
    attack = PersonAttributeInference(c=10.0).fit(_knowledge(aux, links), rng=rng)
    pred = attack.attack(Release("text", texts=victims["text"].tolist()))
    guesses = pred.attributes["gender"]
    for p in range(20):  # every document of a person gets the person's guess
        assert len({guesses[i] for i in range(len(links)) if links[i] == p}) == 1
    truth = Truth(
        tokens=[], attributes={"gender": victims["gender"].tolist()}, extra={"person": links}
    )
    (row,) = score_predictions(pred, truth, "person_attribute_accuracy")
    assert row["attack_score"] == pytest.approx(1.0)
    assert row["attack_details"]["n_people"] == 20
    assert row["outcome"].stats.shape[0] == 20  # one outcome row per person
    assert row["family"] == "attribute[gender]"


def test_bad_input_is_refused() -> None:
    rng = np.random.default_rng(1)
    aux = _people(6, 3, rng)
    with pytest.raises(ValueError, match="links knowledge field"):
        PersonAttributeInference().fit(_knowledge(aux, None), rng=rng)
    with pytest.raises(ValueError, match="not fitted"):
        PersonAttributeInference().attack(Release("text", texts=["x"]))
    attack = PersonAttributeInference().fit(_knowledge(aux, [0, 0, 1]), rng=rng)
    with pytest.raises(ValueError, match="links for 3 victims"):
        attack.attack(Release("text", texts=["a", "b"]))
    with pytest.raises(ValueError, match="fitted on a 'text'"):
        attack.attack(Release("pooled_vectors", vectors=[np.zeros(3)] * 3))
    empty = PersonAttributeInference().fit(_knowledge(aux, []), rng=rng)
    assert empty.attack(Release("text", texts=[])).attributes["gender"] == []


def test_vector_releases_are_pooled_per_person() -> None:
    rng = np.random.default_rng(2)
    aux = _people(30, 3, rng)
    sign = np.where(aux["gender"] == "F", 1.0, -1.0)

    def vectors(texts: list[str], s: np.ndarray) -> Release:
        noise = rng.standard_normal((len(texts), 4))
        return Release("pooled_vectors", vectors=list(noise + 0.8 * s[:, None]))

    k = _knowledge(aux, [0, 0, 0, 1, 1, 1])
    k = Knowledge(
        white_box=False,
        query_mechanism=lambda t: vectors(t, sign),
        aux=k.aux,
        extra={"links": [0, 0, 0, 1, 1, 1]},
    )
    attack = PersonAttributeInference().fit(k, rng=rng)
    victims = vectors(["x"] * 6, np.array([1.0] * 3 + [-1.0] * 3))
    guesses = attack.attack(victims).attributes["gender"]
    assert guesses == ["F"] * 3 + ["M"] * 3


def _smoke(attacks: list[str], corpus: dict | None = None) -> dict:
    data = dict(PRESETS["smoke"])
    data["attacks"] = attacks
    data["defenses"] = [{"name": "none"}, {"name": "t2t", "knob_values": [10]}]
    if corpus is not None:
        data["corpus"] = corpus
    return data


def test_runner_scores_people_and_records_the_unit(tmp_path) -> None:
    result = run_grid(
        load_config(_smoke(["attribute-inference", "person-attribute-inference"])),
        run_dir=tmp_path / "r",
        progress=False,
    )
    f = result.frame
    person = f[f["attack"].str.startswith("person-attribute-inference")]
    assert len(person) and (person["status"] == "ok").all()
    assert set(person["family"]) == set(
        f.loc[f["attack"].str.startswith("attribute-inf"), "family"]
    )
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    unit = meta["unit"]
    n = int(f["n_test"].iloc[0])
    assert unit["kind"] == "person" and unit["documents"] == n and unit["units"] < n
    assert unit["label"] == f"{n} documents by {unit['units']} people"
    assert not any("author" in i for i in unit["ids"])
    details = person["attack_details"].iloc[0]
    details = json.loads(details) if isinstance(details, str) else details
    assert details["n_people"] == unit["units"]
    board_text = (tmp_path / "r" / "leaderboard.md").read_text()
    assert f"{n} documents by {unit['units']} people" in board_text
    from privaudit.outputs.report import write_report

    page = write_report(tmp_path / "r").read_text(encoding="utf-8")
    assert f"{n} documents by {unit['units']} people (intervals resample people)" in page


def test_a_corpus_without_authors_has_documents_and_no_links(tmp_path) -> None:
    rows = [
        {
            "text": f"review {i} about the {'food' if i % 2 else 'room'}",
            "label": i % 2,
            "gender": "F" if i % 3 else "M",
        }
        for i in range(90)
    ]
    path = tmp_path / "c.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    corpus = {"name": "file", "params": {"path": str(path), "attributes": ["gender"]}}
    result = run_grid(
        load_config(_smoke(["person-attribute-inference"], corpus)),
        run_dir=tmp_path / "r",
        progress=False,
    )
    f = result.frame
    assert (f["status"] == "n/a").all()
    assert NO_LINKS in f["reason"].iloc[0]
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["unit"]["kind"] == "document"
