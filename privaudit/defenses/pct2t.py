"""POS-constrained T2T (PCT2T), the text-side mechanism of RAPT."""

from __future__ import annotations

import difflib
import functools
import hashlib
import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from privaudit.api import Defense, Release
from privaudit.guarantees import Guarantee, Unit, embedding_distance, guarantee_property
from privaudit.mechanisms.audited import DXNoise, UnitMechanism
from privaudit.mechanisms.inputs import check_rng, check_texts
from privaudit.mechanisms.nearest import NearestNeighbourIndex
from privaudit.mechanisms.noise import sample_dx_noise
from privaudit.models.backbone import backbone
from privaudit.models.pipelines import spacy_pipeline
from privaudit.params import PositiveFloat
from privaudit.runtime.cache import cache_dir, keep_entry
from privaudit.runtime.memo import ContentMemo, digest

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
_VOCAB_VERSION = "pos-vocab-v4"  # v4: tagger + token rules (no parser)


#: The components a coarse POS tag needs: the tagger's fine tag (PTB) decides it, through the
#: attribute ruler's token rules (:class:`PosRules`).
TAGGER_PIPES = ("tok2vec", "tagger", "attribute_ruler")


@dataclass(frozen=True)
class PosRules:
    """The attribute ruler's rules that set a token's coarse POS from the token alone: its
    fine tag (``TAG``), its lower-cased form with its tag (``LOWER`` + ``TAG``), or whether it
    is whitespace. Later rules take precedence, as in spaCy's ``AttributeRuler``. Applied as
    dictionary lookups they cost nothing, where the ruler's matcher costs more than the
    tagger (0.45 s per 10,000 words).

    Rules that read a dependency label (``DEP``) are left out, and with them the parser (1.1 s
    of 2.4 s per 10,000 words): a POS tag is what a tagger gives (RAPT tags words; it does not
    parse). On the 64,097 tokens of the reference reviews the tags equal those of the ruler
    run after the tagger alone on every token (a test checks), and differ from the full
    pipeline's, parser included, on 825 (1.3 %): e.g. a determiner with no head noun stays
    DET (not PRON), a subordinating ``IN`` after a verb stays ADP (not SCONJ).
    """

    rules: dict[tuple[str | None, str | None, bool], tuple[int, str]]

    @classmethod
    def of(cls, nlp: Any) -> PosRules | None:
        """The rules of ``nlp``'s attribute ruler; ``None`` when it has a POS rule on a token
        feature this class does not read (then the whole pipeline tags)."""
        if "attribute_ruler" not in nlp.pipe_names or "tagger" not in nlp.pipe_names:
            return None
        rules: dict[tuple[str | None, str | None, bool], tuple[int, str]] = {}
        for order, rule in enumerate(nlp.get_pipe("attribute_ruler").patterns):
            pos = rule["attrs"].get("POS")
            if pos is None:
                continue
            for pattern in rule["patterns"]:
                if len(pattern) != 1 or "DEP" in pattern[0]:
                    continue  # multi-token and dependency rules set no POS here
                token = dict(pattern[0])
                words, tags = _values(token.pop("LOWER", None)), _values(token.pop("TAG", None))
                space = bool(token.pop("IS_SPACE", False))
                if token or words is None or tags is None:
                    return None
                for word in words:
                    for tag in tags:
                        rules[(word, tag, space)] = (order, str(pos))
        return cls(rules)

    def pos(self, word: str, tag: str, is_space: bool) -> str:
        """The coarse POS the rules give a token (``""``: none applies)."""
        found = [
            self.rules[key]
            for key in (
                (None, tag, False),
                (word, tag, False),
                (None, tag, True),
                (None, None, True),
            )
            if key in self.rules and (not key[2] or is_space)
        ]
        return max(found)[1] if found else ""


def _values(value: object) -> list[str | None] | None:
    """The values a token pattern's attribute accepts: absent, one string, or ``{"IN": [...]}``
    (``None``: a form :class:`PosRules` does not read)."""
    if value is None or isinstance(value, str):
        return [value]
    if isinstance(value, dict) and set(value) == {"IN"}:
        return [str(v) for v in value["IN"]]
    return None


