"""``synthpai``: SynthPAI's 7,785 synthetic Reddit-style comments by 300 profiled people.

SynthPAI (Yukhymenko, Staab, Vero, Vechev, "A Synthetic Dataset for Personal Attribute
Inference", NeurIPS 2024 Datasets and Benchmarks; MIT licence) ships with the package, gzipped
and otherwise unchanged, in ``privaudit/data/synthpai/`` (its README names the source commit);
nothing is downloaded. A document is a comment; its ``author`` is its writer's username.

Private attributes (strings, from the writer's ground-truth profile):

- ``gender``: the profile's ``sex``, ``female`` / ``male`` (150 each), named as in the other
  corpora so that ``attribute-inference[gender]`` and CAPE's adversary (``attribute`` gender)
  read it with no setting;
- ``age_bin``: the age (19–75) in :data:`AGE_BINS`, ``<25``, ``25-34``, ``35-44``, ``45-54``,
  ``>=55`` (decades from 25; the ends merged because few people are under 25 or over 64);
- ``income_level``: as given, ``low`` / ``middle`` / ``high`` / ``very high``;
- ``education``: the highest *completed* level in :data:`EDUCATION_LEVELS`, read from the free
  text by :func:`education_level`: ``PhD``/``Ph.D.``/``Doctorate``/``MD`` → ``doctorate``,
  ``Master(s)``/``MBA`` → ``master``, ``Bachelor(s)`` → ``bachelor``, ``High School`` →
  ``high school``; "studying towards" a degree counts the level below it (a Bachelor's student
  has finished high school); "Retired, ..." is read as the degree after it; anything else is
  ``other`` (the profiles' "Diploma in Nursing", "Diploma in Gastronomy" and "Law Degree",
  whose level is ambiguous; a test checks that nothing else falls there);
- ``relationship_status``: as given, with "in relationship" (7 people) written "in a
  relationship" like the other 30;
- ``region``: the UN M49 region of the country in ``city_country`` (:data:`REGION_OF_COUNTRY`:
  ``europe``, ``asia`` (Western Asia included: Turkey, Israel, the UAE, the Caucasus),
  ``africa``, ``oceania``, ``northern america``, ``latin america`` (and the Caribbean)); every
  profile's country is listed (an unknown one is an error, not a guess).

Utility label: the comment's coarse topic (``food``, ``tech``, ``family_relationships``,
``leisure``, ``education``, ``places``, ``work_money``, ``other``), from the keyword lexicon in
:mod:`privaudit.corpora.synthpai_topics` (most hits wins, ties to the earlier topic, no hit →
``other``, or dropped with ``unmatched="drop"``): what a forum would learn to route or
recommend comments, not a property of the writer. It is deterministic and needs no model.

Splits, by person (no one is in two of them): people are dealt to ``train``, ``test``
(victims), ``aux`` (the attacker's own data), ``public`` (other people's text, for an attacker's
public pre-training: never victims, never the service's train data) and *distractors*, with
``splits`` the shares of the comments (whole people dealt greedily within (gender, age bin) strata,
:func:`privaudit.corpora.splits.assign_splits`, so each split mirrors the population). Then
``background`` (for re-identification) takes ``background_share`` of each test person's comments
(at least 1, and at least 1 left as a victim, when a person has 2 or more) plus every
distractor's comments: the victims' held-out other comments among people who are not victims.
A comment is in exactly one split. Defaults ``(0.35, 0.25, 0.15, 0.15, 0.10)`` (seeds 0–2):
test 0.25 leaves ~1,360 victim comments (the quick grid takes 1,000) from 62–77 people; train
0.35 ~2,700 for the service; aux and public ~1,160 each (attacks and pre-training read a few
hundred to a thousand); ``background`` ~1,370 comments, ~590 of them the test people's and the
rest by 42–46 distractors (people with few comments: the deal is by comment count).
"""

from __future__ import annotations

import functools
import gzip
import io
import json
from collections.abc import Sequence
from importlib.resources import files
from typing import TYPE_CHECKING, Literal

import numpy as np

from privaudit.corpora.base import Corpus
from privaudit.corpora.splits import assign_splits, check_fractions, corpus_features
from privaudit.corpora.synthpai_topics import OTHER, TOPIC_WORDS, topic_of
from privaudit.params import NonNegativeInt, OpenFraction, checked

if TYPE_CHECKING:
    import datasets
    import pandas as pd

