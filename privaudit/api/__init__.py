"""The contracts every defense, attack, corpus and utility evaluator follows.

Nothing heavy is imported at module level. See ``docs/DESIGN.md`` for the architecture.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, Self, runtime_checkable

import numpy as np

from privaudit.api.data import ALL_SPACES as ALL_SPACES  # re-exported: attacks read it here
from privaudit.api.data import Knowledge, Predictions, Release, Space, WordLikelihood
from privaudit.guarantees import Guarantee, Kind, Unit, as_guarantee, guarantee_property
from privaudit.params import ParamError, declared, declared_arguments, validate_params
from privaudit.records import knowledge_fields

if TYPE_CHECKING:
    import datasets


#: The undefended reference: the ``none`` defense's name, and the one display label only it
#: may carry (every table, plot and leaderboard compares against it).
NONE = "none"
#: The format reference: the ``clean`` defense's name (the undefended release as vectors, no
#: noise; ``privaudit.defenses.clean``). Like ``none``, a reference point, never ranked.
CLEAN = "clean"
#: The defenses that are reference points: never ranked, never in a headline.
REFERENCES: frozenset[str] = frozenset({NONE, CLEAN})
#: The fewest victims an attack may score when it declares a subset (``Attack.max_victims``).
MIN_VICTIMS = 300


class Component:
    """What every defense, attack and utility evaluator shares.

    Parameters are declared once, in the constructor's signature with constraint annotations
    (:mod:`privaudit.params`); ``__init__`` only stores each under its own name (scikit-learn
    style). Every construction is checked against the declaration before ``__init__`` runs, so
    a grid, which builds its components when it is planned, never starts a cell with a bad
    value; :meth:`params` reads the same declaration. Heavy state is loaded lazily and kept in
    attributes whose names start with ``_``.
    """

    name: ClassVar[str] = ""
    # Bump when a change alters results: the result store recomputes only this one's cells.
    version: ClassVar[str] = "1"
    # Rough seconds per 1,000 corpus words (a defense's or evaluator's: train + test; an
    # attack's: test + aux) on two CPU cores: what `privaudit run` estimates a grid with
    # before this machine has measured the component (privaudit.audit.estimate).
    cost_prior: ClassVar[float] = 0.3
    # The share of one GPU a cell of this component wants when the run's device is a CUDA
    # GPU (privaudit.runtime.devices): 0 = no torch worth a GPU. The Ray executor requests, per
    # point, the largest share among its defense, evaluator and attacks, so that a cluster
    # with GPUs schedules the points there (fractions let several points share one GPU).
    gpu: ClassVar[float] = 0.0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_validates", False):
            return

        @functools.wraps(init)
        def checked(self: Any, *args: Any, **kw: Any) -> None:
            try:
                bound = inspect.signature(init).bind(self, *args, **kw)
            except TypeError:
                unknown = sorted(set(kw) - set(declared(cls)))
                if unknown:  # names the first unknown one, with did-you-mean
                    validate_params(cls, {unknown[0]: kw[unknown[0]]}, where=_owner(type(self)))
                raise ParamError(
                    f"{_owner(cls)} takes the parameters {', '.join(declared(cls))} "
                    f"(by name); got {len(args)} positional and {sorted(kw)}."
                ) from None
            given = declared_arguments(bound.signature, bound.arguments)
            validate_params(cls, given, where=_owner(type(self)))
            init(self, *args, **kw)

        checked._validates = True  # type: ignore[attr-defined]
        cls.__init__ = checked  # type: ignore[method-assign]

    def params(self) -> dict[str, Any]:
        """The declared constructor parameters and their values, for result rows and keys."""
        return {k: getattr(self, k) for k in declared(type(self))}


def _owner(cls: type) -> str:
    name = getattr(cls, "name", "") or cls.__name__
    return f"{name!s}" if name == cls.__name__ else f"{name} ({cls.__name__})"


class Defense(Component):
    """A client-side privatizer. ``__init__`` stores parameters only (sklearn style).

    Subclasses set ``name``, ``knob`` (the constructor parameter a grid sweeps, or ``None``)
    and ``levels`` (a sweep of the knob from strong to weak privacy, the quick grid's),
    implement :meth:`privatize`, and state their formal guarantee as a
    :class:`~privaudit.guarantees.Guarantee` computed from their own parameters::

        @guarantee_property
        def guarantee(self) -> Guarantee:
            return Guarantee.dx("eta", self.eta, unit=Unit.TOKEN, metric="...")

    ``defense.guarantee`` is the instance's (``T2T(eta=50).guarantee`` has η = 50);
    ``DefenseClass.guarantee`` is the one at the default parameters. ``str()`` of it is the
    symbolic statement the results' ``guarantee`` column shows, ``.describe()`` the one with
    the values filled in. The default is :meth:`Guarantee.none` (``"none"``); a class
    attribute that is a string is taken as a :meth:`Guarantee.stated` one.
    ``variants`` lists parameter sets the quick grid runs as separate defenses (HaS's modes).
    ``calibrates_by_rate`` says whether calibration (``privaudit calibrate``, a grid's
    ``target_rates``) can map the knob to a word-replacement rate: a continuous, eta-like knob
    over text releases that report which words they replaced. False for a discrete knob
    (HaS's entity-type level) or vector releases (CAPE, DPNR, embedding d_X).
    """

    knob: ClassVar[str | None] = None
    calibrates_by_rate: ClassVar[bool] = True
    levels: ClassVar[tuple[float, ...]] = ()
    variants: ClassVar[tuple[Mapping[str, Any], ...]] = ({},)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A guarantee declared as a plain value (a string, as before guarantees were typed)
        # becomes a Guarantee here, so every reader gets the object; a wrong type fails now.
        # A plain property becomes a guarantee_property, so the class reads it too.
        given = cls.__dict__.get("guarantee")
        if isinstance(given, property) and given.fget is not None:
            cls.guarantee = guarantee_property(given.fget)
        elif given is not None and not hasattr(given, "__get__"):
            cls.guarantee = as_guarantee(given, where=f"{cls.__name__}.guarantee")

    @guarantee_property
    def guarantee(self) -> Guarantee:
        """The formal privacy guarantee at this instance's parameters (default: none)."""
        return Guarantee.none()

    def fit(self, train: datasets.Dataset) -> Self:
        return self

    def privatize(self, texts: Sequence[str], *, rng: np.random.Generator) -> Release:
        raise NotImplementedError

    def training_objective(self) -> Objective | None:
        """The service-side training extra this defense's recipe adds (RAPT's reconstruction,
        CAPE's adversary), or None."""
        return None

    def likelihood(self) -> WordLikelihood | None:
        """The mechanism's replacement likelihood at this instance's parameters, where it
        declares one (word-level mechanisms; None by default): public as the mechanism is,
        handed to the attacks as ``Knowledge.likelihood``."""
        return None

    @property
    def knob_value(self) -> Any:
        """The privacy knob's current value (None for a defense without a knob)."""
        return None if self.knob is None else getattr(self, self.knob)

    def with_knob(self, value: float) -> Self:
        """This defense, fitted state and all, at another privacy level: the one way the grid,
        calibration and ``privaudit privatize`` set the knob. The value is checked against the
        knob's declaration."""
        if self.knob is None:
            raise ValueError(f"Defense {self.name!r} has no privacy knob to set.")
        validate_params(type(self), {self.knob: value}, where=_owner(type(self)))
        other = copy.copy(self)
        setattr(other, self.knob, value)
        return other


class Attack(Component):
    """An adversary. It never sees the victim's originals; the runner scores its predictions.

    ``accepts`` declares the release spaces it reads; the runner derives ``n/a`` from it (and
    from ``needs_*``). ``quick_params`` are cost bounds the quick grid uses; ``test_params``
    are cheap parameters for the tiny-model tests (speed only, not a setting to report);
    ``fit_sd`` is the score's spread between attacker fits, which the intervals include.
    """

    accepts: ClassVar[frozenset[Space]] = frozenset()
    metric: ClassVar[str] = ""
    needs_white_box: ClassVar[bool] = False
    needs_query: ClassVar[bool] = False
    needs_aux: ClassVar[bool] = False
    #: Other knowledge fields the attack reads (declared in :mod:`privaudit.records`, e.g.
    #: ``background``): a run builds them only for attacks that name them, and an attack whose
    #: field the corpus cannot provide is ``n/a`` with the field's reason.
    needs_knowledge: ClassVar[frozenset[str]] = frozenset()
    #: (kind, unit) pairs of the declared guarantees whose mechanism the attack models
    #: (``Knowledge.guarantee`` must be one of them); empty: any mechanism
    needs_guarantee: ClassVar[frozenset[tuple[Kind, Unit]]] = frozenset()
    quick_params: ClassVar[Mapping[str, Any]] = {}
    #: Cheap parameters for the tiny-model tests (the attack matrix, the conformance suite).
    test_params: ClassVar[Mapping[str, Any]] = {}
    #: The standard deviation of the headline score between fits with different ``rng`` seeds
    #: on the same data, on the score's own scale (measured, per class, with the point and
    #: seeds in a comment). The run's bootstrap adds an independent N(0, fit_sd²) effect per
    #: cell to each resample (:mod:`privaudit.metrics.stats`), so intervals include attacker
    #: randomness as well as the test documents. 0: deterministic given its data.
    fit_sd: ClassVar[float] = 0.0
    #: The most victims the attack scores (an instance attribute an attack whose per-victim
    #: cost stays high sets from a declared parameter, at least :data:`MIN_VICTIMS`); the
    #: runner draws that many test documents with the run's seed, the same at every point,
    #: and the row's interval is computed on them (``n_attacked`` in its details). None: all.
    max_victims: int | None = None
    #: The declared parameter that sets how many *public* documents the attack pre-trains on
    #: (geia's ``public_docs``), for the strength curve over the attacker's public data; None:
    #: it learns from no public corpus.
    public_data: ClassVar[str | None] = None

    def plan(self, corpus: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        """The plan-time hook, called once when the grid is planned with the run corpus's name
        and parameters (nothing loaded yet): raise a one-line ``ValueError`` to refuse the
        run; return the declared parameters whose value the run's corpus decides, resolved
        (geia's ``public_corpus: auto`` → the corpus it pre-trains on). The runner keeps the
        result and hands it back, never through the instance: as :attr:`Knowledge.plan` at
        fit, and over the configured values in the row's ``attack_params``. It must not change
        the attack. Default: nothing to check or resolve."""
        return {}

    def public_available(self, plan: Mapping[str, Any] | None = None) -> int:
        """How many public documents the attack pre-trains on under ``plan`` (what
        :meth:`plan` resolved): its :attr:`public_data` parameter, unless its public text
        holds fewer (an attack that knows overrides)."""
        return int(getattr(self, str(self.public_data)))

    def with_public_data(self, n: int) -> Self:
        """This attack on ``n`` of its public documents (the strength curve's variants),
        everything else as it is (fitted with the original's :attr:`Knowledge.plan`)."""
        validate_params(type(self), {str(self.public_data): n}, where=_owner(type(self)))
        variant = copy.copy(self)
        setattr(variant, str(self.public_data), n)
        return variant

    def applicable(self, release: Release, knowledge: Knowledge) -> str | None:
        """``None`` if this attack can run on ``release`` (public) with ``knowledge``;
        otherwise the reason it cannot. Override only for needs the declarations cannot say."""
        if release.space not in self.accepts:
            spaces = ", ".join(sorted(str(s) for s in self.accepts))
            return f"{self.name} reads {spaces} releases, not {release.space}"
        if self.needs_white_box and not knowledge.white_box:
            return f"{self.name} needs white-box access to the backbone"
        if self.needs_query and knowledge.query_mechanism is None:
            return f"{self.name} needs query access to the mechanism"
        if self.needs_aux and knowledge.aux is None:
            return f"{self.name} needs the attacker's auxiliary labelled split"
        missing = self.missing_knowledge(knowledge)
        if missing is not None:
            return missing[0]
        return self.guarantee_reason(knowledge)

    def guarantee_reason(self, knowledge: Knowledge) -> str | None:
        """Why the mechanism's declared guarantee puts it outside what this attack models
        (:attr:`needs_guarantee`), or None."""
        if self.needs_guarantee:
            g = knowledge.guarantee
            if g is None or (g.kind, g.unit) not in self.needs_guarantee:
                wanted = " or ".join(sorted(f"{k} per {u}" for k, u in self.needs_guarantee))
                return (
                    f"{self.name} models a mechanism that declares {wanted}; this one "
                    f"declares {'nothing' if g is None else repr(str(g))}"
                )
        return None

    def missing_knowledge(self, knowledge: Knowledge) -> tuple[str, str] | None:
        """(reason, na_cause) for the first field of :attr:`needs_knowledge` that
        ``knowledge`` lacks, or None when it grants them all."""
        fields = knowledge_fields()
        for name in sorted(self.needs_knowledge):
            if knowledge.get(name) is None:
                spec = fields.get(name)
                why = spec.missing if spec is not None and spec.missing else f"no {name!r}"
                return f"{self.name} needs {name}: {why}", (spec.na_cause if spec else "release")
        return None

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        """Learn what the threat model allows; ``rng`` (spawned per cell) is the only source of
        randomness."""
        return self

    def attack(self, release: Release) -> Predictions:
        raise NotImplementedError


@dataclass
class TrainingBatch:
    """What a service-side :class:`Objective` reads of one training minibatch.

    ``hidden`` is the encoder's token states (batch, length, dim), or None when the service
    trains a head on pooled vectors; ``features`` the representation the task head reads
    (batch, dim'); ``prefix_positions`` per row, the token positions of the first piece of each
    public plain-prefix word (empty lists when the release has none); ``targets`` per row, what
    :meth:`Objective.targets` gave for that document.
    """

    hidden: Any
    features: Any
    prefix_positions: list[list[int]]
    targets: list[Any]


@runtime_checkable
class Objective(Protocol):
    """A defense's service-side training extra (RAPT's plain-token reconstruction, CAPE's
    adversary): a head trained beside the task head, its loss added to the task loss, dropped
    after training. A utility trainer needs nothing else of the defense."""

    def applies_to(self, release: Release) -> str | None:
        """None when the objective can train on ``release``; otherwise why not."""
        ...

    def targets(
        self, release: Release, rows: Sequence[int], attributes: Mapping[str, Sequence[Any]]
    ) -> list[Any]:
        """One target per training row (``rows`` index the release); ``attributes`` are the
        service's private-attribute labels of the train split, by name."""
        ...

    def head(self, hidden_size: int, targets: Sequence[Any]) -> Any:
        """The extra head (a ``torch.nn.Module``) for features of ``hidden_size``."""
        ...

    def loss(self, batch: TrainingBatch, head: Any) -> Any:
        """The term added to the task loss for this batch (a scalar tensor), or None."""
        ...


class UtilityEvaluator(Component):
    """Measures what a defense costs the downstream task.

    The runner privatizes each split once and calls :meth:`evaluate_releases` (so attacks and
    utility see the same release); ``defense`` is passed for evaluators that train with a
    defense's service-side objective. :meth:`evaluate` is the one-call convenience.

    The result maps measures to values: the headline ``metric`` (``balanced_accuracy``:
    chance is 1/K whatever the class balance), ``accuracy`` and ``macro_f1`` beside it, and,
    for the runner's per-document outcomes and intervals, ``predictions`` (one label per
    scored test document), ``test_indices`` (which test documents, when not all) and
    ``objective`` (``applied``, ``none`` or ``not applied: <reason>``). An evaluator that
    returns only ``accuracy`` still works: its points carry no interval. ``fit_sd`` is the
    headline's spread between evaluator fits, which the intervals include.
    """

    metric: ClassVar[str] = "balanced_accuracy"
    #: The standard deviation of the headline metric between fits with different ``rng``
    #: seeds on the same releases (measured, per class, with the points and seeds in a
    #: comment). The run's bootstrap adds an independent N(0, fit_sd²) effect per point to
    #: each resample of its utility (:mod:`privaudit.metrics.stats`), so utility intervals
    #: include the evaluator's training randomness as well as the test documents.
    #: 0: deterministic given its releases.
    fit_sd: ClassVar[float] = 0.0

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
    ) -> dict[str, Any]:
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
    ) -> dict[str, Any]:
        train = defense.privatize(train_texts, rng=rng)
        test = defense.privatize(test_texts, rng=rng)
        return self.evaluate_releases(
            train,
            train_labels,
            test,
            test_labels,
            rng=rng,
            defense=defense,
            train_attributes=train_attributes,
        )