class Word(NamedTuple):
    """A token of a tagged text: its text, the whitespace after it, its coarse POS, and
    whether it is punctuation or whitespace (not counted as a word)."""

    text: str
    space: str
    pos: str
    punct: bool


def tag(nlp: Any, texts: Sequence[str], batch_size: int = 256) -> list[tuple[Word, ...]]:
    """Each text's tokens with their coarse POS (:class:`PosRules` over the tagger's fine
    tags; where a pipeline has rules those cannot read, the pipeline's own tagging with its
    parser)."""
    rules = PosRules.of(nlp)
    if rules is None:
        wanted = ("tok2vec", "tagger", "parser", "attribute_ruler")
        with nlp.select_pipes(enable=[p for p in wanted if p in nlp.pipe_names]):
            return [
                tuple(Word(t.text, t.whitespace_, t.pos_, t.is_punct or t.is_space) for t in d)
                for d in nlp.pipe(texts, batch_size=batch_size)
            ]
    memo: dict[tuple[str, str, bool], str] = {}
    out = []
    with nlp.select_pipes(enable=[p for p in ("tok2vec", "tagger") if p in nlp.pipe_names]):
        for doc in nlp.pipe(texts, batch_size=batch_size):
            words = []
            for t in doc:
                key = (t.lower_, t.tag_, t.is_space)
                if key not in memo:
                    memo[key] = rules.pos(*key)
                words.append(Word(t.text, t.whitespace_, memo[key], t.is_punct or t.is_space))
            out.append(tuple(words))
    return out


#: Every level of a PCT2T (or RAPT) spec tags the same texts.
_TAGGED = ContentMemo(size=4)


