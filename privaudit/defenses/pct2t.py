"""POS-constrained T2T (PCT2T), the text-side mechanism of RAPT."""

from __future__ import annotations

import difflib
import functools
import hashlib
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from privaudit.api import Defense, Release
from privaudit.defenses._validate import check_rng, check_texts
from privaudit.mechanisms.noise import sample_dx_noise
from privaudit.params import PositiveFloat

# Coarse categories over spaCy's universal POS tags (RAPT §III-A2 names the first four).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "noun": ("NOUN", "PROPN"),
    "verb": ("VERB", "AUX"),
    "pronoun": ("PRON",),
    "preposition": ("ADP",),
    "adjective": ("ADJ",),
    "adverb": ("ADV",),
    "determiner": ("DET",),
    "numeral": ("NUM",),
    "conjunction": ("CCONJ", "SCONJ"),
    "particle": ("PART",),
    "interjection": ("INTJ",),
}
DEFAULT_CATEGORIES = ("noun", "verb", "pronoun", "preposition")
_VOCAB_VERSION = "pos-vocab-v3"


def tagging_pipes(nlp: Any) -> list[str]:
    """The pipes that decide coarse POS. The parser stays: en_core_web_sm's attribute ruler
    refines POS from dependency labels (DT without a head noun → PRON, IN as a marker → SCONJ,
    auxiliary "have" → AUX), so tagging without it disagrees with the full pipeline."""
    wanted = ("tok2vec", "tagger", "parser", "attribute_ruler")
    return [p for p in wanted if p in nlp.pipe_names]


def resolve_categories(categories: str | Iterable[str] | None) -> tuple[str, ...]:
    """Normalise a category selection; ``"all"`` means every category."""
    if categories is None:
        return DEFAULT_CATEGORIES
    if isinstance(categories, str):
        categories = [c.strip() for c in categories.split(",") if c.strip()]
    chosen: list[str] = []
    for raw in categories:
        if not isinstance(raw, str):
            raise TypeError(f"POS categories are names (strings), got {raw!r}.")
        name = raw.lower()
        if name == "all":
            return tuple(CATEGORIES)
        if name not in CATEGORIES:
            close = difflib.get_close_matches(name, [*CATEGORIES, "all"], n=2)
            hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
            raise ValueError(
                f"Unknown POS category {raw!r}.{hint} Choose from {', '.join(CATEGORIES)} or 'all'."
            )
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        raise ValueError("Select at least one POS category (or 'all').")
    return tuple(chosen)


@dataclass
class PosVocabulary:
    """A tagged reference word list: each word, its vector (mean of its WordPiece embeddings)
    and the POS categories it belongs to (a word may belong to several: "to" is ADP in context
    and PART alone)."""

    words: list[str]
    vectors: np.ndarray  # (n_words, dim) float32
    tags: dict[str, np.ndarray]  # universal POS tag -> boolean membership mask over words

    def __post_init__(self) -> None:
        self.row = {w: i for i, w in enumerate(self.words)}

    def members(self, category: str) -> np.ndarray:
        mask = np.zeros(len(self.words), dtype=bool)
        for tag in CATEGORIES[category]:
            if tag in self.tags:
                mask |= self.tags[tag]
        return np.flatnonzero(mask)


def _reference_texts() -> list[str]:
    """Public, offline text whose in-context tags complement the out-of-context ones."""
    from privaudit.corpora.synthetic import synthetic_reviews

    return synthetic_reviews(n_docs=3000, seed=12345).texts("train")