COMMENTS = "comments_eval_revised.jsonl.gz"
PROFILES = "user_bot_gen_online_profiles_300.json.gz"
SOURCE = (
    "SynthPAI, github.com/eth-sri/SynthPAI at commit ba9edc9c8aa1d398bc43bb619a8d859351df9d9c "
    "(data/thread/comments_eval_revised.jsonl, data/profiles/user_bot_gen_online_profiles_300.json)"
)
LICENCE = "MIT (privaudit/data/synthpai/LICENSE)"
CITATION = (
    'Yukhymenko, Staab, Vero, Vechev, "A Synthetic Dataset for Personal Attribute Inference", '
    "NeurIPS 2024 Datasets and Benchmarks"
)

# People are dealt to these; the distractors' comments go to ``background``.
PEOPLE_SPLITS = ("train", "test", "aux", "public", "distractors")
SPLIT_ORDER = ("train", "test", "aux", "public", "background")
ATTRIBUTE_NAMES = [
    "gender",
    "age_bin",
    "income_level",
    "education",
    "relationship_status",
    "region",
]
AGE_EDGES = (0, 24, 34, 44, 54, 200)  # right-inclusive: 24 → "<25", 25 → "25-34"
AGE_BINS = ("<25", "25-34", "35-44", "45-54", ">=55")
EDUCATION_LEVELS = ("high school", "bachelor", "master", "doctorate", "other")
# Checked in order: the first degree named is the level ("MBA in Finance" → master).
_DEGREES = (
    ("doctorate", r"\bph\.?\s?d\b|\bdoctorate\b|\bmd\b"),
    ("master", r"\bmasters?\b|\bmaster's|\bmba\b"),
    ("bachelor", r"\bbachelors?\b|\bbachelor's"),
    ("high school", r"\bhigh school\b"),
)
_BELOW = {"doctorate": "master", "master": "bachelor", "bachelor": "high school"}

_M49 = {
    "europe": (
        "Austria",
        "Albania",
        "Belgium",
        "Bulgaria",
        "Croatia",
        "Czech Republic",
        "Denmark",
        "Finland",
        "France",
        "Germany",
        "Greece",
        "Hungary",
        "Ireland",
        "Italy",
        "Lithuania",
        "Netherlands",
        "North Macedonia",
        "Norway",
        "Poland",
        "Portugal",
        "Romania",
        "Russia",
        "Serbia",
        "Slovenia",
        "Spain",
        "Sweden",
        "Switzerland",
        "Ukraine",
        "United Kingdom",
    ),
    "asia": (
        "Armenia",
        "Azerbaijan",
        "China",
        "Georgia",
        "India",
        "Israel",
        "Japan",
        "Malaysia",
        "Philippines",
        "Singapore",
        "South Korea",
        "Thailand",
        "Turkey",
        "UAE",
        "United Arab Emirates",
    ),
    "africa": (
        "Egypt",
        "Ghana",
        "Kenya",
        "Morocco",
        "Nigeria",
        "South Africa",
        "Tunisia",
        "Zambia",
    ),
    "oceania": ("Australia", "New Zealand"),
    "northern america": ("Canada", "United States", "USA"),
    "latin america": (
        "Argentina",
        "Bolivia",
        "Brazil",
        "Chile",
        "Colombia",
        "Cuba",
        "Ecuador",
        "El Salvador",
        "Honduras",
        "Jamaica",
        "Mexico",
        "Nicaragua",
        "Panama",
        "Paraguay",
        "Peru",
        "Uruguay",
        "Venezuela",
    ),
}
REGION_OF_COUNTRY = {country: region for region, cs in _M49.items() for country in cs}


def _data(name: str) -> bytes:
    """A shipped file, uncompressed (importlib.resources: works from a wheel or a checkout)."""
    return gzip.decompress((files("privaudit") / "data" / "synthpai" / name).read_bytes())


