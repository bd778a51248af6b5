"""Which tests a defense's guarantee gets, run at one confidence, and the table they make.

:func:`audit_guarantee` takes one defense at one privacy level, reads its
:class:`~privaudit.guarantees.Guarantee` and runs the tests that fit it (one module per
kind: :mod:`.dx` for d_X-privacy, :mod:`.ldp` for ε-LDP on pooled vectors):

============================  =======================================================
defense                       tests (the mechanism reached through)
============================  =======================================================
t2t                           release (``privatize`` on one-token texts); noise step
                              (``sample_dx_noise``, as t2t's ``token_noise`` calls it)
embedding-dx                  release (``privatize`` on one-token texts: the noisy
                              vector); noise step (as t2t)
sap, sap-cti (split layer 0)  release (``privatize`` on one-token texts); noise step
                              (``sample_dx_noise`` at the token's own η, as sap calls it)
sap, sap-cti (layer k >= 1)   noise step only (the hidden states are not inputs a user
                              can choose)
pct2t, rapt                   release (``perturb_words``, the word kernel both call on
                              every selected word and RAPT's plain tokens, on one word
                              of the noun category); noise step (``sample_dx_noise``)
cape, dpnr                    per coordinate, whole vector, batch of two
                              (``pooled_release``, on constructed normalised vectors)
a user's privatizer           release (``privatize`` on one-word texts), when it
                              declares a d_X, ε-LDP or ε-DP guarantee per token or word
                              and releases text
has, none, no formal claim    no test: "no formal claim"
============================  =======================================================

Kernel functions are looked up on the defense's module when the test runs, so the test
exercises exactly what ``privatize`` calls. The m distinguishing tests of one audit share
the error α (Bonferroni: each Clopper–Pearson bound at α / 2m, see :mod:`.stats`), so the
audit flags a correct mechanism with probability <= α.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from privaudit.api import Defense
from privaudit.audit.guarantee_audit import dx, ldp
from privaudit.audit.guarantee_audit.stats import Evidence
from privaudit.audit.wrapper import UserDefense
from privaudit.corpora.synthetic import synthetic_reviews
from privaudit.defenses.cape import CAPE
from privaudit.defenses.dpnr import DPNR, resolve_sensitivity
from privaudit.defenses.embedding_dx import EmbeddingDX
from privaudit.defenses.pct2t import PCT2T, pos_vocabulary, resolve_categories
from privaudit.defenses.sap import SAP, SAPCTI
from privaudit.defenses.t2t import T2T
from privaudit.guarantees import Guarantee, Kind, Unit
from privaudit.params import shown
from privaudit.registry import DEFENSES, build_defense
from privaudit.resources import backbone


@dataclass(frozen=True)
class Sizes:
    """Draws per input: ``release`` for the release tests (a projection each), ``noise`` for
    the noise-step tests, ``laplace`` for the pooled-vector tests (one call each)."""

    release: int = 1200
    noise: int = 50_000
    laplace: int = 6000


#: Smaller samples for the audit a grid run adds to its outputs.
QUICK_SIZES = Sizes(release=600, noise=20_000, laplace=3000)

#: The verdicts, worst first.
VIOLATED, HOLDS, NO_CLAIM, NOT_TESTED = "violated", "holds", "no formal claim", "not tested"


@dataclass
class GuaranteeAudit:
    """The audit of one defense at one level: its claim, every test's evidence and the
    verdict at confidence 1 − α."""

    defense: str
    knob: str | None
    knob_value: float | None
    guarantee: Guarantee
    alpha: float
    seed: int
    evidence: list[Evidence] = field(default_factory=list)
    note: str = ""  # why there is no test, or what the tests left out
    seconds: float = 0.0
    skipped: bool = False  # the defense could not be rebuilt to test (see the note)

    @property
    def violations(self) -> list[Evidence]:
        return [e for e in self.evidence if e.violated]

    @property
    def verdict(self) -> str:
        if self.skipped:
            return NOT_TESTED
        if not self.guarantee.formal:
            return NO_CLAIM
        if not self.evidence:
            return NOT_TESTED
        return VIOLATED if self.violations else HOLDS

    @property
    def best(self) -> Evidence | None:
        """The test with the highest lower bound relative to its claim (a violation's)."""
        if not self.evidence:
            return None
        return max(self.evidence, key=lambda e: (e.violated, e.ratio, e.lower))

    @property
    def level(self) -> str:
        return "-" if self.knob is None else f"{self.knob}={shown(self.knob_value)}"

    def line(self) -> str:
        """One line: the verdict, and for a violation the pair and the event."""
        head = f"{self.defense} {self.level}".replace(" -", "")
        if self.verdict == VIOLATED and self.best is not None:
            e = self.best
            return (
                f"GUARANTEE VIOLATED: {head} claims {self.guarantee.describe().split(';')[0]}, "
                f"but {e.test} test: {e.pair} (d = {e.distance:.3g}), event {e.event}: "
                f"P = {e.k}/{e.n} vs {e.k2}/{e.n2}, privacy loss >= {e.lower:.3g} > claimed "
                f"{e.claimed:.3g} at confidence {1 - self.alpha:.0%}"
            )
        if self.verdict == HOLDS and self.best is not None and self.best.lower <= 0:
            return (
                f"guarantee not contradicted: {head}: no output event told a pair apart "
                f"(lower bounds <= 0, confidence {1 - self.alpha:.0%})"
            )
        if self.verdict == HOLDS and self.best is not None:
            return (
                f"guarantee not contradicted: {head}: largest lower bound {self.best.lower:.3g} "
                f"= {self.best.ratio:.2g} × the claim ({self.best.test} test, confidence "
                f"{1 - self.alpha:.0%})"
            )
        return f"{head}: {self.verdict}{f' ({self.note})' if self.note else ''}"

    @property
    def claim(self) -> str:
        """The claim in a few symbols: ``η=50 d_X per token``, ``ε=3 LDP per coordinate``."""
        g = self.guarantee
        if not g.formal or g.value is None:
            return str(g)
        symbol = {"eta": "η", "eta0": "η0", "epsilon": "ε"}.get(g.parameter, g.parameter)
        kind = {Kind.DX: "d_X", Kind.LDP: "LDP", Kind.DP: "DP"}[g.kind]
        text = f"{symbol}={shown(g.value)} {kind} per {g.unit}"
        return text + (f" (η_m < {shown(g.largest)})" if g.per_unit else "")

    def release_evidence(self) -> Evidence | None:
        """The strongest test of the release itself (not the noise step)."""
        released = [e for e in self.evidence if e.test != "noise step"]
        return max(released, key=lambda e: (e.ratio, e.lower)) if released else None

    def row(self) -> dict[str, Any]:
        """One row of ``guarantees.csv`` / the table (:data:`COLUMNS`)."""
        e = self.best
        eta_hat = (
            e.lower / e.claimed * self.guarantee.value
            if e is not None and self.guarantee.value and 0 < e.claimed < math.inf
            else math.nan
        )
        return {
            "defense": self.defense,
            "knob": self.knob,
            "knob_value": self.knob_value,
            "guarantee": str(self.guarantee),
            "claim": self.claim,
            "kind": str(self.guarantee.kind),
            "verdict": self.verdict,
            "test": e.test if e else "",
            "pair": e.pair if e else "",
            "event": e.event if e else "",
            "distance": e.distance if e else math.nan,
            "claimed_loss": e.claimed if e else math.nan,
            "lower_bound": e.lower if e else math.nan,
            "estimate": eta_hat,
            "ratio": e.ratio if e else math.nan,
            "confidence": 1 - self.alpha,
            "release_bound": r.lower if (r := self.release_evidence()) else math.nan,
            "release_ratio": r.ratio if r else math.nan,
            "tests": len(self.evidence),
            "n": e.n if e else 0,
            "seconds": self.seconds,
            "note": self.note,
            "seed": self.seed,
        }


COLUMNS = [
    "defense", "knob", "knob_value", "guarantee", "claim", "kind", "verdict", "test", "pair",
    "event", "distance", "claimed_loss", "lower_bound", "estimate", "ratio", "confidence",
    "release_bound", "release_ratio", "tests", "n", "seconds", "note", "seed",
]  # fmt: skip


# ---- kernels, looked up where the defense calls them ----------------------------------------
def kernel(defense: Any, name: str) -> Callable[..., Any]:
    """The function ``name`` as the defense's own module sees it now (the first class in its
    MRO whose module defines it): what ``privatize`` calls, patched or not."""
    for cls in type(defense).__mro__:
        func = getattr(sys.modules.get(cls.__module__), name, None)
        if callable(func):
            return func
    raise TypeError(f"{type(defense).__name__} calls no function {name!r} to test.")


def dx_sampler(defense: Any) -> Callable[..., Any]:
    """``sample_dx_noise(n, dim, eta, rng)`` as the defense's code reaches it: imported by its
    module (sap, pct2t) or by the ``token_noise`` it calls (t2t, embedding-dx)."""
    try:
        return kernel(defense, "sample_dx_noise")
    except TypeError:
        found = getattr(kernel(defense, "token_noise"), "__globals__", {}).get("sample_dx_noise")
        if not callable(found):
            raise
        return found


def _single_piece_words(bb: Any, ids: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """The ids among ``ids`` that are alphabetic ASCII words tokenized as exactly themselves
    (so a one-word text is that one token), and their strings."""
    tokens = [str(t) for t in bb.subwords.id_to_token(np.asarray(ids).tolist())]
    keep = [k for k, t in enumerate(tokens) if t.isascii() and t.isalpha()]
    words = [tokens[k] for k in keep]
    back = bb.token_ids(words)
    ok = [m for m, (k, p) in enumerate(zip(keep, back, strict=True))
          if len(p) == 1 and int(p[0]) == int(ids[k])]  # fmt: skip
    return np.asarray([ids[keep[m]] for m in ok], dtype=np.int64), [words[m] for m in ok]


def _texts_for(units: list[int], n: int, word: Callable[[int], str]) -> list[str]:
    return [word(u) for u in units for _ in range(n)]


def _split(values: Sequence[Any], units: list[int], n: int) -> list[list[Any]]:
    return [list(values[k * n : (k + 1) * n]) for k in range(len(units))]


# ---- the plans --------------------------------------------------------------------------------
Plan = tuple[int, Callable[[float, np.random.Generator], list[Evidence]]]


def _dx_token_plans(defense: Any, g: Guarantee, sizes: Sizes, rng: np.random.Generator,
                    backbone_name: str | None) -> list[Plan]:  # fmt: skip
    """t2t, embedding-dx, sap/sap-cti and a user's text privatizer: one-token texts."""

    bb = backbone(backbone_name)
    pool = bb.candidate_ids
    if isinstance(defense, T2T) or not isinstance(defense, (SAP, EmbeddingDX)):
        pool = pool[bb.subwords.classes[pool] == 0]  # word-initial pieces: one-token texts
    ids, words = _single_piece_words(bb, pool)
    word_of = dict(zip(ids.tolist(), words, strict=True))
    pairs = dx.word_pairs(bb.embeddings, ids, rng)
    if g.kind is not Kind.DX:  # ε-LDP/DP per word: any two words are neighbours (distance 1)
        pairs = [(i, j, 1.0) for i, j, _ in pairs]
    plans: list[Plan] = []
    is_sap = isinstance(defense, SAP)
    layer = int(getattr(defense, "split_layer", 0) or 0)

    def name(u: int) -> str:
        return word_of[u]

    if isinstance(defense, EmbeddingDX):

        def draw_vec(units: list[int], n: int, r: np.random.Generator) -> list[np.ndarray]:
            rel = defense.privatize(_texts_for(units, n, name), rng=r)
            return [np.concatenate(v) for v in _split(rel.vectors or [], units, n)]

        plans.append((len(pairs), lambda a, r: dx.vector_release_tests(
            draw_vec, pairs, name, bb.embeddings, g, a=a, n=sizes.release, rng=r)))  # fmt: skip
    elif not (is_sap and layer > 0):

        def draw(units: list[int], n: int, r: np.random.Generator) -> list[list[Hashable]]:
            rel = defense.privatize(_texts_for(units, n, name), rng=r)
            if rel.texts is not None:
                outs: list[Hashable] = [t.strip().lower() for t in rel.content_texts()]
            else:  # token vectors of projected ids: the vector's bytes name the output
                outs = [np.asarray(v, dtype=np.float32).tobytes() for v in rel.vectors or []]
            return _split(outs, units, n)

        def show(values: list[Hashable]) -> list[str]:
            if not values or isinstance(values[0], str):
                return [str(v) for v in values]
            vecs = np.stack([np.frombuffer(v, dtype=np.float32) for v in values])  # type: ignore[arg-type]
            found = bb.index.query(vecs)
            return [str(t) for t in bb.subwords.id_to_token(found.tolist())]

        plans.append((len(pairs), lambda a, r: dx.release_tests(
            draw, pairs, name, g, a=a, n=sizes.release, rng=r, show_many=show)))  # fmt: skip
    if g.kind is Kind.DX and (isinstance(defense, (T2T, EmbeddingDX)) or is_sap):
        sample = dx_sampler(defense)
        factor = getattr(defense, "_budget_factor", None)
        # SAP-CTI: the token with the largest budget η_m, the closest to the claimed 2·η0.
        tok = int(np.argmax(factor)) if factor is not None else int(pairs[0][0])

        def noise(n: int, r: np.random.Generator) -> np.ndarray:
            eta = float(defense.eta)
            if is_sap:
                return sample(n, bb.dim, defense.token_etas(np.full(n, tok), eta), r)
            return sample(n, bb.dim, eta, r)

        plans.append((len(dx.NOISE_MUS), lambda a, r: dx.noise_step_test(
            noise, bb.dim, g, a=a, n=sizes.noise, rng=r)))  # fmt: skip
    return plans


def _pos_plans(defense: Any, g: Guarantee, sizes: Sizes, rng: np.random.Generator) -> list[Plan]:
    """pct2t and rapt: their word kernel on one word of the first selected category."""

    category = resolve_categories(defense.categories)[0]
    vocab = pos_vocabulary(defense.backbone, defense.spacy_model)
    pairs = dx.word_pairs(vocab.vectors, vocab.members(category), rng)

    def name(u: int) -> str:
        return vocab.words[u]

    def draw(units: list[int], n: int, r: np.random.Generator) -> list[list[Hashable]]:
        words = _texts_for(units, n, name)
        out = defense.perturb_words(words, [category] * len(words), float(defense.eta), r)
        return _split([w.lower() for w in out], units, n)

    sample = dx_sampler(defense)
    dim = backbone(defense.backbone).dim
    return [
        (len(pairs), lambda a, r: dx.release_tests(
            draw, pairs, name, g, a=a, n=sizes.release, rng=r,
            test=f"release ({category})")),
        (len(dx.NOISE_MUS), lambda a, r: dx.noise_step_test(
            lambda n, rr: sample(n, dim, float(defense.eta), rr), dim, g, a=a, n=sizes.noise,
            rng=r)),
    ]  # fmt: skip


def _laplace_plans(defense: Any, g: Guarantee, sizes: Sizes) -> list[Plan]:
    """cape and dpnr: the Laplace step (``pooled_release``) on constructed vectors."""

    release = kernel(defense, "pooled_release")
    dim = g.dimension or backbone(defense.backbone).dim
    delta = resolve_sensitivity(defense.sensitivity)
    return [(3, lambda a, r: ldp.laplace_tests(
        release, g, float(defense.epsilon), delta, dim, a=a, n=sizes.laplace, rng=r))]  # fmt: skip


def plan(defense: Defense, sizes: Sizes, rng: np.random.Generator,
         backbone_name: str | None = None) -> tuple[list[Plan], str]:  # fmt: skip
    """The tests for ``defense``'s guarantee, and a note (why none, or what is left out)."""

    g = defense.guarantee
    if not g.formal:
        return [], "no formal claim" if g.kind is Kind.NONE else f"{g.kind}: nothing to test"
    if g.value is not None and math.isinf(g.largest):
        return [], "no noise (the parameter is inf): the claim bounds nothing"
    if isinstance(defense, (CAPE, DPNR)):
        return _laplace_plans(defense, g, sizes), ""
    if isinstance(defense, PCT2T):
        return _pos_plans(defense, g, sizes, rng), ""
    if isinstance(defense, (T2T, EmbeddingDX, SAP)):
        name = getattr(defense, "backbone", None)
        note = ("split layer >= 1: only the noise step is tested"
                if int(getattr(defense, "split_layer", 0) or 0) > 0 else "")  # fmt: skip
        return _dx_token_plans(defense, g, sizes, rng, name), note
    # A user's (or unknown) privatizer: one-word texts through privatize.
    if g.unit not in (Unit.TOKEN, Unit.WORD) or (
        g.kind is Kind.DX and "embedding" not in (g.metric or "embedding")
    ):
        return [], (f"a {g.kind} claim per {g.unit} has no generic test (one-word texts test "
                    "claims per token or word)")  # fmt: skip
    return _dx_token_plans(defense, g, sizes, rng, backbone_name), ""


def audit_guarantee(
    defense: Defense,
    *,
    alpha: float = 0.05,
    seed: int = 0,
    sizes: Sizes | None = None,
    backbone: str | None = None,
    label: str | None = None,
) -> GuaranteeAudit:
    """Test ``defense``'s stated guarantee at its current level: the verdict at confidence
    1 − ``alpha`` with every test's evidence (see the module docstring). ``backbone`` names
    the embeddings of a user privatizer's word pairs (the default backbone if None)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha is a probability in (0, 1), got {alpha!r}.")
    sizes = sizes or Sizes()
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    g = defense.guarantee
    knob = getattr(defense, "knob", None)  # a user wrapper's is set per instance
    knob = knob if isinstance(knob, str) and not knob.startswith("(") else None
    result = GuaranteeAudit(
        label or defense.name, knob, _as_float(defense.knob_value), g, alpha, seed,
    )  # fmt: skip
    plans, result.note = plan(defense, sizes, rng, backbone)
    m = sum(count for count, _ in plans)
    a = alpha / (2 * max(m, 1))
    for _, run in plans:
        result.evidence.extend(run(a, np.random.default_rng(rng.integers(2**63))))
    result.seconds = time.perf_counter() - t0
    return result


def _as_float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def fitted(defense: Defense) -> Defense:
    """SAP-CTI needs token importances from a labelled split: fitted here on a small seeded
    synthetic-reviews sample (public data), as a grid would fit it on its corpus."""
    if isinstance(defense, SAPCTI) and getattr(defense, "_budget_factor", None) is None:
        defense.fit(synthetic_reviews(n_docs=300, seed=0).split("train"))
    return defense


def audit_levels(
    name: str,
    values: Sequence[float] | None = None,
    *,
    params: dict[str, Any] | None = None,
    backbone: str | None = None,
    alpha: float = 0.05,
    seed: int = 0,
    sizes: Sizes | None = None,
) -> list[GuaranteeAudit]:
    """A registered defense at each of ``values`` of its knob (default: its quick ``levels``;
    one audit without a knob)."""

    base = fitted(build_defense(name, dict(params or {}), backbone))
    if base.knob is None:
        return [audit_guarantee(base, alpha=alpha, seed=seed, sizes=sizes)]
    levels = list(values) if values else list(type(base).levels)
    return [audit_guarantee(base.with_knob(v), alpha=alpha, seed=seed, sizes=sizes) for v in levels]


def audit_builtins(
    names: Sequence[str] | None = None,
    *,
    backbone: str | None = None,
    alpha: float = 0.05,
    seed: int = 0,
    sizes: Sizes | None = None,
) -> list[GuaranteeAudit]:
    """Every built-in defense (or ``names``) at its quick levels."""

    out: list[GuaranteeAudit] = []
    for name in names or DEFENSES.builtins():
        out.extend(audit_levels(name, backbone=backbone, alpha=alpha, seed=seed, sizes=sizes))
    return out


def audit_points(
    frame: Any,
    *,
    alpha: float = 0.05,
    seed: int = 0,
    sizes: Sizes | None = None,
) -> list[GuaranteeAudit]:
    """Each defense point of a results table once (its ``defense``, ``defense_params`` — the
    knob value among them — ``label`` and ``guarantee``): what a run's outputs add as
    ``guarantees.csv``. A user's privatizer (parameters with its ``target``) is rebuilt
    through its wrapper; a defense that cannot be rebuilt here (registered only in another
    process) is a row "not tested" with the reason, and the others are still audited."""
    points = frame[["defense", "defense_params", "label", "guarantee"]].drop_duplicates(
        ["defense", "defense_params", "label"]
    )
    out = []
    # One fitted defense per (name, parameters but the knob): its levels are with_knob copies,
    # so SAP-CTI's token importances are learned once, not once per level.
    bases: dict[tuple[str, str], Defense] = {}
    for name, params_json, label, stated in points.itertuples(index=False):
        shown_as = str(label) if isinstance(label, str) and label else str(name)
        params = json.loads(params_json) if isinstance(params_json, str) else {}
        try:
            if "target" in params:
                defense: Defense = UserDefense(**params)
                defense.fit([])
            else:
                knob = getattr(DEFENSES.get(str(name)), "knob", None)
                rest = {k: v for k, v in params.items() if k != knob}
                key = (str(name), json.dumps(rest, sort_keys=True, default=str))
                if key not in bases:
                    bases[key] = fitted(build_defense(str(name), params, params.get("backbone")))
                defense = bases[key]
                if knob is not None and knob in params:
                    defense = defense.with_knob(params[knob])
        except (ValueError, TypeError, ImportError) as exc:
            skipped = GuaranteeAudit(shown_as, None, None, Guarantee.stated(str(stated)), alpha,
                                     seed, note=f"not rebuilt: {exc}", skipped=True)  # fmt: skip
            out.append(skipped)
            continue
        out.append(audit_guarantee(defense, alpha=alpha, seed=seed,
                                   sizes=sizes or QUICK_SIZES, label=shown_as))  # fmt: skip
    return out


def to_frame(audits: Sequence[GuaranteeAudit]) -> Any:
    """The table (``guarantees.csv``): one row per defense and level, columns :data:`COLUMNS`."""
    return pd.DataFrame([a.row() for a in audits], columns=COLUMNS)
