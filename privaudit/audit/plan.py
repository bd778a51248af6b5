"""Planning a grid: every component built (so every name and value is checked) before any
work, and every defense point listed with its privacy level.

A defense spec is built and fitted once; each privacy level is ``with_knob(value)`` of that
fitted defense (calibrated levels come from :mod:`privaudit.audit.calibration`, cached in the
result store). Keys hash what a result depends on, so a changed component recomputes only its
own cells.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from privaudit.api import Defense
from privaudit.audit.calibration import calibrate
from privaudit.models.backbone import backbone as load_backbone

if TYPE_CHECKING:
    from privaudit.audit.config import GridConfig
    from privaudit.audit.store import ResultStore


class Fitted(Protocol):
    """What planning reads of the grid's context (:class:`privaudit.audit.cells.Context`)."""

    fingerprint: str
    bb: Any
    train_texts: list[str]

    def base(self, spec: int) -> Defense: ...


@dataclass(frozen=True)
class Point:
    """One privacy level of one defense spec at one seed: privatized once, utility measured
    once, then attacked by every attack. Picklable, so executors can ship it to workers."""

    label: str
    spec: int  # index into the config's defenses
    defense: str
    knob_value: float | None  # the level (None: the defense has no knob): what its rows show
    target_rate: float | None
    seed: int


def stable_seed(*parts: object) -> np.random.SeedSequence:
    """A seed sequence from the run seed and a cell's identity (stable across processes)."""
    words = [zlib.crc32(json.dumps(p, sort_keys=True, default=str).encode()) for p in parts]
    return np.random.SeedSequence(words)


def cell_key(*parts: object) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def fmt_params(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def identity(defense: Defense, corpus_fp: str, backbone_fp: str, seed: int) -> list[Any]:
    """What a defense point's results depend on (component name, version, parameters, corpus,
    backbone, seed): the base of every cell key."""
    return [defense.name, defense.version, defense.params(), corpus_fp, backbone_fp, seed]


def plan(config: GridConfig, ctx: Fitted, store: ResultStore | None = None) -> list[Point]:
    """Every defense point of the grid, with calibrated knob values resolved (and cached)."""
    points: list[Point] = []
    for i, spec in enumerate(config.defenses):
        base = ctx.base(i)
        # Unswept: the configured level, so that every point holds the value its rows show.
        levels: list[tuple[float | None, float | None]] = [(base.knob_value, None)]
        if spec.knob_values:
            levels = [(v, None) for v in spec.knob_values]
        elif spec.target_rates:
            key = calibration_key(config, i, base, (ctx.fingerprint, ctx.bb.fingerprint))
            cached = store.get(key) if store is not None else None
            if cached is None:
                levels = _calibrated_levels(
                    base, spec.target_rates, ctx.train_texts, config.seeds[0]
                )
                if store is not None:
                    store.put(key, {"kind": "calibration", "levels": levels})
            else:
                levels = [tuple(level) for level in cached["levels"]]  # type: ignore[misc]
        for value, target in levels:
            for seed in config.seeds:
                points.append(Point(spec.display, i, spec.name, value, target, seed))
    return points


def calibration_key(
    config: GridConfig, spec: int, base: Defense, fingerprints: tuple[str, str]
) -> str:
    """The store key of defense spec ``spec``'s calibrated levels (corpus and backbone
    ``fingerprints``; the first seed calibrates)."""
    rates = config.defenses[spec].target_rates
    return cell_key("calibration", identity(base, *fingerprints, config.seeds[0]), rates)


def check_levels(config: GridConfig, defenses: list[Defense]) -> None:
    """Every configured knob value is one its defense's knob declaration allows (before any
    work: ``with_knob`` checks the value)."""
    for i, (spec, defense) in enumerate(zip(config.defenses, defenses, strict=True)):
        for value in spec.knob_values or []:
            try:
                defense.with_knob(value)
            except ValueError as exc:
                raise ValueError(f"defenses.{i}.knob_values: {exc}") from None
    for i, defense in enumerate(defenses):
        _check_layers(i, defense, config.backbone)


#: A defense's parameters that name an encoder layer, and the lowest each may be.
_LAYER_PARAMS = {"layer": 1, "split_layer": 0}


def _check_layers(i: int, defense: Defense, default_backbone: str) -> None:
    """A layer parameter within the backbone's layers, before any work (else every cell of
    the defense fails late, each with the same error)."""
    for param, lowest in _LAYER_PARAMS.items():
        layer = getattr(defense, param, None)
        if layer is None or isinstance(layer, bool) or not isinstance(layer, int):
            continue
        bb = load_backbone(getattr(defense, "backbone", None) or default_backbone)
        if not lowest <= layer <= bb.n_layers:
            raise ValueError(
                f"defenses.{i}.params.{param}: {layer} is outside {lowest}..{bb.n_layers}, the "
                f"layers of backbone {bb.name!r}; give a {param} in that range."
            )


def _calibrated_levels(
    defense: Defense, rates: list[float], texts: list[str], seed: int, n_docs: int = 150
) -> list[tuple[float | None, float | None]]:
    """Knob values reaching each target replacement rate on a seeded sample of ``texts``."""
    rng = np.random.default_rng(seed)
    sample = [texts[i] for i in sorted(rng.choice(len(texts), min(n_docs, len(texts)), False))]
    out: list[tuple[float | None, float | None]] = []
    known: dict[float, float] = {}
    for rate in rates:
        result = calibrate(defense, sample, target=rate, seed=seed, known=known)
        out.append((result.solution, rate))
    return out


# -- The random streams and victims of a point's cells ------------------------------------


def point_streams(point: Point, defense: Defense) -> list[np.random.Generator]:
    """The point's train, test, utility and attacker-query streams (same point, same draws)."""
    seq = stable_seed(point.seed, defense.name, defense.params())
    return [np.random.default_rng(s) for s in seq.spawn(4)]


def victim_subset(n: int, cap: int | None, seed: int) -> np.ndarray | None:
    """The test documents an attack with ``max_victims = cap`` scores: ``cap`` of the ``n``
    drawn with the run seed alone, so every point and every capped attack scores the same
    victims (paired comparisons stay paired); None when it scores all of them."""
    if cap is None or n <= cap:
        return None
    rng = np.random.default_rng(stable_seed(seed, "victims"))
    return np.sort(rng.choice(n, size=int(cap), replace=False))


def attack_rng(point: Point, defense: Defense, label: str) -> np.random.Generator:
    """The attack cell's own stream (seed, defense, params, attack label)."""
    return np.random.default_rng(
        stable_seed(point.seed, defense.name, defense.params(), "attack", label)
    )
