"""What crosses the contracts (:mod:`privaudit.api`): a :class:`Release` and the
:class:`Space` it lives in, an attack's :class:`Predictions`, and the attacker's
:class:`Knowledge`."""

from __future__ import annotations

import dataclasses
import functools
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from privaudit.guarantees import Guarantee
from privaudit.records import knowledge_fields, prediction_kinds

if TYPE_CHECKING:
    import datasets

ReleaseKind = Literal["text", "token_vectors", "pooled_vectors"]
RELEASE_KINDS: frozenset[str] = frozenset({"text", "token_vectors", "pooled_vectors"})


class Space(StrEnum):
    """The representation a release lives in: what an attack or a service can read of it."""

    TEXT = "text"  # released text
    TOKEN_EMBEDDINGS = "token_embeddings"  # token vectors in the input word-embedding space
    HIDDEN_STATES = "hidden_states"  # token vectors after encoder layer k >= 1 (a split model)
    POOLED = "pooled"  # one vector per document


ALL_SPACES: frozenset[Space] = frozenset(Space)


@dataclass
class Release:
    """What leaves the user's device: everything an adversary may see.

    ``kind`` is the container (texts, per-token vectors, one vector per document); ``layer``
    says where token vectors live (0: the backbone's input word-embedding space, without
    [CLS]/[SEP]; k >= 1: the hidden states after encoder layer k, every position); together
    they give the typed :attr:`space`. ``plain_prefix`` is the number of leading words of every
    released text that are public protocol, not the author's (RAPT's plain tokens).
    ``meta`` holds the rest of the public description (the defense, its knob value).
    ``audit`` is the runner's side channel (e.g. which tokens a mechanism replaced, for the
    replacement rate). It is stripped by :meth:`public` before any attack sees the release.
    """

    kind: ReleaseKind
    texts: list[str] | None = None
    vectors: list[np.ndarray] | None = None
    layer: int | None = None
    plain_prefix: int = 0
    meta: dict[str, Any] = field(default_factory=dict)
    audit: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in RELEASE_KINDS:
            raise ValueError(f"Release kind {self.kind!r} is not one of {sorted(RELEASE_KINDS)}.")
        if self.kind == "text" and self.texts is None:
            raise ValueError("A 'text' release needs `texts` (a list of strings).")
        if self.kind != "text" and self.vectors is None:
            raise ValueError(f"A {self.kind!r} release needs `vectors` (one array per document).")
        if self.kind == "token_vectors":
            if not _is_int(self.layer) or self.layer < 0:  # type: ignore[operator]
                raise ValueError(
                    "A 'token_vectors' release needs `layer`: 0 for the input word-embedding "
                    f"space, k >= 1 for hidden states after layer k; got {self.layer!r}."
                )
        elif self.layer is not None:
            raise ValueError(f"A {self.kind!r} release has no layer; got layer={self.layer!r}.")
        if not _is_int(self.plain_prefix) or self.plain_prefix < 0:
            raise ValueError(
                f"plain_prefix must be a non-negative integer, got {self.plain_prefix!r}."
            )
        if self.plain_prefix and self.kind != "text":
            raise ValueError("Only a 'text' release can carry a plain-word prefix.")

    def __len__(self) -> int:
        return len(self.texts if self.texts is not None else self.vectors or [])

    @property
    def space(self) -> Space:
        if self.kind == "text":
            return Space.TEXT
        if self.kind == "pooled_vectors":
            return Space.POOLED
        return Space.TOKEN_EMBEDDINGS if self.layer == 0 else Space.HIDDEN_STATES

    def content_texts(self) -> list[str]:
        """The released texts without the public plain-word prefix (RAPT prepends
        ``plain_prefix`` words of protocol, the same for every user, that every reader of the
        release knows to skip)."""
        if self.kind != "text":
            raise ValueError(f"A {self.kind!r} release has no texts.")
        texts = list(self.texts or [])
        if self.plain_prefix:
            texts = [" ".join(t.split()[self.plain_prefix :]) for t in texts]
        return texts

    def public(self) -> Release:
        """The release as an attacker receives it: no runner-only audit information."""
        return dataclasses.replace(self, audit={}, meta=dict(self.meta))

    def subset(self, indices: Sequence[int]) -> Release:
        """The public release of the documents at ``indices``, in that order (an attack that
        scores a declared subset of the victims reads only theirs)."""
        idx = [int(i) for i in indices]
        if any(not 0 <= i < len(self) for i in idx):
            raise ValueError(f"Release.subset: indices outside 0..{len(self) - 1}.")
        return dataclasses.replace(
            self,
            texts=None if self.texts is None else [self.texts[i] for i in idx],
            vectors=None if self.vectors is None else [self.vectors[i] for i in idx],
            audit={},
            meta=dict(self.meta),
        )


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass
class Predictions:
    """What an attack returns. The runner, which holds the truth, scores it.

    ``kind`` says which field is filled:
    - ``tokens``: per document, the predicted original token ids (``meta['tokenizer']`` names
      the vocabulary they index);
    - ``attributes``: per attribute name, one predicted value per document;
    - ``entities``: per document, a list of ``{"text", "type"}`` dicts;
    - ``texts``: per document, the reconstructed original text.

    Optional: ``vectors`` (per document, reconstructed input-embedding vectors, one per
    predicted token, for attacks scored by MSE); ``meta["released_tokens"]`` (per document, the
    released token ids the predictions stand on, so the runner can align them with the
    originals); ``meta["doc_indices"]`` (the victims attacked, in order, when a costly attack
    runs on a subset); ``meta["settings"]`` (cost-bounding settings to report).

    Any other kind declared in :mod:`privaudit.records` (``ranking``: per document, candidate
    authors best first) is held in ``extra`` under its name and read as an attribute
    (``predictions.ranking``); :meth:`of` builds either.
    """

    kind: str
    tokens: list[list[int]] | None = None
    attributes: dict[str, list[Any]] | None = None
    entities: list[list[dict[str, Any]]] | None = None
    texts: list[str] | None = None
    vectors: list[np.ndarray] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in prediction_kinds():
            raise ValueError(
                f"Predictions kind {self.kind!r} is not declared; the kinds are "
                f"{', '.join(prediction_kinds())} (privaudit.records.register_prediction_kind "
                "adds one)."
            )

    @classmethod
    def of(cls, kind: str, value: Any, **fields: Any) -> Predictions:
        """Predictions of ``kind`` holding ``value`` (built-in kinds in their own field)."""
        if kind in _PREDICTION_FIELDS:
            return cls(kind=kind, **{kind: value}, **fields)
        return cls(kind=kind, extra={kind: value} | dict(fields.pop("extra", {})), **fields)

    @property
    def value(self) -> Any:
        """What the predictions of this kind hold."""
        return getattr(self, self.kind)

    def __getattr__(self, name: str) -> Any:
        # A declared kind other than the built-in fields lives in ``extra``.
        extra = self.__dict__.get("extra")
        if extra is not None and name in prediction_kinds():
            return extra.get(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


_PREDICTION_FIELDS = frozenset({"tokens", "attributes", "entities", "texts"})


@dataclass(frozen=True)
class WordLikelihood:
    """A word-level mechanism's replacement likelihood, declared by the defense and public as
    the mechanism is (:meth:`privaudit.api.Defense.likelihood`): ``log_probs(originals)`` is
    ln P(y | w), rows the ``originals`` (words of ``words``, lower case), columns ``words``
    (the candidate vocabulary). ``exact``: a closed form; False for a Monte Carlo estimate,
    whose cost per original rules it out of a whole-vocabulary decoding."""

    words: tuple[str, ...]
    log_probs: Callable[[Sequence[str]], np.ndarray]
    exact: bool = True

    @functools.cached_property
    def row(self) -> dict[str, int]:
        """Each word's column."""
        return {w: i for i, w in enumerate(self.words)}


@dataclass(frozen=True)
class Knowledge:
    """What the threat model grants the attacker.

    ``query_mechanism`` runs the public privatizer on the attacker's *own* texts; ``aux`` is
    the attacker's auxiliary labelled split, never the victim's; ``guarantee`` is the
    mechanism's declared guarantee (public, as the mechanism is: its kind, unit and parameter)
    and ``likelihood`` its declared replacement likelihood, where it has one.
    Every other knowledge field declared in :mod:`privaudit.records` (``public``,
    ``background``) is held in ``extra`` and read as an attribute (``knowledge.background``;
    None when not granted); :meth:`get` reads any field by name.
    """

    white_box: bool = True
    backbone: str | None = None
    query_mechanism: Callable[[list[str]], Release] | None = None
    aux: datasets.Dataset | None = None  # the aux split: text, label, attributes, entities
    guarantee: Guarantee | None = None
    #: The mechanism's declared replacement likelihood, where it declares one (word-level
    #: metric-DP mechanisms): public with the mechanism, like its guarantee.
    likelihood: WordLikelihood | None = None
    #: What this attack's plan-time hook resolved from the run's corpus (:meth:`Attack.plan`).
    plan: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.extra) - set(knowledge_fields()))
        if unknown:
            raise ValueError(
                f"Knowledge fields {unknown} are not declared; declare them with "
                "privaudit.records.register_knowledge_field."
            )

    def __getattr__(self, name: str) -> Any:
        extra = self.__dict__.get("extra")
        if extra is not None and name in knowledge_fields():
            return extra.get(name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def get(self, name: str) -> Any:
        """The knowledge field ``name`` (None when not granted)."""
        return getattr(self, name) if name in knowledge_fields() else None

    def query(self, texts: list[str]) -> Release:
        """Privatize the attacker's own ``texts`` with the public mechanism and return what an
        attacker sees of it (:meth:`Release.public`), after checking that the mechanism kept
        its contract (a :class:`Release`, one document per text)."""
        if self.query_mechanism is None:
            raise ValueError("This threat model grants no query access to the mechanism.")
        release = self.query_mechanism(texts)
        if not isinstance(release, Release):
            raise TypeError(
                f"The query mechanism returned {type(release).__name__}, expected a Release."
            )
        if len(release) != len(texts):
            raise ValueError(
                f"The query mechanism returned {len(release)} documents for {len(texts)} aux "
                "texts; a mechanism must release one document per input."
            )
        return release.public()
