"""``synthetic-reviews``: a seeded, offline corpus of customer reviews that leak their authors.

This module holds the generative model (its rates below), the writer that fills the templates
and the entry point :func:`synthetic_reviews`. The phrase tables are data beside it:
:mod:`privaudit.corpora.synthetic_phrases` (word lists, sentence templates, the ten categories)
and :mod:`privaudit.corpora.synthetic_cues` (the attribute cues); the authors' habits under
``persona`` are :mod:`privaudit.corpora.synthetic_personas`.

Generative model
----------------
Authors. Each author gets a gender (``F``/``M``, 50/50) and a birth-year bin (the TP-UK bins
``<=1955 … >=1986``, weights :data:`AGE_WEIGHTS`) and writes 1–4 reviews. Authors, not documents,
are split into ``train``/``test``/``aux`` (greedy by document count within each (gender, age bin)
stratum, so split sizes track ``split_fractions`` closely); the attacker's ``aux`` split therefore
shares no author with the victims.

Documents. A review has 2–5 sentences about one of ten categories (restaurant, hotel, phone, book,
shoes, clothing, laptop, furniture, garage, hairdresser): an optional opening that sets the scene
(where most named entities live), one or more opinion sentences, an optional closing verdict.
The label (0 = negative, 1 = positive, 50/50 per document) is expressed only through opinion
phrases. To keep a bag-of-words classifier from being perfect, opinion sentences after the first
argue the other side with probability :data:`P_CONTRAST` ("To be fair, the food was lovely"),
the first opinion is lukewarm with probability :data:`P_HEDGED`, and closings are sometimes hedged.

Entities. Openings, staff remarks and fillers carry PERSON (faker names: staff, book authors),
GPE (UK cities, faker towns and countries), ORG (venue, brand, retailer and company names) and
DATE ("last Tuesday", "March 2019", "14 June 2017") spans, recorded with exact offsets.

Leakage. Each document is *leaky* with probability ``leak_rate`` (default 0.6); nothing else in a
document depends on its author's attributes, so ``leak_rate=0`` leaves them unpredictable. A leaky
document first draws the *apparent* attributes it will betray: the true gender, flipped with
probability :data:`P_GENDER_FLIP` (men do write "my husband"), and the true age bin with
probability :data:`P_AGE_EXACT`, a neighbouring bin with probability :data:`P_AGE_NEIGHBOUR`, any
bin otherwise. It then always carries a gender cue and, with probability :data:`P_AGE_CUE`, an age
cue, realised as

- kin terms and self-description ("my husband", "as a dad of two", "the lads from work");
- in the gendered categories (shoes, clothing, hairdresser), also a gendered product ("heels",
  "a beard trim") with probability :data:`P_PRODUCT`;
- life stage ("since I retired", "my first flat", "between school runs", "my grandchildren");
- age-typical style for the oldest and youngest groups (intensifiers "lowkey"/"literally" vs
  "rather"/"most", "one must say", "not the vibe"), with probability :data:`P_STYLE`;
- instead of the plain kin cue, with probability :data:`P_COMBINED`, a cue for both attributes
  at once ("as a grandmother of five") that only reveals a coarse age group.

Cues appear as their own sentence or as a prefix to an opinion ("As a mum of two, I found …");
a review too short for all its cues drops style first. So a leaky review betrays the true gender
with probability 0.97 and names the exact age bin about 0.8 of the time, which caps a perfect
attacker near 0.6·0.97 + 0.4·0.5 ≈ 0.78 for gender. On default settings a TF-IDF +
logistic-regression attacker trained on ``aux`` (600 reviews) reaches about 0.71–0.77 gender
accuracy (majority ≈ 0.51) and about 0.44–0.47 age-bin accuracy (majority ≈ 0.2) across seeds;
with ``leak_rate=0`` both sit at their majority baselines, with ``leak_rate=1`` they reach about
0.96 and 0.73. Splits are stratified by (gender, age bin), so the baselines match across splits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from annotated_types import Ge

from privaudit.corpora.base import Corpus
from privaudit.corpora.splits import (
    assign_splits,
    check_fractions,
    corpus_features,
    hold_out_background,
)
from privaudit.corpora.synthetic_cues import (
    AGE_CUES,
    COMBINED_CUES,
    GENDER_CUES,
    STYLE_CUES,
    STYLE_INTENSIFIERS,
    STYLE_PREFIXES,
)
from privaudit.corpora.synthetic_personas import add_personas
from privaudit.corpora.synthetic_phrases import (
    BRANDS,
    CATEGORIES,
    CLOSINGS,
    CONTRAST,
    ENTITY_OPINIONS,
    FILLERS,
    GENERIC_NEG,
    GENERIC_POS,
    HEDGED,
    HEDGED_CLOSINGS,
    HOLIDAYS,
    INTENSIFIERS,
    LUKEWARM,
    MODELS,
    NAME_ADJ,
    NAME_NOUN,
    OPINION,
    OPINION_ANY,
    RELATIVE_DATES,
    STAFF,
    STAFF_NEG,
    STAFF_POS,
    TITLE_ADJ,
    TITLE_NOUN,
    UK_CITIES,
    WE,
    Category,
)
from privaudit.models.entities import MONTHS, WEEKDAYS
from privaudit.params import Fraction, NonNegativeInt, Probability, checked

if TYPE_CHECKING:
    import datasets
    from faker import Faker

GENERATOR = "privaudit synthetic-reviews v1"
LABEL_NAMES = ["negative", "positive"]
ATTRIBUTE_NAMES = ["gender", "age_bin"]
GENDERS = ("F", "M")
AGE_BINS = ("<=1955", "1956-1963", "1964-1971", "1972-1978", "1979-1985", ">=1986")
AGE_WEIGHTS = (0.15, 0.17, 0.18, 0.18, 0.16, 0.16)
# Coarse life stage for cues that cannot name a bin (combined cues, style).
AGE_GROUP = {
    "<=1955": "old",
    "1956-1963": "old",
    "1964-1971": "mid",
    "1972-1978": "mid",
    "1979-1985": "young",
    ">=1986": "young",
}

# Rates of the generative model (see the module docstring).
P_AGE_CUE = 0.95
P_GENDER_FLIP = 0.03
P_AGE_EXACT = 0.82
P_AGE_NEIGHBOUR = 0.13
P_COMBINED = 0.25
P_PRODUCT = 0.35
P_STYLE = 0.35
P_PREFIX = 0.35
P_CONTRAST = 0.3
P_HEDGED = 0.07
P_HEDGED_CLOSING = 0.15
P_STAFF = 0.3
P_FILLER = 0.3
P_ENTITY_OPINION = 0.6

Piece = tuple[str, str | None]  # (text, entity type or None)


# --------------------------------------------------------------------------------------------
# Document writer
# --------------------------------------------------------------------------------------------

_SLOT = re.compile(r"\{(\w+)\}")
_DATE_LO, _DATE_HI = date(2012, 1, 1), date(2021, 12, 31)  # fixed: "today" would break seeding


@dataclass
class _Cue:
    sentences: tuple[str, ...]
    prefixes: tuple[str, ...]


@dataclass
class _Doc:
    text: str
    label: int
    entities: list[dict[str, Any]]


class _Writer:
    """Renders one review at a time from the templates; all randomness comes from rng and fake."""

    def __init__(self, rng: np.random.Generator, fake: Faker) -> None:
        self.rng = rng
        self.fake = fake
        # Per-document state, reset by write().
        self.cat: Category = CATEGORIES[0]
        self.item = ""
        self.polarity = 1
        self.plural = False
        self.used_aspects: set[str] = set()
        self.intens: tuple[str, ...] = INTENSIFIERS

    def pick(self, options: Sequence[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    # ---- entities: each returns (prefix outside the span, span text)
    def _clean(self, make: Any, fallback: Sequence[str]) -> str:
        # Faker can yield "St. Kitts" or "Virgin Islands, U.S."; dots would split sentences.
        for _ in range(5):
            value = str(make())
            if not re.search(r"[.()!?,]", value):
                return value
        return self.pick(fallback)

    def person(self) -> str:
        if self.rng.random() < 0.3:
            return self.fake.first_name()
        return f"{self.fake.first_name()} {self.fake.last_name()}"

    def gpe(self, abroad: bool = False) -> str:
        """A town (real UK or faker-made), or with ``abroad`` sometimes a country."""
        u = self.rng.random()
        if abroad and u < 0.5:
            return self._clean(self.fake.country, UK_CITIES)
        if u < 0.7:
            return self.pick(UK_CITIES)
        return self._clean(self.fake.city, UK_CITIES)

    def date(self) -> tuple[str, str]:
        u = self.rng.random()
        if u < 0.2:
            return "", f"last {self.pick(WEEKDAYS)}"
        if u < 0.4:
            return "", self.pick(RELATIVE_DATES)
        if u < 0.5:
            return "over ", self.pick(HOLIDAYS)
        if u < 0.75:
            return "in ", f"{self.pick(MONTHS)} {int(self.rng.integers(2012, 2022))}"
        d = self.fake.date_between(start_date=_DATE_LO, end_date=_DATE_HI)
        return "on ", f"{d.day} {MONTHS[d.month - 1]} {d.year}"

    def org(self) -> tuple[str, str]:
        kind, u = self.cat.org, self.rng.random()
        last = self._clean(self.fake.last_name, ("Smith",))
        if kind == "restaurant":
            if u < 0.5:
                return "", f"The {self.pick(NAME_ADJ)} {self.pick(NAME_NOUN)}"
            if u < 0.8:
                return "", f"{last}'s"
            return "", self._clean(self.fake.company, ("Smith Ltd",))
        if kind == "hotel":
            if u < 0.5:
                return "the ", f"{self.pick(NAME_ADJ)} {self.pick(NAME_NOUN)} Hotel"
            if u < 0.8:
                return "", f"{last} House"
            return "the ", f"{self.pick(UK_CITIES)} Grand"
        if kind == "garage":
            return "", (f"{last} Motors" if u < 0.5 else f"{last}'s Garage")
        if kind == "salon":
            if u < 0.5:
                return "", f"{self.fake.first_name()}'s Hair Studio"
            return "", f"{self.pick(NAME_ADJ)} Scissors"
        if u < 0.6:
            return "", self._clean(self.fake.company, ("Smith Ltd",))
        return "", f"{self.pick(NAME_NOUN)} Direct"

    # ---- template rendering
    def slot(self, name: str) -> list[Piece]:
        if name == "we":
            return [(self.pick(WE), None)]
        if name == "org":
            prefix, text = self.org()
            return [(prefix, None), (text, "ORG")]
        if name == "brand":
            return [(self.pick(BRANDS), "ORG")]
        if name == "model":
            return [(f"{self.pick(MODELS)} {int(self.rng.integers(2, 15))}", None)]
        if name in ("gpe", "place"):  # "place" may be abroad (trips, holidays)
            return [(self.gpe(abroad=name == "place"), "GPE")]
        if name == "date":
            prefix, text = self.date()
            return [(prefix, None), (text, "DATE")]
        if name == "person":
            return [(self.person(), "PERSON")]
        if name == "title":
            return [(f"The {self.pick(TITLE_ADJ)} {self.pick(TITLE_NOUN)}", None)]
        if name == "item":
            return [(self.item, None)]
        if name == "aspect":
            return [(self.aspect(), None)]
        if name == "be":
            return [("were" if self.plural else "was", None)]
        if name == "it":
            return [("they" if self.plural else "it", None)]
        if name in ("adj", "oadj"):
            pol = self.polarity if name == "adj" else 1 - self.polarity
            return [(self.adjective(pol), None)]
        if name == "luke":
            return [(self.pick(LUKEWARM), None)]
        if name == "intens":
            return [("" if self.rng.random() < 0.35 else self.pick(self.intens), None)]
        if name == "role":
            return [(self.pick(self.cat.roles), None)]
        if name == "staff":
            return [(self.pick(STAFF_POS if self.polarity else STAFF_NEG), None)]
        raise KeyError(f"unknown template slot {name!r}")

    def aspect(self) -> str:
        n_sg, n_pl = len(self.cat.aspects_sg), len(self.cat.aspects_pl)
        for _ in range(4):  # avoid repeating an aspect within a review
            i = int(self.rng.integers(n_sg + n_pl))
            name = self.cat.aspects_sg[i] if i < n_sg else self.cat.aspects_pl[i - n_sg]
            if name not in self.used_aspects:
                break
        self.used_aspects.add(name)
        self.plural = i >= n_sg
        return name

    def adjective(self, polarity: int) -> str:
        generic, specific = (GENERIC_POS, self.cat.pos) if polarity else (GENERIC_NEG, self.cat.neg)
        return self.pick(specific if self.rng.random() < 0.4 else generic)

    def render(self, template: str, polarity: int, prefix: str = "") -> list[Piece]:
        self.polarity = polarity
        pieces: list[Piece] = [(prefix, None)] if prefix else []
        pos = 0
        for m in _SLOT.finditer(template):
            pieces.append((template[pos : m.start()], None))
            pieces.extend(self.slot(m.group(1)))
            pos = m.end()
        pieces.append((template[pos:], None))
        pieces = [p for p in pieces if p[0]]
        # Sentence-initial capital ("last Tuesday" → "Last Tuesday"), applied before spans exist.
        first, etype = pieces[0]
        pieces[0] = (first[0].upper() + first[1:], etype)
        return pieces

    # ---- cues
    def cues(self, gender: str, age_bin: str, label: int) -> tuple[list[_Cue], bool]:
        """The cues of a leaky document, and whether it also names a gendered product."""
        rng = self.rng
        g = gender if rng.random() >= P_GENDER_FLIP else GENDERS[1 - GENDERS.index(gender)]
        a = _noisy_bin(rng, age_bin)
        group = AGE_GROUP[a]
        cues: list[_Cue] = []
        product = False
        if self.cat.items_by_gender and rng.random() < P_PRODUCT:
            product = True  # a gendered product, on top of the kin cue below
            self.item = self.pick(self.cat.items_by_gender[g])
        if rng.random() < P_COMBINED:
            cues.append(_Cue(*COMBINED_CUES[(g, group)]))
        else:
            cues.append(_Cue(*GENDER_CUES[g]))
        if rng.random() < P_AGE_CUE:
            cues.append(_Cue(*AGE_CUES[a]))
        if group != "mid" and rng.random() < P_STYLE:
            # Style colours the whole review: its intensifiers and a remark in its polarity.
            self.intens = STYLE_INTENSIFIERS[group] + INTENSIFIERS[:3]
            # Cues are ordered gender, age, style: a short review with no room drops the last.
            cues.append(_Cue(STYLE_CUES[group][label], STYLE_PREFIXES[group]))
        return cues, product

    def write(self, gender: str, age_bin: str, leaky: bool) -> _Doc:
        rng = self.rng
        self.cat = CATEGORIES[int(rng.integers(len(CATEGORIES)))]
        self.item = self.pick(self.cat.items) if self.cat.items else ""
        self.used_aspects = set()
        self.intens = INTENSIFIERS
        label = int(rng.random() < 0.5)
        n_sent = int(rng.integers(2, 6))

        cues, product = self.cues(gender, age_bin, label) if leaky else ([], False)
        standalone: list[str] = []
        prefixes: list[str] = []
        budget = n_sent - 1  # keep at least one sentence for the opinion
        for cue in cues:
            if budget > 0 and rng.random() >= P_PREFIX:
                standalone.append(self.pick(cue.sentences))
                budget -= 1
            else:
                prefixes.append(self.pick(cue.prefixes))
        prefixes = prefixes[: n_sent - len(standalone)]  # each prefix needs an opinion of its own

        # Layout of the non-cue sentences: [opening] opinions... [closing]
        k = n_sent - len(standalone)
        has_open = k >= 2 and (product or rng.random() < 0.9)
        has_close = k - has_open >= 2 and rng.random() < 0.75
        # Every prefix needs an opinion to lead (k ≥ len(prefixes) after the trim above).
        if k - has_open - has_close < len(prefixes):
            has_close = False
        if k - has_open - has_close < len(prefixes):
            has_open = False
        m = k - int(has_open) - int(has_close)

        sentences: list[list[Piece]] = []
        if has_open:
            sentences.append(self.render(self.pick(self.cat.openings), label))
        hedged = rng.random() < P_HEDGED
        staff_done = False
        prefix_slots = set(rng.permutation(m)[: len(prefixes)].tolist())
        opinions: list[list[Piece]] = []
        for i in range(m):
            prefix = prefixes.pop() if i in prefix_slots else ""
            contrast = i > 0 and rng.random() < P_CONTRAST
            pol = 1 - label if contrast else label
            if not prefix and i > 0 and not staff_done and rng.random() < P_STAFF:
                staff_done = True
                opinions.append(self.render(self.pick(STAFF[pol]), pol))
                continue
            if not prefix and i > 0 and m >= 2 and rng.random() < P_FILLER:
                opinions.append(self.render(self.pick(FILLERS[self.cat.service]), label))
                continue
            if i == 0 and hedged:
                bank: Sequence[str] = HEDGED
            elif i == 0 and not has_open and rng.random() < P_ENTITY_OPINION:
                bank = ENTITY_OPINIONS[self.cat.service]
            elif contrast:
                bank = CONTRAST[label]
            else:
                bank = OPINION_ANY + OPINION[label]
            if prefix:  # "As a dad, I found …" needs an opinion that starts with "I "
                bank = [t for t in bank if t.startswith("I ")] or [
                    t for t in OPINION_ANY + OPINION[label] if t.startswith("I ")
                ]
            opinions.append(self.render(self.pick(bank), label, prefix=prefix))
        sentences.extend(opinions)
        # Stand-alone cues go anywhere after the opening.
        for cue_text in standalone:
            at = int(rng.integers(1 if has_open else 0, len(sentences) + 1))
            sentences.insert(at, [(cue_text, None)])
        if has_close:
            hedge_close = rng.random() < P_HEDGED_CLOSING
            closing = self.pick((HEDGED_CLOSINGS if hedge_close else CLOSINGS)[label])
            sentences.append([(closing, None)])
        return _assemble(sentences, label)


def _assemble(sentences: list[list[Piece]], label: int) -> _Doc:
    parts: list[str] = []
    entities: list[dict[str, Any]] = []
    offset = 0
    for s_idx, pieces in enumerate(sentences):
        if s_idx:
            parts.append(" ")
            offset += 1
        for text, etype in pieces:
            if etype is not None:
                entities.append(
                    {"start": offset, "end": offset + len(text), "type": etype, "text": text}
                )
            parts.append(text)
            offset += len(text)
    return _Doc("".join(parts), label, entities)


def _noisy_bin(rng: np.random.Generator, age_bin: str) -> str:
    """The age bin a cue betrays: mostly the true one, sometimes a neighbour or any bin."""
    i = AGE_BINS.index(age_bin)
    u = rng.random()
    if u < P_AGE_EXACT:
        return age_bin
    if u < P_AGE_EXACT + P_AGE_NEIGHBOUR:
        neighbours = [j for j in (i - 1, i + 1) if 0 <= j < len(AGE_BINS)]
        return AGE_BINS[neighbours[int(rng.integers(len(neighbours)))]]
    return AGE_BINS[int(rng.integers(len(AGE_BINS)))]


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


@checked
def synthetic_reviews(
    n_docs: Annotated[int, Ge(10)] = 3000,  # so that train, test and aux all get documents
    *,
    seed: NonNegativeInt = 0,
    leak_rate: Probability = 0.6,  # the share of reviews with an attribute cue
    split_fractions: Sequence[float] = (0.6, 0.2, 0.2),
    persona: Probability = 0.0,
    background_share: Fraction = 0.0,
) -> Corpus:
    """Generate the ``synthetic-reviews`` corpus (see the module docstring for the model).

    Same arguments → byte-identical texts; nothing is cached on disk and nothing is downloaded.

    For re-identification (both off by default, leaving the corpus as it was): ``persona``
    gives each author a habit, a pet phrase and a sign-off
    (:mod:`privaudit.corpora.synthetic_personas`), each appended to a review with that
    probability, so reviews betray *who* wrote them; ``background_share`` holds out that share
    of each test author's reviews into a ``background`` split (at least one, one left as a
    victim; an author with a single review cannot be a candidate). Both draw from their own
    stream, after the rest.
    """
    fractions = check_fractions(split_fractions, "split_fractions")
    from faker import Faker

    n_docs, seed, leak_rate = int(n_docs), int(seed), float(leak_rate)
    rng = np.random.default_rng(seed)
    fake = Faker("en_GB")
    fake.seed_instance(seed)  # instance-level: never touch Faker's global random state
    counts, genders, ages = _draw_authors(n_docs, rng)
    rows = _write_reviews(counts, genders, ages, leak_rate, _Writer(rng, fake), rng)

    # Stratify by (gender, age bin) so every split mirrors the population's attribute mix.
    strata = [f"{g}|{a}" for g, a in zip(genders, ages, strict=True)]
    split_of_author = assign_splits(counts, fractions, rng, strata=strata)
    doc_author = np.repeat(np.arange(len(counts)), counts)
    split_of = split_of_author[doc_author]
    info: dict[str, Any] = {
        "seed": seed,
        "n_docs": n_docs,
        "leak_rate": leak_rate,
        "generator": GENERATOR,
    }
    if persona or background_share:  # their own stream: the default corpus is untouched
        extra = np.random.default_rng([seed, 36])
        if persona:
            add_personas(rows, len(counts), float(persona), extra)
            info["persona"] = float(persona)
        if background_share:
            split_of = hold_out_background(rows, split_of, float(background_share), seed, info)
    return Corpus(
        name="synthetic-reviews",
        splits=_datasets(rows, split_of, rng),
        label_names=list(LABEL_NAMES),
        attribute_names=list(ATTRIBUTE_NAMES),
        info=info,
        unit="person",  # each author writes 1-4 reviews with their own attributes
    )


def _draw_authors(
    n_docs: int, rng: np.random.Generator
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Each author's review count (1–4, summing to ``n_docs``), gender and age bin."""
    # The last author's count is trimmed to hit n_docs exactly.
    counts: list[int] = []
    while sum(counts) < n_docs:
        counts.append(int(rng.integers(1, 5)))
    counts[-1] -= sum(counts) - n_docs
    genders = rng.choice(GENDERS, size=len(counts))
    ages = rng.choice(AGE_BINS, size=len(counts), p=np.asarray(AGE_WEIGHTS))
    return counts, genders, ages


