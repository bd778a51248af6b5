"""Issue 18, the lean client path: ``privaudit privatize`` loads only what its defense needs
(T2T: no torch, no transformers, no spaCy; PCT2T: spaCy's tagging components, no torch), and
what it loads gives the same tokens, vectors and tags as the full pipeline."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.mechanisms.words import words

pytestmark = pytest.mark.slow

#: Module families a privatizing client must not load.
HEAVY = ("torch", "transformers", "peft", "sklearn", "pandas", "privaudit.attacks",
         "privaudit.utility", "privaudit.audit", "privaudit.leaderboard")  # fmt: skip

PROBE = """
import contextlib, io, json, sys
sys.argv = ["privaudit", "privatize", "--defense", {defense!r}]
from privaudit.cli import app
out = io.StringIO()
try:
    with contextlib.redirect_stdout(out):
        app()
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps({{"modules": sorted(sys.modules), "lines": out.getvalue().splitlines()}}))
"""


def _privatize_in_a_fresh_process(defense: str, text: str) -> dict:
    code = PROBE.format(defense=defense)
    done = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("defense", ["t2t", "pct2t"])
def test_privatize_loads_no_attack_trainer_grid_or_torch(defense: str) -> None:
    text = "The hotel in Leeds lost our booking twice.\nGreat shoes, said Sarah.\n"
    _privatize_in_a_fresh_process(defense, text)  # a first run may build cached vocabularies
    probe = _privatize_in_a_fresh_process(defense, text)
    heavy = sorted(
        {
            m.split(".")[0] if not m.startswith("privaudit") else m
            for m in probe["modules"]
            if m.startswith(HEAVY)
        }
    )
    assert heavy == [], heavy
    assert len(probe["lines"]) == 2
    spacy_loaded = any(m == "spacy" for m in probe["modules"])
    assert spacy_loaded == (defense == "pct2t")  # T2T needs no tagger


def test_lean_backbone_equals_the_transformers_one() -> None:
    """The default backbone's tokenizer (``tokenizers``) and embedding matrix (read from the
    weights file) are those ``transformers`` loads: same ids, same decoding, same matrix."""
    from privaudit.models.backbone import backbone

    bb = backbone()
    odd = ["Zoë's café 😀 naïve — 東京 ﬁne", "HELLO   World!!", "", "don't can't I'm"]
    texts = [*synthetic_reviews(n_docs=300, seed=4).texts("train"), *odd]
    full = bb.tokenizer(texts, add_special_tokens=False, truncation=False, verbose=False)
    unk = bb.tokenizer.unk_token_id
    expected = [[i for i in row if i != unk] for row in full["input_ids"]]
    assert [r.tolist() for r in bb.token_ids(texts)] == expected
    rows = [np.asarray(r) for r in expected[:50]]
    # The same words; `tokenizers`' decoder also closes up "nicholson ' s" into "nicholson's".
    assert [words(t) for t in bb.detokenize(rows)] == [
        words(bb.tokenizer.decode(r.tolist(), clean_up_tokenization_spaces=True)) for r in rows
    ]
    weights = bb.model.get_input_embeddings().weight.detach().cpu().numpy()
    assert np.array_equal(bb.embeddings, weights)
    special = set(bb.tokenizer.all_special_ids)
    assert not special & set(bb.candidate_ids.tolist())


def test_pos_rules_give_the_attribute_rulers_tags() -> None:
    """:class:`PosRules` (dictionary lookups over the tagger's fine tags) equals spaCy's
    attribute ruler run after the tagger, token for token."""
    from privaudit.defenses.pct2t import PosRules, tag
    from privaudit.models.pipelines import spacy_pipeline

    nlp = spacy_pipeline()
    odd = ["  spaced   out  ", "\n\nnew\tline", "I'd've gone. To be or not", "THE END!!!", ""]
    texts = [*synthetic_reviews(n_docs=400, seed=9).texts("train"), *odd]
    ours = [[w.pos for w in tokens] for tokens in tag(nlp, texts)]
    with nlp.select_pipes(enable=["tok2vec", "tagger", "attribute_ruler"]):
        ruler = [[t.pos_ for t in doc] for doc in nlp.pipe(texts)]
    assert ours == ruler
    rules = PosRules.of(nlp)
    assert rules is not None and rules.pos("is", "VBZ", False) == "AUX"
    assert rules.pos("zzz", "NOT-A-TAG", False) == ""


def test_a_tagging_pipeline_loads_fewer_components_unless_the_whole_one_is_loaded(
    monkeypatch,
) -> None:
    from privaudit.defenses.pct2t import TAGGER_PIPES
    from privaudit.models import pipelines
    from privaudit.models.pipelines import spacy_pipeline

    monkeypatch.setattr(pipelines, "_WHOLE_PIPELINES", {})  # as in a fresh process
    lean = spacy_pipeline.__wrapped__(None, TAGGER_PIPES)  # past the process-wide cache
    assert lean.pipe_names == list(TAGGER_PIPES)
    whole = spacy_pipeline()
    pipelines._WHOLE_PIPELINES[None] = whole  # what loading it whole records
    assert "ner" in whole.pipe_names
    assert spacy_pipeline.__wrapped__(None, TAGGER_PIPES) is whole  # no second copy