@functools.cache
def pos_vocabulary(backbone_name: str | None, spacy_name: str | None = None) -> PosVocabulary:
    """Build (once, then from the disk cache) the tagged reference word list for a backbone.

    Words: the backbone's single-piece alphabetic whole words, tagged alone, plus the words of
    a public reference text (a seeded ``synthetic-reviews`` sample) with every tag spaCy gives
    them in context. The cache key covers the backbone's fingerprint and the spaCy pipeline's
    name and version; categories are chosen at load time from the stored tags, so a changed
    backbone, pipeline or category set never serves a stale vocabulary.
    """
    from privaudit.mechanisms.memo import cache_dir
    from privaudit.resources import backbone, spacy_pipeline

    bb = backbone(backbone_name)
    nlp = spacy_pipeline(spacy_name)
    key = hashlib.sha256(
        f"{_VOCAB_VERSION}|{bb.fingerprint}|{nlp.meta['name']}|{nlp.meta['version']}".encode()
    ).hexdigest()[:16]
    path = cache_dir() / f"pos_vocab_{key}.npz"
    if path.is_file():
        try:
            data = np.load(path, allow_pickle=False)
            tags = {k[4:]: data[k] for k in data.files if k.startswith("tag_")}
            return PosVocabulary([str(w) for w in data["words"]], data["vectors"], tags)
        except (OSError, KeyError, ValueError):
            path.unlink(missing_ok=True)  # unreadable cache: rebuild it

    word_tags: dict[str, set[str]] = {}
    tokens = bb.tokenizer.convert_ids_to_tokens(bb.candidate_ids.tolist())
    alone = [w for w in tokens if w.isascii() and w.isalpha()]
    with nlp.select_pipes(enable=tagging_pipes(nlp)):
        for word, doc in zip(alone, nlp.pipe(alone, batch_size=2000), strict=True):
            if len(doc) == 1:
                word_tags.setdefault(word, set()).add(doc[0].pos_)
        for doc in nlp.pipe(_reference_texts(), batch_size=256):
            for tok in doc:
                word = tok.text.lower()
                if word.isalpha():
                    word_tags.setdefault(word, set()).add(tok.pos_)
    words = sorted(word_tags)
    pieces = bb.token_ids(words)
    keep = [i for i, p in enumerate(pieces) if len(p)]
    words = [words[i] for i in keep]
    vectors = np.stack([bb.embeddings[pieces[i]].mean(0) for i in keep]).astype(np.float32)
    all_tags = sorted({t for w in words for t in word_tags[w]})
    tags = {t: np.asarray([t in word_tags[w] for w in words]) for t in all_tags}
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".npz.tmp")
    with os.fdopen(fd, "wb") as fh:
        np.savez(
            fh, words=np.asarray(words), vectors=vectors, **{f"tag_{t}": m for t, m in tags.items()}
        )
    os.replace(tmp, path)
    return PosVocabulary(words, vectors, tags)


def match_case(template: str, word: str) -> str:
    """Give a replacement the original's casing pattern (the vocabulary is lower case)."""
    if len(template) > 1 and template.isupper():
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