@functools.cache
def _raw() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(comments: author, text; profiles by username), parsed once per process."""
    import pandas as pd  # lazy: `privaudit list` imports this module, never pandas

    lines = [json.loads(line) for line in _data(COMMENTS).decode("utf-8").splitlines() if line]
    comments = pd.DataFrame(
        [(p["username"], c["text"]) for p in lines for c in p["comments"]],
        columns=["author", "text"],
    )
    profiles = pd.read_json(io.BytesIO(_data(PROFILES)), orient="index").set_index("username")
    return comments, profiles


def education_level(education: pd.Series) -> pd.Series:
    """The highest completed level in :data:`EDUCATION_LEVELS` (the rule in the module
    docstring) of each free-text education."""
    import pandas as pd  # lazy: `privaudit list` imports this module, never pandas

    text = education.astype(str).str.lower()
    level = pd.Series("other", index=education.index, dtype=object)
    for name, pattern in reversed(_DEGREES):  # the earliest (highest) degree is written last
        level = level.mask(text.str.contains(pattern, regex=True), name)
    studying = text.str.contains(r"\bstudying\b", regex=True)
    return level.mask(studying, level.map(_BELOW).fillna(level))


def region_of(city_country: pd.Series) -> pd.Series:
    """The M49 region of each ``"City, Country"``; an unlisted country is a ValueError."""
    country = city_country.astype(str).str.rsplit(",", n=1).str[-1].str.strip()
    region = country.map(REGION_OF_COUNTRY)
    unknown = sorted(set(country[region.isna()]))
    if unknown:
        raise ValueError(
            f"SynthPAI: no region for the countries {unknown}; add them to "
            "privaudit.corpora.synthpai._M49."
        )
    return region


def attributes_of(profiles: pd.DataFrame) -> pd.DataFrame:
    """The private attributes (:data:`ATTRIBUTE_NAMES`, strings) of each profile."""
    import pandas as pd  # lazy: `privaudit list` imports this module, never pandas

    status = profiles["relationship_status"].astype(str).str.strip().str.lower()
    return pd.DataFrame(
        {
            "gender": profiles["sex"].astype(str).str.strip().str.lower(),
            "age_bin": pd.cut(profiles["age"], AGE_EDGES, labels=AGE_BINS).astype(str),
            "income_level": profiles["income_level"].astype(str).str.strip().str.lower(),
            "education": education_level(profiles["education"]),
            "relationship_status": status.replace("in relationship", "in a relationship"),
            "region": region_of(profiles["city_country"]),
        },
        index=profiles.index,
    )


@checked
def synthpai(
    seed: NonNegativeInt = 0,
    *,
    splits: Sequence[float] = (0.35, 0.25, 0.15, 0.15, 0.10),
    background_share: OpenFraction = 0.3,
    unmatched: Literal["other", "drop"] = "other",
) -> Corpus:
    """SynthPAI's 7,785 comments by 300 profiled people, shipped: topic label, six attributes.

    Split by person into train/test/aux/public plus a re-identification ``background`` (see
    the module docstring for the labels, attributes and splits).

    ``splits``: shares of the comments for (train, test, aux, public, distractors), dealt by
    whole person. ``background_share``: the share of each test person's comments held out into
    ``background``. ``unmatched``: a comment no topic word matches is labelled ``other`` or
    dropped. Same arguments → the same corpus.
    """
    fractions = check_fractions(splits, "synthpai splits", PEOPLE_SPLITS)
    seed, share = int(seed), float(background_share)
    rng = np.random.default_rng(seed)
    comments, profiles = _raw()
    missing = sorted(set(comments["author"]) - set(profiles.index))
    if missing:
        raise ValueError(
            f"SynthPAI: comments by {len(missing)} people without a profile ({missing[:3]}); "
            "the shipped files are damaged: reinstall privaudit."
        )
    attrs = attributes_of(profiles)
    docs, label_names = _labelled(comments, unmatched)
    _deal_people(docs, attrs, fractions, rng)
    test = _hold_out_background(docs, share, rng)
    out, sizes = _datasets(docs, attrs, test, rng)
    info = {
        "source": SOURCE,
        "licence": LICENCE,
        "citation": CITATION,
        "seed": seed,
        "splits": dict(zip(PEOPLE_SPLITS, fractions, strict=True)),
        "split": "by person, seeded (train/test/aux/public/distractors); background: "
        f"{share} of each test person's comments plus the distractors'",
        "background_share": share,
        "unmatched": unmatched,
        "label": "topic from the keyword lexicon privaudit.corpora.synthpai_topics (most hits, "
        f"ties to the earlier topic, no hit: {'other' if unmatched == 'other' else 'dropped'})",
        "attributes": "from the profiles: gender (sex); age_bin "
        + ", ".join(AGE_BINS)
        + "; income_level;"
        " education (highest completed level); relationship_status; region (UN M49, from "
        "city_country)",
        "sizes": sizes,
        "rows_read": len(comments),
        "dropped_rows": len(comments) - len(docs),
        "dropped": {"with no topic word (unmatched='drop')": len(comments) - len(docs)},
    }
    return Corpus("synthpai", out, label_names, list(ATTRIBUTE_NAMES), info, unit="person")


def _labelled(
    comments: pd.DataFrame, unmatched: Literal["other", "drop"]
) -> tuple[pd.DataFrame, list[str]]:
    """The comments with their topic and its index (``label``), and the label names; with
    ``unmatched="drop"`` the comments no topic word matches are left out."""
    docs = comments.assign(topic=topic_of(comments["text"].tolist()))
    label_names = [*TOPIC_WORDS, OTHER]
    if unmatched == "drop":
        docs = docs[docs["topic"] != OTHER].reset_index(drop=True)
        label_names.remove(OTHER)
    docs["label"] = docs["topic"].map({t: i for i, t in enumerate(label_names)})
    return docs, label_names


def _deal_people(
    docs: pd.DataFrame,
    attrs: pd.DataFrame,
    fractions: tuple[float, ...],
    rng: np.random.Generator,
) -> None:
    """Set each comment's ``split`` to the one its writer is dealt to (:data:`PEOPLE_SPLITS`)."""
    # People in file order, each with their comment count; dealt within (gender, age bin) strata.
    people = docs["author"].drop_duplicates().tolist()
    counts = docs["author"].value_counts().reindex(people).to_numpy()
    strata = (attrs.loc[people, "gender"] + "|" + attrs.loc[people, "age_bin"]).tolist()
    dealt = assign_splits(counts, fractions, rng, strata=strata, names=PEOPLE_SPLITS)
    docs["split"] = docs["author"].map(dict(zip(people, dealt, strict=True)))


