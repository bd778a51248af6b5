"""The contracts every defense, attack, corpus and utility evaluator follows.

Nothing heavy is imported at module level. See ``docs/DESIGN.md`` for the architecture.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self

import numpy as np

if TYPE_CHECKING:
    import datasets

ReleaseKind = Literal["text", "token_vectors", "pooled_vectors"]
RELEASE_KINDS: frozenset[str] = frozenset({"text", "token_vectors", "pooled_vectors"})


@dataclass
class Release:
    """What leaves the user's device: everything an adversary may see.

    ``audit`` is the runner's side channel (e.g. which tokens a mechanism replaced, for the
    replacement rate). It is stripped by :meth:`public` before any attack sees the release.
    """

    kind: ReleaseKind
    texts: list[str] | None = None
    vectors: list[np.ndarray] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    audit: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in RELEASE_KINDS:
            raise ValueError(f"Release kind {self.kind!r} is not one of {sorted(RELEASE_KINDS)}.")
        if self.kind == "text" and self.texts is None:
            raise ValueError("A 'text' release needs `texts` (a list of strings).")
        if self.kind != "text" and self.vectors is None:
            raise ValueError(f"A {self.kind!r} release needs `vectors` (one array per document).")

    def __len__(self) -> int:
        return len(self.texts if self.texts is not None else self.vectors or [])

    def content_texts(self) -> list[str]:
        """The released texts without a public plain-word prefix: RAPT prepends
        ``meta["n_plain_words"]`` words of protocol (the same for every user, not the author's
        words) that every reader of the release knows to skip."""
        if self.kind != "text":
            raise ValueError(f"A {self.kind!r} release has no texts.")
        texts = list(self.texts or [])
        n_plain = self.meta.get("n_plain_words", 0) or 0
        if isinstance(n_plain, bool) or not isinstance(n_plain, numbers.Integral) or n_plain < 0:
            raise ValueError(
                f"meta['n_plain_words'] must be a non-negative integer, got {n_plain!r}."
            )
        if n_plain:
            texts = [" ".join(t.split()[int(n_plain) :]) for t in texts]
        return texts

    def public(self) -> Release:
        """The release as an attacker receives it: no runner-only audit information."""
        return dataclasses.replace(self, audit={}, meta=dict(self.meta))


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
    """

    kind: Literal["tokens", "attributes", "entities", "texts"]
    tokens: list[list[int]] | None = None
    attributes: dict[str, list[Any]] | None = None
    entities: list[list[dict[str, Any]]] | None = None
    texts: list[str] | None = None
    vectors: list[np.ndarray] | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Knowledge:
    """What the threat model grants the attacker.

    ``query_mechanism`` runs the public privatizer on the attacker's *own* texts; ``aux`` is
    the attacker's auxiliary labelled split, never the victim's.
    """

    white_box: bool = True
    backbone: str | None = None
    query_mechanism: Callable[[list[str]], Release] | None = None
    aux: datasets.Dataset | None = None  # the aux split: text, label, attributes, entities

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


class Defense:
    """A client-side privatizer. ``__init__`` stores parameters only (sklearn style).

    Subclasses set ``name``, ``knob`` (the parameter a grid sweeps, or ``None``), ``knob_unit``
    and ``guarantee`` (the formal privacy statement, or ``"none"``), and implement
    :meth:`privatize`.
    """

    name: ClassVar[str] = ""
    # Bump when a change alters results: the result store recomputes only this one's cells.
    version: ClassVar[str] = "1"
    knob: ClassVar[str | None] = None
    knob_unit: ClassVar[str] = ""
    guarantee: ClassVar[str] = "none"
    release_kind: ClassVar[ReleaseKind] = "text"

    def fit(self, train: datasets.Dataset) -> Self:
        return self

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        raise NotImplementedError

    def training_objective(self) -> Any | None:
        return None

    def params(self) -> dict[str, Any]:
        """The constructor parameters, for result rows and cache keys."""
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def with_knob(self, value: float) -> Self:
        if self.knob is None:
            raise ValueError(f"Defense {self.name!r} has no privacy knob to set.")
        return type(self)(**{**self.params(), self.knob: value})


class Attack:
    """An adversary. It never sees the victim's originals; the runner scores its predictions."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1"  # bump when a change alters results (see Defense.version)
    accepts: ClassVar[frozenset[str]] = frozenset()
    metric: ClassVar[str] = ""
    needs_white_box: ClassVar[bool] = False
    needs_query: ClassVar[bool] = False
    needs_aux: ClassVar[bool] = False
    _fit_seconds: float = float("nan")

    @property
    def fit_seconds(self) -> float:
        """Wall time of the last :meth:`fit` (querying, featurisation, training), or NaN."""
        return self._fit_seconds

    def applicable(
        self, release_kind: str, knowledge: Knowledge, meta: dict[str, Any] | None = None
    ) -> str | None:
        """``None`` if this attack can run; otherwise the reason it cannot. ``meta`` is the
        release's public metadata (e.g. the layer a split model released)."""
        if release_kind not in self.accepts:
            return f"{self.name} reads {sorted(self.accepts)} releases, not {release_kind!r}"
        if self.needs_white_box and not knowledge.white_box:
            return f"{self.name} needs white-box access to the backbone"
        if self.needs_query and knowledge.query_mechanism is None:
            return f"{self.name} needs query access to the mechanism"
        if self.needs_aux and knowledge.aux is None:
            return f"{self.name} needs the attacker's auxiliary labelled split"
        return None

    def fit(self, knowledge: Knowledge) -> Self:
        return self

    def attack(self, release: Release) -> Predictions:
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class UtilityEvaluator:
    """Measures what a defense costs the downstream task.

    The runner privatizes each split once and calls :meth:`evaluate_releases` (so attacks and
    utility see the same release); ``defense`` is passed for evaluators that train with a
    defense's service-side objective. :meth:`evaluate` is the one-call convenience.
    """

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1"  # bump when a change alters results (see Defense.version)
    metric: ClassVar[str] = "accuracy"

    def evaluate_releases(
        self,
        train: Release,
        train_labels: Sequence[int],
        test: Release,
        test_labels: Sequence[int],
        *,
        rng: np.random.Generator,
        defense: Defense | None = None,
        train_attributes: Mapping[str, Sequence[Any]] | None = None,
    ) -> dict[str, float]:
        """Utility of training on ``train`` and testing on ``test``. ``train_attributes``
        (private attribute name → one value per train document) is for trainers whose
        defense objective needs them (CAPE's adversary); other evaluators ignore it."""
        raise NotImplementedError

    def evaluate(
        self,
        defense: Defense,
        train_texts: Sequence[str],
        train_labels: Sequence[int],
        test_texts: Sequence[str],
        test_labels: Sequence[int],
        *,
        rng: np.random.Generator,
        train_attributes: Mapping[str, Sequence[Any]] | None = None,
    ) -> dict[str, float]:
        train = defense.privatize(train_texts, rng=rng)
        test = defense.privatize(test_texts, rng=rng)
        return self.evaluate_releases(
            train, train_labels, test, test_labels, rng=rng, defense=defense,
            train_attributes=train_attributes,
        )  # fmt: skip

    def params(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}
