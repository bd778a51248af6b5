"""De-anonymization of Hide-and-Seek releases: guess the entities behind the replacements.

This module holds the attack: fitting its index on the queried aux pairs and guessing. Reading
anonymized text (replaced spans, contexts, the aux diff) is :mod:`._has_spans`; the white-box
knowledge of the hide model (candidate filters, surrogate vocabulary) is :mod:`._has_white_box`;
the entity protocol it shares with the defense (NER runner, placeholders, repeats) is
:mod:`privaudit.models.entities`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Self

import numpy as np
from annotated_types import Ge, Le, MinLen

from privaudit.api import Attack, Knowledge, Predictions, Release, Space
from privaudit.attacks._has_spans import (
    Aligner,
    Ner,
    ReplacedSpan,
    find_spans,
    index_of,
    learn_merges,
    merge_spans,
    propagate_spans,
    ratio,
    span_contexts,
)
from privaudit.attacks._has_white_box import (
    blank_out,
    not_used,
    vocabulary_spans,
    white_filter,
)
from privaudit.mechanisms.inputs import check_texts
from privaudit.models.entities import PLACEHOLDER, spacy_entities
from privaudit.params import NonNegativeFloat, PositiveInt

_MIN_PURITY = 0.9  # share of one original a replacement string must map to across aux docs
_SURROGATE_SHARE = 0.1  # non-placeholder share of aux replacements above which NER is run
_Record = tuple[int, ReplacedSpan, str, bool]  # (doc, span, original string, changed?)
_Contexts = tuple[list[tuple[str, ...]], list[tuple[str, ...]], str]  # of span_contexts
_Detection = tuple[int, ReplacedSpan, str, tuple[str, ...], tuple[str, ...]]  # with contexts


@dataclass
class _Pool:
    """The aux observations of one type: originals behind replacements, with their contexts."""

    originals: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    docs: list[int] = field(default_factory=list)
    left: list[tuple[str, ...]] = field(default_factory=list)
    right: list[tuple[str, ...]] = field(default_factory=list)
    # Built by _freeze: context ids per depth (columns 0..k-1) and the doc TF-IDF rows.
    left_ids: np.ndarray | None = None
    right_ids: np.ndarray | None = None
    doc_rows: Any = None
    doc_array: np.ndarray | None = None


class HaSDeanonymization(Attack):
    """Recover the originals behind Hide-and-Seek placeholders or surrogates.

    Paper: Chen et al., "Hide and Seek (HaS): A Lightweight Framework for Prompt Privacy
    Protection", 2023 (arXiv:2309.03057), §3.3: an adversary who can query the hide model
    learns to map anonymized prompts back; privacy is 1 - difflib similarity between the
    original and the recovered prompt.

    Black box (``white_box=False``, default). The attacker may query the hide mechanism (at the
    victims' level) on its own aux texts and so holds (original, anonymized) pairs; it reads
    the release's public meta. From the pairs it learns, by a token-level diff:
    - which released strings stand for replacements: ``<TYPE_n>`` placeholders (by pattern) and,
      when the aux replacements are not placeholders, surrogates: spaCy NER spans on the
      anonymized text of the labels that were ever replaced in aux and whose replacement pays
      (guessing beats keeping the released string in a leave-one-aux-document-out test over all
      spans of that label, verbatim originals included); short gaps (", ", " and ") that in aux
      mostly sit inside one replacement join two NER spans (faker's "Miller, Gill and Meyer");
    - a surrogate → original dictionary, used where a released string maps to one original in
      at least ``min_consistent`` aux documents (a deterministic hide model; faker surrogates,
      drawn afresh per call, never are);
    - a context prior per type: the aux originals behind that type, each with the
      ``context_words`` words left and right of its replacement (other replacements read as
      ``<TYPE>``) and the TF-IDF vector of its anonymized document. A victim span's guess comes
      from its ``k_neighbours`` best aux matches (score: matched context depth on each side plus
      ``doc_weight`` × cosine of the documents; weights ``exp(score)``): the original with the
      highest expected difflib ratio to the neighbours' originals (a string medoid: under
      uncertainty it beats the most frequent string on character similarity, and is that
      string when one dominates).
    Every occurrence is guessed on its own context.

    White box (``white_box=True``). The same attacker also knows the hide model (spaCy
    ``en_core_web_sm`` NER, the entity types of ``meta["entity_types"]``, HaS's faker surrogate
    formats) and the Seek side's mapping behaviour, and uses what that buys:
    - type-exact detection: NER spans of the hidden types are always replaced (the hide model
      would hide them, so they are surrogates), besides the black box's learned labels; strings
      the NER misses but the hide vocabulary names (HaS's relative dates, faker en_US city and
      company formats) are surrogates too, unless in aux such a family mostly matched verbatim
      originals; every further whole-word occurrence of a detected surrogate is the same
      replacement (HaS hides repeats);
    - one placeholder or surrogate stands for one original in a document: its guess pools the
      context of all its occurrences and is substituted consistently; distinct replacements of
      one document stand for distinct originals, so guesses are not reused;
    - a surrogate never equals or contains its original, and an original string left verbatim
      elsewhere in the document cannot be the hidden one (HaS would have hidden it too);
    - faker surrogates are shaped like their original (first name ↔ first name, title kept,
      country ↔ country, a date's month/year/day/weekday form), so candidates of another
      shape are dropped when any of the right shape exist.
    What it does not know: the per-document secret mapping (Seek's key) and the victims'
    originals; placeholder numbers carry only order of appearance, which it does not use.

    Output: per victim the recovered text (spans substituted right to left). Metric: mean
    difflib ratio to the original → empirical privacy 1 - ratio; the runner also reports the
    entity recovery and the similarity of the anonymized text itself (doing nothing).
    """

    name: ClassVar[str] = "has-deanonymization"
    cost_prior: ClassVar[float] = 0.11  # s per 1,000 words (estimate)
    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TEXT})
    metric: ClassVar[str] = "text_similarity"
    # Deterministic given its data: 5 fits at has level 1 and 4, sd 0 (2026-11-26).
    fit_sd: ClassVar[float] = 0.0
    needs_white_box: ClassVar[bool] = False  # only white_box=True needs it (see applicable)
    needs_query: ClassVar[bool] = True
    needs_aux: ClassVar[bool] = True

    def __init__(
        self,
        white_box: bool = False,
        context_words: Annotated[int, Ge(1), Le(6)] = 2,
        k_neighbours: PositiveInt = 20,
        doc_weight: NonNegativeFloat = 3.0,
        min_consistent: PositiveInt = 2,
        max_aux: PositiveInt | None = None,
        spacy_model: Annotated[str, MinLen(1)] | None = None,
    ) -> None:
        self.white_box = white_box
        self.context_words = context_words
        self.k_neighbours = k_neighbours
        self.doc_weight = doc_weight
        self.min_consistent = min_consistent
        self.max_aux = max_aux
        self.spacy_model = spacy_model
        self._fitted = False
        self._mode: str | None = None
        self._pools: dict[str, _Pool] = {}
        self._memo: dict[str, str] = {}
        self._use_ner = False  # are there surrogates (not only placeholders) to find?
        self._merge_gaps: frozenset[str] = frozenset()
        self._context_labels: frozenset[str] = frozenset()  # NER labels that may be surrogates
        self._labels: frozenset[str] = frozenset()  # NER labels whose spans are replaced
        self._exact: frozenset[str] = frozenset()
        self._vocab_reject: frozenset[str] = frozenset()
        self._ctx: dict[tuple[str, tuple[str, ...]], int] = {}
        self._vectorizer: Any = None
        self._vectorizer_matrix: Any = None
        self._aux_estimate: dict[str, dict[str, float]] = {}

    def applicable(self, release: Release, knowledge: Knowledge) -> str | None:
        reason = super().applicable(release, knowledge)
        if reason is not None:
            return reason
        defense = release.meta.get("defense")
        if defense != "has":
            return (
                "has-deanonymization inverts Hide-and-Seek anonymization (meta['defense'] == "
                f"'has'); this release comes from {defense!r}, which hides no entities by "
                "placeholders or surrogates"
            )
        if self.white_box is True and not knowledge.white_box:
            return "has-deanonymization with white_box=True needs the hide model's internals"
        return None

    # ---------------------------------------------------------------------------------------
    # Fitting: query the hide mechanism on aux, diff, index
    # ---------------------------------------------------------------------------------------

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        # Deterministic: nothing here draws from rng (the hide mechanism draws its own).
        if knowledge.query_mechanism is None:
            raise ValueError(
                f"{self.name} needs query access to the hide mechanism (Knowledge."
                "query_mechanism) to anonymize its aux texts at the victims' level."
            )
        if knowledge.aux is None:
            raise ValueError(f"{self.name} needs the attacker's aux split (Knowledge.aux).")
        if self.white_box and not knowledge.white_box:
            raise ValueError(
                f"{self.name} with white_box=True needs white-box knowledge of the hide model."
            )
        aux = knowledge.aux
        if "text" not in aux.column_names:
            raise ValueError("The aux split needs a 'text' column.")
        if self.max_aux is not None and len(aux) > self.max_aux:
            aux = aux.select(range(int(self.max_aux)))
        originals = [str(t) for t in aux["text"]]
        if not any(t.strip() for t in originals):
            raise ValueError(f"{self.name}: the aux split has no text to learn from.")
        release = knowledge.query(originals)
        if release.kind != "text" or release.texts is None:
            raise ValueError(f"{self.name} needs a text mechanism, got a {release.kind!r} release.")
        meta = release.meta
        if meta.get("defense") != "has":
            raise ValueError(
                f"{self.name} inverts Hide-and-Seek; the queried mechanism is "
                f"{meta.get('defense')!r}."
            )
        anonymized = check_texts(release.texts, self.name)
        self._mode = meta.get("mode")
        self._learn(originals, anonymized, meta)
        self._fitted = True
        return self

    def _learn(self, originals: list[str], anonymized: list[str], meta: dict[str, Any]) -> None:
        """Learn from the aux pairs: which spans to read (placeholders, NER spans), what each
        replacement stood for (the pools and the memo), and per surrogate label whether
        replacing it beats keeping it."""
        k = int(self.context_words)
        aligners = [Aligner(o, a) for o, a in zip(originals, anonymized, strict=True)]
        ner = self._aux_ner(aligners, anonymized, meta)
        records = self._candidate_spans(aligners, ner)
        # Contexts: each document tokenized with its spans (placeholders + surrogate labels).
        doc_spans = [
            find_spans(al.anonymized, spans, self._context_labels)
            for al, spans in zip(aligners, ner, strict=True)
        ]
        contexts = [
            span_contexts(al.anonymized, spans, k)
            for al, spans in zip(aligners, doc_spans, strict=True)
        ]
        self._fit_docs([c[2] for c in contexts])
        detections = self._learn_pools(records, doc_spans, contexts)
        self._choose_labels(detections)

    def _aux_ner(
        self, aligners: list[Aligner], anonymized: list[str], meta: dict[str, Any]
    ) -> list[list[Ner]]:
        """The NER spans of the anonymized aux (none when its replacements are nearly all
        placeholders), merged where NER split one replacement, and with the white box the
        hide model's vocabulary spans."""
        placeholders = surrogates = 0
        for al in aligners:
            for s, e in al.changed_regions():
                if PLACEHOLDER.fullmatch(al.anonymized[s:e].strip()):
                    placeholders += 1
                else:
                    surrogates += 1
        self._use_ner = surrogates > _SURROGATE_SHARE * max(1, placeholders + surrogates)
        ner = (
            spacy_entities(anonymized, self.spacy_model)
            if self._use_ner
            else [[] for _ in anonymized]
        )
        # Surrogates NER splits in two ("Miller, Gill and Meyer", "Antigua and Barbuda"): learn
        # which short gaps between two NER spans sit inside one replacement, then merge them.
        self._merge_gaps = learn_merges(aligners, ner)
        ner = [
            merge_spans(al.anonymized, s, self._merge_gaps)
            for al, s in zip(aligners, ner, strict=True)
        ]
        self._exact = frozenset()  # white box: the hide model's own types, always replaced
        self._vocab_reject = frozenset()
        if self.white_box and self._use_ner and meta.get("entity_types"):
            self._exact = frozenset(str(t) for t in meta["entity_types"])
            # Surrogates the NER misses but the hide model's vocabularies name (its relative
            # dates, faker city and company formats); families that in aux mostly match
            # verbatim originals are dropped.
            hits: Counter[str] = Counter()
            changed: Counter[str] = Counter()
            for al, spans in zip(aligners, ner, strict=True):
                for st, en, _t, family in vocabulary_spans(al.anonymized, spans, self._exact):
                    hits[family] += 1
                    changed[family] += int(al.original_of(st, en)[1])
            self._vocab_reject = frozenset(
                f for f, n in hits.items() if n >= 2 and changed[f] / n < 0.5
            )
            ner = [
                self._with_vocabulary(al.anonymized, spans)
                for al, spans in zip(aligners, ner, strict=True)
            ]
        return ner

    def _candidate_spans(self, aligners: list[Aligner], ner: list[list[Ner]]) -> list[_Record]:
        """Every candidate span of the anonymized aux: placeholders and (if used) NER spans,
        as (doc, span, original string, changed?); sets the labels whose contexts are read
        (those some aux replacement changed, and the white box's exact types)."""
        records: list[_Record] = []
        changed_label: Counter[str] = Counter()
        for d, (al, spans) in enumerate(zip(aligners, ner, strict=True)):
            for sp in find_spans(al.anonymized, spans, None):
                original, changed = al.original_of(sp.start, sp.end)
                if not original.strip():
                    continue
                records.append((d, sp, original, changed or sp.placeholder))
                if not sp.placeholder:
                    changed_label[sp.type] += int(changed)
        learned = {t for t, n in changed_label.items() if n > 0}
        self._context_labels = frozenset(learned | self._exact)
        return records

    def _learn_pools(
        self,
        records: list[_Record],
        doc_spans: list[list[ReplacedSpan]],
        contexts: list[_Contexts],
    ) -> list[_Detection]:
        """The pools (per type: the originals behind changed spans, with their contexts) and
        the memo (a replacement string consistently standing for one original); returns the
        surrogate candidates with their contexts, for the replace-or-keep test."""
        memo: dict[str, Counter[str]] = {}
        memo_docs: dict[str, set[int]] = {}
        self._pools = {}
        self._ctx = {}
        detections: list[_Detection] = []  # surrogate candidates, for the replace-or-keep test
        for d, sp, original, changed in records:
            where = index_of(doc_spans[d], sp)
            if where is None:  # not a context label, or overlapped by a longer span
                continue
            left, right = contexts[d][0][where], contexts[d][1][where]
            if not sp.placeholder:
                detections.append((d, sp, original, left, right))
            if not changed:
                continue
            pool = self._pools.setdefault(sp.type, _Pool())
            pool.originals.append(original)
            pool.released.append(sp.released)
            pool.docs.append(d)
            pool.left.append(left)
            pool.right.append(right)
            memo.setdefault(sp.released, Counter())[original] += 1
            memo_docs.setdefault(sp.released, set()).add(d)
        for pool in self._pools.values():
            self._freeze(pool, self._vectorizer_matrix)
        self._memo = {}
        for released, counts in memo.items():
            if PLACEHOLDER.fullmatch(released):
                continue
            original, n = counts.most_common(1)[0]
            total = sum(counts.values())
            n_docs = len(memo_docs[released])
            if n_docs >= int(self.min_consistent) and n / total >= _MIN_PURITY:
                self._memo[released] = original
        return detections

    def _choose_labels(self, detections: list[_Detection]) -> None:
        """Per surrogate label: does replacing beat keeping? Measured leave one aux doc out,
        over every NER span of that label (verbatim originals included, where keeping
        wins)."""
        gains: dict[str, list[tuple[float, float]]] = {}
        for d, sp, original, left, right in detections:
            guess = self._guess(sp.type, [(left, right, d)], exclude_doc=d)
            keep = ratio(sp.released, original)
            new = ratio(guess, original) if guess is not None else keep
            gains.setdefault(sp.type, []).append((new, keep))
        self._aux_estimate = {}
        replace = set(self._exact)
        for label, pairs in sorted(gains.items()):
            new, keep = np.mean(pairs, axis=0)
            self._aux_estimate[label] = {"guess": float(new), "keep": float(keep), "n": len(pairs)}
            if new > keep:
                replace.add(label)
        self._labels = frozenset(replace & self._context_labels)

    def _with_vocabulary(self, text: str, spans: list[Ner]) -> list[Ner]:
        extra = [
            (st, en, t)
            for st, en, t, family in vocabulary_spans(text, spans, self._exact)
            if family not in self._vocab_reject
        ]
        return sorted([*spans, *extra]) if extra else spans

    def _fit_docs(self, docs: list[str]) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer

        self._vectorizer = TfidfVectorizer(
            token_pattern=r"\S+", lowercase=False, sublinear_tf=True, min_df=1
        )
        if any(d.strip() for d in docs):
            self._vectorizer_matrix = self._vectorizer.fit_transform(docs).tocsr()
        else:
            self._vectorizer = None
            self._vectorizer_matrix = None

    def _doc_vectors(self, docs: list[str]) -> Any:
        if self._vectorizer is None or not docs:
            return None
        return self._vectorizer.transform(docs).tocsr()

    def _freeze(self, pool: _Pool, doc_matrix: Any) -> None:
        k = int(self.context_words)
        n = len(pool.originals)
        pool.left_ids = np.full((n, k), -1, dtype=np.int64)
        pool.right_ids = np.full((n, k), -1, dtype=np.int64)
        for i in range(n):
            for depth in range(1, k + 1):
                if len(pool.left[i]) >= depth:
                    key = ("L", pool.left[i][-depth:])
                    pool.left_ids[i, depth - 1] = self._ctx.setdefault(key, len(self._ctx))
                if len(pool.right[i]) >= depth:
                    key = ("R", pool.right[i][:depth])
                    pool.right_ids[i, depth - 1] = self._ctx.setdefault(key, len(self._ctx))
        pool.doc_array = np.asarray(pool.docs, dtype=np.int64)
        pool.doc_rows = doc_matrix[pool.doc_array] if doc_matrix is not None else None

    # ---------------------------------------------------------------------------------------
    # Guessing
    # ---------------------------------------------------------------------------------------

    def _scores(
        self,
        pool: _Pool,
        occurrences: Sequence[tuple[tuple[str, ...], tuple[str, ...], Any]],
    ) -> np.ndarray:
        """Per aux observation of the pool: summed context match over the occurrences."""
        assert pool.left_ids is not None and pool.right_ids is not None
        total = np.zeros(len(pool.originals), dtype=np.float64)
        for left, right, doc in occurrences:
            s = np.zeros(len(pool.originals), dtype=np.float64)
            for depth in range(1, int(self.context_words) + 1):
                if len(left) >= depth:
                    cid = self._ctx.get(("L", left[-depth:]))
                    if cid is not None:
                        s += pool.left_ids[:, depth - 1] == cid
                if len(right) >= depth:
                    cid = self._ctx.get(("R", right[:depth]))
                    if cid is not None:
                        s += pool.right_ids[:, depth - 1] == cid
            if self.doc_weight and pool.doc_rows is not None and doc is not None:
                row = doc if not isinstance(doc, int | np.integer) else self._vectorizer_matrix[doc]
                s += float(self.doc_weight) * (pool.doc_rows @ row.T).toarray().ravel()
            total += s
        return total

    def _guess(
        self,
        etype: str,
        occurrences: Sequence[tuple[tuple[str, ...], tuple[str, ...], Any]],
        *,
        exclude_doc: int | None = None,
        allowed: Callable[[str], bool] | None = None,
    ) -> str | None:
        """The expected-similarity medoid of the best ``k_neighbours`` aux originals."""
        pool = self._pools.get(etype)
        if pool is None or not pool.originals:
            return None
        scores = self._scores(pool, occurrences) / max(1, len(occurrences))
        order = np.argsort(-scores, kind="stable")
        top: list[int] = []
        ok: dict[str, bool] = {}
        for i in order:
            if exclude_doc is not None and pool.docs[i] == exclude_doc:
                continue
            o = pool.originals[i]
            if allowed is not None:
                if o not in ok:
                    ok[o] = allowed(o)
                if not ok[o]:
                    continue
            top.append(int(i))
            if len(top) == int(self.k_neighbours):
                break
        if not top:
            return None
        weights = np.exp(scores[top] - scores[top[0]])
        mass: dict[str, float] = {}
        for i, w in zip(top, weights, strict=True):
            mass[pool.originals[i]] = mass.get(pool.originals[i], 0.0) + float(w)
        best, best_value = None, -1.0
        for c in mass:  # in order of the best neighbour: ties go to the closer context
            value = sum(w * ratio(c, o) for o, w in mass.items())
            if value > best_value + 1e-12:
                best, best_value = c, value
        return best

    # ---------------------------------------------------------------------------------------
    # Attacking
    # ---------------------------------------------------------------------------------------

    def attack(self, release: Release) -> Predictions:
        if not self._fitted:
            raise ValueError(f"{self.name} is not fitted: call fit(knowledge) before attack().")
        if not isinstance(release, Release):
            raise TypeError(f"{self.name} attacks a Release, got {type(release).__name__}.")
        if release.kind != "text":
            raise ValueError(f"{self.name} reads released text, not a {release.kind!r} release.")
        if release.meta.get("defense") != "has":
            raise ValueError(
                f"{self.name} inverts Hide-and-Seek releases (meta['defense'] == 'has'); this "
                f"release comes from {release.meta.get('defense')!r}."
            )
        mode = release.meta.get("mode")
        if self._mode is not None and mode is not None and mode != self._mode:
            raise ValueError(
                f"{self.name} was fitted on a HaS mode={self._mode!r} aux release but the "
                f"victims' release is mode={mode!r}: query the mechanism the victims used."
            )
        texts = check_texts(release.texts, self.name)
        t0 = time.perf_counter()
        ner = (
            spacy_entities(texts, self.spacy_model)
            if self._use_ner and self._context_labels
            else [[] for _ in texts]
        )
        ner = [merge_spans(t, s, self._merge_gaps) for t, s in zip(texts, ner, strict=True)]
        if self._exact:
            ner = [self._with_vocabulary(t, s) for t, s in zip(texts, ner, strict=True)]
        k = int(self.context_words)
        recovered: list[str] = []
        n_replaced = 0
        spans_all = [
            find_spans(t, s, self._context_labels) for t, s in zip(texts, ner, strict=True)
        ]
        if self.white_box:
            spans_all = [
                propagate_spans(t, s, self._labels) for t, s in zip(texts, spans_all, strict=True)
            ]
        contexts = [span_contexts(t, s, k) for t, s in zip(texts, spans_all, strict=True)]
        docs = self._doc_vectors([c[2] for c in contexts])
        for d, (text, spans) in enumerate(zip(texts, spans_all, strict=True)):
            left, right, _ = contexts[d]
            doc = docs[d] if docs is not None else None
            guesses = (
                self._guess_white(text, spans, left, right, doc)
                if self.white_box
                else self._guess_black(spans, left, right, doc)
            )
            pieces, pos = [], 0
            for sp, guess in zip(spans, guesses, strict=True):
                pieces += [text[pos : sp.start], guess if guess is not None else sp.released]
                pos = sp.end
                n_replaced += int(guess is not None)
            pieces.append(text[pos:])
            recovered.append("".join(pieces))
        settings = {
            "white_box": self.white_box,
            "context_words": k,
            "k_neighbours": int(self.k_neighbours),
            "doc_weight": float(self.doc_weight),
        }
        return Predictions(
            "texts",
            texts=recovered,
            meta={
                "settings": settings,
                "n_replaced": n_replaced,
                "seconds": time.perf_counter() - t0,
            },
        )

    def _guess_black(
        self, spans: list[ReplacedSpan], left: list, right: list, doc: Any
    ) -> list[str | None]:
        out: list[str | None] = []
        for i, sp in enumerate(spans):
            if sp.released in self._memo:
                out.append(self._memo[sp.released])
                continue
            if not sp.placeholder and sp.type not in self._labels:
                out.append(None)
                continue
            out.append(self._guess(sp.type, [(left[i], right[i], doc)]))
        return out

    def _guess_white(
        self, text: str, spans: list[ReplacedSpan], left: list, right: list, doc: Any
    ) -> list[str | None]:
        groups: dict[str, list[int]] = {}
        for i, sp in enumerate(spans):
            if sp.placeholder or sp.type in self._labels:
                groups.setdefault(sp.released, []).append(i)
        # The released text with every replacement blanked: what is left is verbatim original.
        outside = blank_out(text, [spans[i] for idx in groups.values() for i in idx])
        used: set[str] = set()
        chosen: dict[str, str | None] = {}
        for released, idx in groups.items():  # in order of first appearance
            sp = spans[idx[0]]
            memo = self._memo.get(released)
            if memo is not None and memo.casefold() not in used:
                chosen[released] = memo
                used.add(memo.casefold())
                continue
            allowed = white_filter(sp, outside, used)
            occurrences = [(left[i], right[i], doc) for i in idx]
            guess = self._guess(sp.type, occurrences, allowed=allowed)
            if guess is None and not sp.placeholder:
                guess = self._guess(sp.type, occurrences, allowed=not_used(sp, used))
            chosen[released] = guess
            if guess is not None:
                used.add(guess.casefold())
        return [chosen.get(sp.released) if sp.released in groups else None for sp in spans]