class PCT2T(Defense):
    """POS-constrained text-to-text privatization.

    Paper: Li et al., "Privacy-Preserving Prompt Tuning for Large Language Model Services"
    (RAPT), §III-A2, building on T2T (Feyisetan et al., WSDM 2020).

    Threat model: as T2T — the user privatizes locally and releases text; the service and any
    attacker see the released text and may know the mechanism and the backbone.

    Mechanism: the text is split into words by spaCy and POS-tagged in context. Each word whose
    POS falls in a selected category (default noun, verb, pronoun, preposition = spaCy
    NOUN/PROPN, VERB/AUX, PRON, ADP) is embedded as the mean of its WordPiece embeddings,
    perturbed with d_X noise, and projected to the nearest word of the *same category*; every
    other word, the whitespace and the punctuation are kept, so the sentence keeps its shape
    and its number of words.

    Privacy knob: ``eta`` (1 / Euclidean distance in the backbone's input-embedding space).
    Guarantee: eta·d_X-privacy per selected word with respect to words of the same category;
    the category sequence itself (which positions are nouns, ...) is released, as in the paper.

    Choices and deviations:
    - Category vocabularies are the backbone's single-piece alphabetic whole words, tagged once
      out of context by spaCy (POS of a lone word) and cached on disk; for such words the mean
      sub-word embedding is the word's embedding. Multi-piece input words are embedded by their
      mean and may only be replaced by single-piece words.
    - Replacements take the original's casing (Title, UPPER) because the vocabulary is uncased.
    - Words with no embeddable piece (emoji, unsupported scripts) are kept.
    - The replacement rate (runner audit) counts changed words among non-punctuation words.
    """

    name: ClassVar[str] = "pct2t"
    knob: ClassVar[str | None] = "eta"
    guarantee: ClassVar[str] = "eta·d_X-privacy per selected word, within its POS category"
    levels: ClassVar[tuple[float, ...]] = (50, 75, 100)

    def __init__(
        self,
        eta: PositiveFloat = 100.0,
        categories: str | Sequence[str] | None = None,
        backbone: str | None = None,
        spacy_model: str | None = None,
    ) -> None:
        resolve_categories(categories)  # names the annotation cannot list: fail at construction
        self.eta = eta
        self.categories = categories
        self.backbone = backbone
        self.spacy_model = spacy_model

    # -- shared machinery (RAPT reuses it) ----------------------------------------------------
    def _setup(self) -> tuple[Any, PosVocabulary, tuple[str, ...], dict[str, str], dict[str, Any]]:
        from privaudit.mechanisms.nearest import NearestNeighbourIndex
        from privaudit.resources import backbone

        cats = resolve_categories(self.categories)
        bb = backbone(self.backbone)
        vocab = pos_vocabulary(self.backbone, self.spacy_model)
        tag_to_cat = {tag: c for c in cats for tag in CATEGORIES[c]}
        cache = vocab.__dict__.setdefault("_indices", {})
        indices = {}
        for c in cats:
            if c not in cache:
                members = vocab.members(c)
                if len(members) < 2:
                    raise ValueError(
                        f"POS category {c!r} has fewer than two words in the reference word "
                        f"list of {bb.name!r}; drop it from the selection."
                    )
                key = f"{bb.fingerprint}-{_VOCAB_VERSION}-{len(vocab.words)}-{c}"
                cache[c] = NearestNeighbourIndex(vocab.vectors, members, cache_key=key)
            indices[c] = cache[c]
        return bb, vocab, cats, tag_to_cat, indices

    def perturb_words(
        self,
        words: Sequence[str],
        categories: Sequence[str],
        eta: float,
        rng: np.random.Generator,
    ) -> list[str]:
        """Replace each word by the nearest word of its category to its noisy vector.

        One noise draw per word, in order; words in the reference list are pruned exactly (see
        :mod:`privaudit.mechanisms.nearest`), others (e.g. rare multi-piece words) are
        embedded as the mean of their pieces and searched in full. Words with no embeddable
        piece are kept.
        """
        bb, vocab, _, _, indices = self._setup()
        out = list(words)
        if not words:
            return out
        noise = sample_dx_noise(len(words), bb.dim, eta, rng)
        lower = [w.lower() for w in words]
        unknown = sorted({w for w in lower if w not in vocab.row})
        piece_mean = {
            w: bb.embeddings[p].mean(0)
            for w, p in zip(unknown, bb.token_ids(unknown), strict=True)
            if len(p)
        }
        cats = np.asarray(categories)
        for c, index in indices.items():
            rows = [
                r
                for r in np.flatnonzero(cats == c)
                if lower[r] in vocab.row or lower[r] in piece_mean
            ]
            if not rows:
                continue
            rows_a = np.asarray(rows, dtype=np.int64)
            source = np.asarray([vocab.row.get(lower[r], -1) for r in rows], dtype=np.int64)
            known = source >= 0
            known[known] = index._is_candidate[source[known]]
            vecs = np.stack(
                [
                    vocab.vectors[vocab.row[lower[r]]]
                    if lower[r] in vocab.row
                    else piece_mean[lower[r]]
                    for r in rows
                ]
            )
            noisy = vecs + noise[rows_a]
            new = np.empty(len(rows), dtype=np.int64)
            if known.any():
                new[known] = index.project(
                    noisy[known], source_ids=source[known], offsets=noise[rows_a][known]
                )
            if (~known).any():
                new[~known] = index.query(noisy[~known])
            for r, k in zip(rows, new, strict=True):
                if vocab.words[k] != lower[r]:
                    out[r] = match_case(words[r], vocab.words[k])
        return out

    def _tag(self, texts: list[str]) -> list[Any]:
        from privaudit.resources import spacy_pipeline

        nlp = spacy_pipeline(self.spacy_model)
        with nlp.select_pipes(enable=tagging_pipes(nlp)):
            return list(nlp.pipe(texts, batch_size=256))

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        check_rng(rng)
        eta = float(self.eta)
        bb, _, cats, tag_to_cat, _ = self._setup()
        docs = self._tag(texts)
        # Flatten the selected words of every document, perturb them in one batch.
        where: list[tuple[int, int]] = []
        words: list[str] = []
        word_cats: list[str] = []
        for d, doc in enumerate(docs):
            for t, tok in enumerate(doc):
                cat = tag_to_cat.get(tok.pos_)
                if cat is not None and any(ch.isalpha() for ch in tok.text):
                    where.append((d, t))
                    words.append(tok.text)
                    word_cats.append(cat)
        new_words = (
            list(words) if math.isinf(eta) else self.perturb_words(words, word_cats, eta, rng)
        )
        replaced_tokens: dict[tuple[int, int], str] = {
            loc: new for loc, old, new in zip(where, words, new_words, strict=True) if new != old
        }
        out_texts, masks = [], []
        for d, doc in enumerate(docs):
            parts, mask = [], []
            for t, tok in enumerate(doc):
                new = replaced_tokens.get((d, t), tok.text)
                parts.append(new + tok.whitespace_)
                if not (tok.is_punct or tok.is_space):
                    mask.append((d, t) in replaced_tokens)
            out_texts.append(_restore_edges(texts[d], "".join(parts)))
            masks.append(np.asarray(mask, dtype=bool))
        return Release(
            "text",
            texts=out_texts,
            meta={"defense": self.name, "eta": eta, "categories": list(cats), "backbone": bb.name},
            audit={
                "replaced": masks,
                "unit": "word",
                # (spaCy token index, original, replacement) per document, for verification
                "replacements": [
                    [
                        (t, docs[d][t].text, new)
                        for (dd, t), new in replaced_tokens.items()
                        if dd == d
                    ]
                    for d in range(len(docs))
                ],
            },
        )


def _restore_edges(original: str, body: str) -> str:
    """spaCy keeps leading/trailing whitespace as tokens already; this guards the rare case
    where it does not, so the released text is never shorter at the edges than the input."""
    return body if body.strip() or not original.strip() else original