def _write_reviews(
    counts: list[int],
    genders: np.ndarray,
    ages: np.ndarray,
    leak_rate: float,
    writer: _Writer,
    rng: np.random.Generator,
) -> list[dict[str, Any]]:
    """The corpus rows, author by author: each review leaky with probability ``leak_rate``,
    every text unique."""
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    for a_idx, n in enumerate(counts):
        author = f"author-{a_idx:05d}"
        gender, age_bin = str(genders[a_idx]), str(ages[a_idx])
        for _ in range(n):
            leaky = bool(rng.random() < leak_rate)
            for _attempt in range(20):  # duplicates are rare; redraw to keep every text unique
                doc = writer.write(gender, age_bin, leaky)
                if doc.text not in seen:
                    break
            seen.add(doc.text)
            rows.append(
                {
                    "text": doc.text,
                    "label": doc.label,
                    "attributes": {"gender": gender, "age_bin": age_bin},
                    "entities": doc.entities,
                    "author": author,
                }
            )
    return rows


def _datasets(
    rows: list[dict[str, Any]], split_of: np.ndarray, rng: np.random.Generator
) -> dict[str, datasets.Dataset]:
    """The splits, each in a seeded random order (``background`` only where it has rows)."""
    import datasets

    features = corpus_features(ATTRIBUTE_NAMES)
    splits: dict[str, datasets.Dataset] = {}
    for split in ("train", "test", "aux", "background"):
        idx = np.flatnonzero(split_of == split)
        if split == "background" and not len(idx):
            continue  # only with background_share
        idx = rng.permutation(idx)  # interleave authors within a split
        splits[split] = datasets.Dataset.from_list([rows[i] for i in idx], features=features)
    return splits


# Declared for the attacker's public pre-training (``geia``'s ``public_corpus``): a seeded
# generator, so another seed draws other people's reviews of the same world.
synthetic_reviews.public_by_seed = True  # type: ignore[attr-defined]