def tag_memoised(nlp: Any, texts: Sequence[str]) -> list[tuple[Word, ...]]:
    """:func:`tag`, memoised by the pipeline and the texts' content (see
    :mod:`privaudit.runtime.memo`: a hit is charged what the tagging cost)."""
    key = digest(["pct2t-tag", id(nlp), nlp.meta.get("name"), nlp.meta.get("version"), *texts])

    def compute() -> np.ndarray:
        box = np.empty(1, dtype=object)  # the memo holds arrays; tuples of tuples are immutable
        box[0] = tuple(tag(nlp, texts))
        return box

    return list(_TAGGED.get(key, compute)[0])


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
    # lazy: the synthetic corpus (only to build the vocabulary) stays off the lean privatize path
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
    bb = backbone(backbone_name)
    nlp = spacy_pipeline(spacy_name, TAGGER_PIPES)
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
            pass  # unreadable cache: rebuilt below, and replaced where the cache is writable

    word_tags: dict[str, set[str]] = {}
    tokens = [str(t) for t in bb.subwords.id_to_token(bb.candidate_ids.tolist())]
    alone = [w for w in tokens if w.isascii() and w.isalpha()]
    for word, tokens in zip(alone, tag(nlp, alone, batch_size=2000), strict=True):
        if len(tokens) == 1:
            word_tags.setdefault(word, set()).add(tokens[0].pos)
    for tokens in tag(nlp, _reference_texts()):
        for tok in tokens:
            word = tok.text.lower()
            if word.isalpha():
                word_tags.setdefault(word, set()).add(tok.pos)
    words = sorted(word_tags)
    pieces = bb.token_ids(words)
    keep = [i for i, p in enumerate(pieces) if len(p)]
    words = [words[i] for i in keep]
    vectors = np.stack([bb.embeddings[pieces[i]].mean(0) for i in keep]).astype(np.float32)
    all_tags = sorted({t for w in words for t in word_tags[w]})
    tags = {t: np.asarray([t in word_tags[w] for w in words]) for t in all_tags}
    arrays = {"words": np.asarray(words), "vectors": vectors} | {
        f"tag_{t}": m for t, m in tags.items()
    }
    keep_entry(path, lambda fh: np.savez(fh, **arrays))  # a read-only cache: built again next time
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
    version: ClassVar[str] = "2"  # 2: POS from the tagger and token rules, no parser
    cost_prior: ClassVar[float] = 0.25  # s per 1,000 words (estimate)
    knob: ClassVar[str | None] = "eta"
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

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """eta·d_X-privacy per selected word, within its POS category."""
        cats = ", ".join(resolve_categories(self.categories))
        return Guarantee.dx(
            "eta",
            self.eta,
            unit=Unit.WORD,
            selected=True,
            within="its POS category",
            metric=embedding_distance(
                self.backbone, pooled="Euclidean distance between mean WordPiece input embeddings"
            ),
            composes_over=Unit.DOCUMENT,
            notes=f"Words of the categories {cats} are perturbed; the other words and the "
            "category sequence are released (Li et al., RAPT §III-A2)",
            mechanism="word_kernel",
        )

    def word_kernel(self) -> UnitMechanism:
        """For the guarantee audit: :meth:`perturb_words` (what ``privatize`` calls on every
        selected word, and RAPT on its plain tokens) on words of the first selected category,
        one call per batch, and the d_X noise step it draws."""
        category = resolve_categories(self.categories)[0]
        vocab = pos_vocabulary(self.backbone, self.spacy_model)
        dim = backbone(self.backbone).dim
        eta = float(self.eta)

        def draw(units: Sequence[int], rng: np.random.Generator) -> list[Hashable]:
            words = [vocab.words[int(u)] for u in units]
            return [w.lower() for w in self.perturb_words(words, [category] * len(words), eta, rng)]

        # sample_dx_noise as this module sees it when the audit runs (a patched one included)
        noise = DXNoise(lambda n, e, rng: sample_dx_noise(n, dim, e, rng), dim, eta)
        return UnitMechanism(
            draw,
            vocab.vectors,
            vocab.members(category),
            lambda u: vocab.words[int(u)],
            noise=noise,
            document=draw,
            category=category,
        )

    # -- shared machinery (RAPT reuses it) ----------------------------------------------------
    def _setup(self) -> tuple[Any, PosVocabulary, tuple[str, ...], dict[str, str], dict[str, Any]]:
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

    def _tag(self, texts: list[str]) -> list[tuple[Word, ...]]:
        return tag_memoised(spacy_pipeline(self.spacy_model, TAGGER_PIPES), texts)

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        texts = check_texts(texts)
        check_rng(rng)
        eta = float(self.eta)
        bb, _, cats, tag_to_cat, _ = self._setup()
        tagged = self._tag(texts)
        # Flatten the selected words of every document, perturb them in one batch.
        where: list[tuple[int, int]] = []
        words: list[str] = []
        word_cats: list[str] = []
        for d, tokens in enumerate(tagged):
            for t, tok in enumerate(tokens):
                cat = tag_to_cat.get(tok.pos)
                if cat is not None and any(ch.isalpha() for ch in tok.text):
                    where.append((d, t))
                    words.append(tok.text)
                    word_cats.append(cat)
        new_words = (
            list(words) if math.isinf(eta) else self.perturb_words(words, word_cats, eta, rng)
        )
        changed: list[dict[int, tuple[str, str]]] = [{} for _ in texts]
        for (d, t), old, new in zip(where, words, new_words, strict=True):
            if new != old:
                changed[d][t] = (old, new)
        out_texts, masks = [], []
        for d, tokens in enumerate(tagged):
            mine = changed[d]
            parts = [
                (mine[t][1] if t in mine else tok.text) + tok.space for t, tok in enumerate(tokens)
            ]
            mask = [t in mine for t, tok in enumerate(tokens) if not tok.punct]
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
                    [(t, old, new) for t, (old, new) in sorted(mine.items())] for mine in changed
                ],
            },
        )


def _restore_edges(original: str, body: str) -> str:
    """spaCy keeps leading/trailing whitespace as tokens already; this guards the rare case
    where it does not, so the released text is never shorter at the edges than the input."""
    return body if body.strip() or not original.strip() else original
