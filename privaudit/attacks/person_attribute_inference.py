"""Person-level attribute inference: a linked account's releases pooled, one guess per person."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Self

import numpy as np
from annotated_types import Ge

from privaudit.api import ALL_SPACES, Attack, Knowledge, Predictions, Release, Space
from privaudit.attacks.attribute_inference import aux_labels, release_features
from privaudit.metrics.linked import person_means, person_rows
from privaudit.models.backbone import backbone
from privaudit.params import PositiveFloat, PositiveInt

if TYPE_CHECKING:
    from privaudit.models.backbone import Backbone


@dataclass
class _Head:
    """One attribute's classifier over pooled person features."""

    classes: list[Any]
    majority: Any
    model: Any  # sklearn LogisticRegression, or None when one class was seen


class PersonAttributeInference(Attack):
    """Attribute inference from all of a person's linked releases (SynthPAI's task).

    Papers: the person-level setting of SynthPAI (Yukhymenko, Staab, Vero, Vechev, "A
    Synthetic Dataset for Personal Attribute Inference", NeurIPS 2024 D&B) and of Staab et al.,
    "Beyond Memorization: Violating Privacy via Inference with Large Language Models" (ICLR
    2024): a person's attributes are inferred from *all* of that person's comments, not one.
    The classifier is the supervised baseline those papers compare with (bag of words and a
    linear model), not an LLM: nothing may be downloaded here.

    Threat model: black box with **linkability**. A service that receives a user's texts under
    one account can link them, so the attacker is given which victim releases share an author
    (knowledge field ``links``, :mod:`privaudit.metrics.linked`: an account number per release,
    never a name) besides what :class:`~privaudit.attacks.attribute_inference.
    AttributeInference` has: query access to the mechanism at the victims' level on its own
    aux text, and the aux split's attributes and authors (people disjoint from the victims).
    On a corpus whose unit is the document (no authors) the cell is ``n/a``.

    Features, per person (the person's releases pooled; one function for aux and victims):

    - text releases: the person's released texts joined, TF-IDF of word 1–2-grams
      (``max_features``, sublinear tf; fitted on the aux people's pooled releases): what a
      person says across their comments is the cue (SynthPAI's gender .639 per person against
      .548 per comment on the original text, with this model);
    - vector releases: the mean over the person's documents of the per-document features of
      attribute inference (mean released token vector, or the pooled vector), standardised
      with aux statistics.

    Model: per attribute, a multinomial logistic regression (``c``, sklearn's inverse
    regularisation, ``class_weight="balanced"`` since the score is balanced accuracy), trained
    on one row per aux person; with ``views`` > 1, each aux person also gives ``views − 1``
    rows of a random half of their documents (the attacker's own data augmented to the sizes
    victims have; drawn from the ``rng`` given to ``fit``). Every document of a person gets the
    person's guess; :data:`~privaudit.metrics.attributes.PERSON_ATTRIBUTE_ACCURACY` scores each
    person once against the aux majority.

    Knob: none (an attack). The attribute families take the stronger of this attack and the
    per-document one on the normalised scale (the worst case over the family's attacks).
    """

    name: ClassVar[str] = "person-attribute-inference"
    cost_prior: ClassVar[float] = 0.03  # s per 1,000 words (estimate: TF-IDF + a linear model)
    gpu: ClassVar[float] = 0.0
    accepts: ClassVar[frozenset[Space]] = ALL_SPACES
    metric: ClassVar[str] = "person_attribute_accuracy"
    # The fit is deterministic given the aux release (lbfgs; the views' draws are seeded), but
    # the aux release is redrawn per cell, so refits differ by the mechanism's noise.
    fit_sd: ClassVar[float] = 0.01
    test_params: ClassVar[Mapping[str, Any]] = {"max_features": 2000}
    needs_white_box: ClassVar[bool] = False
    needs_query: ClassVar[bool] = True
    needs_aux: ClassVar[bool] = True
    needs_knowledge: ClassVar[frozenset[str]] = frozenset({"links"})

    def __init__(
        self,
        attributes: Sequence[str] | None = None,
        c: PositiveFloat = 1.0,
        max_features: PositiveInt = 20000,
        views: PositiveInt = 1,
        backbone: str | None = None,
        max_aux: Annotated[int, Ge(2)] | None = None,
    ) -> None:
        self.attributes = attributes
        self.c = c
        self.max_features = max_features
        self.views = views
        self.backbone = backbone
        self.max_aux = max_aux
        self._backbone_name: str | None = None
        self._kind: str | None = None
        self._links: list[Any] | None = None
        self._vectorizer: Any = None
        self._mean: np.ndarray | None = None
        self._std: np.ndarray | None = None
        self._heads: dict[str, _Head] = {}

    # ---------------------------------------------------------------------------------------

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        links = knowledge.get("links")
        if links is None:
            raise ValueError(
                f"{self.name} needs the links knowledge field (which releases share an "
                "author); use a corpus that declares authors (synthpai)."
            )
        if knowledge.query_mechanism is None or knowledge.aux is None:
            raise ValueError(
                f"{self.name} needs query access to the mechanism and the attacker's aux split."
            )
        self._links = list(links)
        self._backbone_name = self.backbone if self.backbone is not None else knowledge.backbone
        aux = knowledge.aux
        if self.max_aux is not None and len(aux) > self.max_aux:
            aux = aux.select(range(self.max_aux))
        if "author" not in aux.column_names:
            raise ValueError(f"{self.name} needs the aux split's authors (an 'author' column).")
        labels = aux_labels(aux, self.attributes)
        release = knowledge.query([str(t) for t in aux["text"]])
        self._kind = release.kind
        people = person_rows([None if a in (None, "") else str(a) for a in aux["author"]], len(aux))
        groups = [*people, *_halves(people, int(self.views) - 1, rng)]
        x = self._fit_features(release, groups)
        self._heads = {
            name: self._train_head(x, [_person_value(values, g) for g in groups])
            for name, values in labels.items()
        }
        return self

    def _train_head(self, x: Any, values: list[Any]) -> _Head:
        from sklearn.linear_model import LogisticRegression

        keep = [i for i, v in enumerate(values) if v is not None]
        kept = [str(values[i]) for i in keep]
        classes, counts = np.unique(kept, return_counts=True)
        majority = str(classes[int(np.argmax(counts))])
        if len(classes) < 2:
            return _Head(list(classes), majority, None)
        model = LogisticRegression(
            C=float(self.c), class_weight="balanced", max_iter=2000, solver="lbfgs"
        )
        model.fit(x[keep], kept)
        return _Head([str(c) for c in model.classes_], majority, model)

    # ---------------------------------------------------------------------------------------

    def attack(self, release: Release) -> Predictions:
        if self._links is None or not self._heads:
            raise ValueError(f"{self.name} is not fitted: call fit(knowledge) before attack().")
        if release.kind != self._kind:
            raise ValueError(
                f"{self.name} was fitted on a {self._kind!r} aux release but is attacking a "
                f"{release.kind!r} release; query the same mechanism the victims used."
            )
        n = len(release)
        if len(self._links) != n:
            raise ValueError(
                f"{self.name} was given links for {len(self._links)} victims but the release "
                f"holds {n}: it attacks every victim (declare no max_victims)."
            )
        groups = person_rows(self._links, n)
        x = self._features(release, groups) if n else None
        attributes: dict[str, list[Any]] = {}
        for name, head in self._heads.items():
            guess = [head.majority] * len(groups)
            if head.model is not None and x is not None:
                guess = [str(v) for v in head.model.predict(x)]
            per_doc: list[Any] = [None] * n
            for g, value in zip(groups, guess, strict=True):
                for i in g:
                    per_doc[i] = value
            attributes[name] = per_doc
        return Predictions(
            "attributes",
            attributes=attributes,
            meta={
                "majority": {name: head.majority for name, head in self._heads.items()},
                "classes": {name: list(head.classes) for name, head in self._heads.items()},
                "n_people": len(groups),
            },
        )

    # ---------------------------------------------------------------------------------------

    def _fit_features(self, release: Release, groups: list[list[int]]) -> Any:
        """Pooled features of the aux people, fitting the vectorizer or the standardisation."""
        if release.kind == "text":
            from sklearn.feature_extraction.text import TfidfVectorizer

            self._vectorizer = TfidfVectorizer(
                ngram_range=(1, 2), sublinear_tf=True, max_features=int(self.max_features)
            )
            return self._vectorizer.fit_transform(_joined(release, groups))
        pooled = _pooled(release_features(release, self._load_backbone, self.name), groups)
        self._mean = pooled.mean(axis=0)
        self._std = pooled.std(axis=0) + 1e-6
        return (pooled - self._mean) / self._std

    def _features(self, release: Release, groups: list[list[int]]) -> Any:
        if release.kind == "text":
            return self._vectorizer.transform(_joined(release, groups))
        pooled = _pooled(release_features(release, self._load_backbone, self.name), groups)
        if self._mean is None or pooled.shape[1] != self._mean.shape[0]:
            raise ValueError(
                f"The released features have dimension {pooled.shape[1]}, unlike the aux "
                "release's: query the same mechanism the victims used."
            )
        return (pooled - self._mean) / self._std

    def _load_backbone(self) -> Backbone:
        return backbone(self._backbone_name or self.backbone)


def _joined(release: Release, groups: list[list[int]]) -> list[str]:
    texts = release.content_texts()
    return ["\n".join(texts[i] for i in g) for g in groups]


def _pooled(features: np.ndarray, groups: list[list[int]]) -> np.ndarray:
    return person_means(features, groups).astype(np.float32)


def _halves(people: list[list[int]], views: int, rng: np.random.Generator) -> list[list[int]]:
    """``views`` random halves of each person with at least two documents (seeded)."""
    out = []
    for _ in range(max(views, 0)):
        for g in people:
            if len(g) >= 2:
                out.append(sorted(rng.choice(g, size=max(1, len(g) // 2), replace=False).tolist()))
    return out


def _person_value(values: list[Any], group: list[int]) -> Any:
    """A person's attribute value: the most frequent known value over their documents."""
    known = [str(values[i]) for i in group if values[i] is not None]
    if not known:
        return None
    uniq, counts = np.unique(known, return_counts=True)
    return str(uniq[int(np.argmax(counts))])