def _hold_out_background(docs: pd.DataFrame, share: float, rng: np.random.Generator) -> pd.Series:
    """Move comments to ``background``: a random ``share`` of each test person's (>= 1, and >= 1
    left as a victim) and every distractor's. Returns which comments were dealt to test."""
    import pandas as pd  # lazy: `privaudit list` imports this module, never pandas

    test = docs["split"] == "test"
    n = docs.loc[test].groupby("author")["text"].transform("size")
    k = np.where(n >= 2, np.clip(np.floor(share * n + 0.5), 1, n - 1), 0)
    rank = pd.Series(rng.random(int(test.sum())), index=n.index).groupby(docs.loc[test, "author"])
    held = rank.rank(method="first").to_numpy() <= k
    docs.loc[n.index[held], "split"] = "background"
    docs.loc[docs["split"] == "distractors", "split"] = "background"
    return test


def _datasets(
    docs: pd.DataFrame, attrs: pd.DataFrame, test: pd.Series, rng: np.random.Generator
) -> tuple[dict[str, datasets.Dataset], dict[str, dict[str, int]]]:
    """The splits (:data:`SPLIT_ORDER`, each in a seeded random order) and their sizes: people
    and comments, and for ``background`` the test people's share of it."""
    import datasets

    features = corpus_features(ATTRIBUTE_NAMES)
    records = attrs[ATTRIBUTE_NAMES].to_dict("index")
    out: dict[str, datasets.Dataset] = {}
    sizes: dict[str, dict[str, int]] = {}
    for split in SPLIT_ORDER:
        part = docs.iloc[rng.permutation(np.flatnonzero(docs["split"] == split))]
        out[split] = datasets.Dataset.from_dict(
            {
                "text": part["text"].tolist(),
                "label": part["label"].astype(int).tolist(),
                "attributes": [records[a] for a in part["author"]],
                "entities": [[] for _ in range(len(part))],
                "author": part["author"].tolist(),
            },
            features=features,
        )
        sizes[split] = {"people": int(part["author"].nunique()), "comments": len(part)}
    # Background rows of test people (the re-identification targets) vs distractors.
    targets = out["background"].to_pandas()["author"].isin(set(docs.loc[test, "author"]))
    sizes["background"]["test_people"] = int(
        out["background"].to_pandas()["author"][targets].nunique()
    )
    sizes["background"]["test_people_comments"] = int(targets.sum())
    return out, sizes


# Declared for the attacker's public pre-training (``geia``'s ``public_corpus: auto``): other
# people's comments, never a victim's or the service's.
synthpai.public_split = "public"  # type: ignore[attr-defined]
