"""The grid runner: every defense at every privacy level, attacked by every attack.

For each (defense, knob value, seed) the runner privatizes the corpus's train and test splits
once, measures utility on them, and hands the *public* test release (victims) to each attack.
Attacks learn only from what their threat model grants (the backbone, query access to the
mechanism on the attacker's own ``aux`` split, the ``aux`` labels); the runner alone holds the
truth and scores predictions. An inapplicable pair is a row with status ``n/a`` and the reason;
a failing cell is a row with status ``failed`` and the error, and the grid goes on. Rows are
written after every defense point, so an interruption never loses finished cells.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import traceback
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from privaudit import __version__
from privaudit.api import Attack, Defense, Knowledge, Release
from privaudit.audit.config import GridConfig
from privaudit.audit.scoring import Truth, replacement_rate, score_predictions
from privaudit.registry import ATTACKS, CORPORA, DEFENSES, UTILITY

COLUMNS = [
    "defense", "knob", "knob_value", "attack", "seed", "status", "reason",
    "attack_metric", "attack_score", "empirical_privacy", "utility_metric", "utility",
    "utility_macro_f1", "replacement_rate", "seconds", "privatize_seconds", "utility_seconds",
    "attack_seconds", "guarantee", "defense_params", "attack_params", "utility_evaluator",
    "corpus", "corpus_fingerprint", "backbone", "n_train", "n_test", "privaudit_version",
    "cell_key", "target_rate", "label", "attack_baseline", "attack_macro_f1", "attack_details",
]  # fmt: skip


@dataclass
class RunResult:
    run_dir: Path
    frame: Any  # pandas.DataFrame
    plots: list[Path] = field(default_factory=list)
    chance: float = float("nan")


def stable_seed(*parts: object) -> np.random.SeedSequence:
    """A seed sequence from the run seed and the cell's identity (stable across processes)."""
    words = [zlib.crc32(json.dumps(p, sort_keys=True, default=str).encode()) for p in parts]
    return np.random.SeedSequence(words)


def _evaluator_label(evaluator: Any) -> str:
    """``probe``, ``lora``, ...; ``peft[method]`` when the generic peft evaluator is used."""
    method = getattr(evaluator, "method", None)
    return evaluator.name if method in (None, evaluator.name) else f"{evaluator.name}[{method}]"


def _cell_key(*parts: object) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _fmt_params(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def build_defense(name: str, params: dict[str, Any], backbone: str | None) -> Defense:
    cls = DEFENSES.get(name)
    kwargs = dict(params)
    if backbone is not None and "backbone" in _init_params(cls):
        kwargs.setdefault("backbone", backbone)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(
            f"Defense {name!r} does not accept parameters {sorted(params)}: {exc}. "
            f"It accepts {sorted(_init_params(cls))}."
        ) from None


def _init_params(cls: type) -> set[str]:
    import inspect

    return set(inspect.signature(cls.__init__).parameters) - {"self"}


def _write_rows(rows: list[dict[str, Any]], run_dir: Path) -> Any:
    import pandas as pd

    frame = pd.DataFrame(rows, columns=COLUMNS)
    for name, writer in (
        ("results.csv", lambda p: frame.to_csv(p, index=False)),
        ("results.parquet", lambda p: frame.to_parquet(p, index=False)),
    ):
        tmp = run_dir / f".{name}.tmp"
        writer(tmp)
        os.replace(tmp, run_dir / name)  # atomic: readers never see half a file
    return frame


def run_grid(
    config: GridConfig,
    *,
    reports_root: str | Path = "reports",
    run_dir: str | Path | None = None,
    progress: bool = True,
) -> RunResult:
    """Run every cell of ``config`` and write ``results.csv``/``.parquet`` and Pareto plots."""
    from tqdm.auto import tqdm

    from privaudit.leaderboard.pareto import plot_pareto
    from privaudit.resources import backbone as load_backbone

    config.check_names()
    if run_dir is None:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        run_dir = Path(reports_root) / f"{stamp}-{config.name}"
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(config.model_dump_json(indent=2), encoding="utf-8")

    corpus_factory = CORPORA.get(config.corpus.name)
    corpus = corpus_factory(**config.corpus.params)
    base_seed = config.seeds[0]
    corpus = corpus.subset(config.corpus.limits, np.random.default_rng(base_seed))
    fingerprint = corpus.fingerprint()
    bb = load_backbone(config.backbone)
    train_texts, test_texts = corpus.texts("train"), corpus.texts("test")
    y_train, y_test = corpus.labels("train"), corpus.labels("test")
    truth = Truth(  # the runner's ground truth; attacks never see it
        tokens=bb.token_ids(test_texts),
        attributes={a: corpus.attribute("test", a) for a in corpus.attribute_names},
        texts=list(test_texts),
        entities=corpus.entities("test"),
        embeddings=bb.embeddings,
        frequent_token=_most_frequent_token(bb, corpus.texts("aux"))
        if "aux" in corpus.splits
        else None,
    )
    aux = corpus.splits.get("aux")
    chance = float(np.bincount(y_test).max() / len(y_test)) if len(y_test) else float("nan")
    # The service's own labels for training-time objectives (CAPE's adversary), train split only.
    train_attributes = {a: corpus.attribute("train", a) for a in corpus.attribute_names}

    util_spec = config.utility_spec()
    util_cls = UTILITY.get(util_spec.name)
    util_kwargs = dict(util_spec.params)
    if "backbone" in _init_params(util_cls):
        util_kwargs.setdefault("backbone", config.backbone)
    try:
        evaluator = util_cls(**util_kwargs)
    except TypeError as exc:
        raise ValueError(
            f"Utility {util_spec.name!r} does not accept parameters {sorted(util_spec.params)}: "
            f"{exc}. It accepts {sorted(_init_params(util_cls) - {'self'})}."
        ) from None
    if hasattr(evaluator, "settings"):
        evaluator.settings()  # bad values fail before any work starts
    attacks: list[tuple[str, Attack]] = []  # (label in results, attack)
    for spec in config.attack_specs():
        cls = ATTACKS.get(spec.name)
        kwargs = dict(spec.params)
        if "backbone" in _init_params(cls):
            kwargs.setdefault("backbone", config.backbone)
        try:
            attacks.append((spec.display(), cls(**kwargs)))
        except TypeError as exc:
            raise ValueError(
                f"Attack {spec.name!r} does not accept parameters {sorted(spec.params)}: {exc}. "
                f"It accepts {sorted(_init_params(cls) - {'self'})}."
            ) from None

    points: list[tuple[str, Defense, float | None, float | None, int]] = []
    for spec in config.defenses:
        base = build_defense(spec.name, spec.params, config.backbone).fit(corpus.split("train"))
        levels: list[tuple[float | None, float | None]] = [(None, None)]
        if spec.knob_values:
            levels = [(v, None) for v in spec.knob_values]
        elif spec.target_rates:
            levels = _calibrated_levels(base, spec.target_rates, train_texts, base_seed)
        for value, target in levels:
            defense = base if value is None else base.with_knob(value).fit(corpus.split("train"))
            for seed in config.seeds:
                points.append((spec.display, defense, value, target, seed))

    rows: list[dict[str, Any]] = []
    bar = tqdm(total=len(points) * len(attacks), desc="cells", unit="cell", disable=not progress)
    for label, defense, value, target, seed in points:
        knob_value = value if value is not None else getattr(defense, defense.knob or "", None)
        common = {
            "defense": defense.name,
            "label": label,
            "knob": defense.knob,
            "knob_value": float(knob_value) if knob_value is not None else math.nan,
            "seed": seed,
            "target_rate": target if target is not None else math.nan,
            "guarantee": defense.guarantee,
            "defense_params": _fmt_params(defense.params()),
            "utility_evaluator": _evaluator_label(evaluator),
            "utility_metric": evaluator.metric,
            "corpus": corpus.name,
            "corpus_fingerprint": fingerprint,
            "backbone": bb.name,
            "n_train": len(train_texts),
            "n_test": len(test_texts),
            "privaudit_version": __version__,
        }
        level = f" {defense.knob}={common['knob_value']:g}" if defense.knob else ""
        bar.set_postfix_str(f"{label}{level}")
        seq = stable_seed(seed, defense.name, defense.params())
        rng_train, rng_test, rng_utility, rng_query = (
            np.random.default_rng(s) for s in seq.spawn(4)
        )
        try:
            t0 = time.perf_counter()
            rel_train = defense.privatize(train_texts, rng=rng_train)
            rel_test = defense.privatize(test_texts, rng=rng_test)
            privatize_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            util = evaluator.evaluate_releases(
                rel_train, y_train, rel_test, y_test, rng=rng_utility, defense=defense,
                train_attributes=train_attributes,
            )  # fmt: skip
            utility_s = time.perf_counter() - t0
            common |= {
                "utility": util.get(evaluator.metric, math.nan),
                "utility_macro_f1": util.get("macro_f1", math.nan),
                "replacement_rate": replacement_rate([rel_train.audit, rel_test.audit])
                if defense.name != "none"
                else 0.0,
                "privatize_seconds": privatize_s,
                "utility_seconds": utility_s,
            }
        except Exception as exc:  # a failing defense point must not end the grid
            for label, attack in attacks:
                rows.append(
                    common
                    | _failed(label, attack, exc)
                    | {"cell_key": _cell_key(common["defense_params"], label, seed)}
                )
                bar.update()
            _write_rows(rows, run_dir)
            continue

        query = _memoized_query(defense, rng_query)

        knowledge = Knowledge(
            white_box=True, backbone=config.backbone, query_mechanism=query, aux=aux
        )
        public = rel_test.public()
        for label, attack in attacks:
            row = common | {
                "attack": label,
                "attack_metric": attack.metric,
                "attack_params": _fmt_params(attack.params()),
                "cell_key": _cell_key(
                    defense.name, common["defense_params"], attack.name, attack.params(),
                    evaluator.params(), fingerprint, bb.fingerprint, seed, __version__,
                ),
            }  # fmt: skip
            reason = attack.applicable(public.kind, knowledge, public.meta)
            if reason is not None:
                rows.append(row | {"status": "n/a", "reason": reason})
                bar.update()
                continue
            try:
                t0 = time.perf_counter()
                predictions = attack.fit(knowledge).attack(public)
                scored = score_predictions(predictions, truth, attack.metric, public)
                attack_s = time.perf_counter() - t0
                for result in scored:
                    target = result.pop("target")
                    result["attack_details"] = _fmt_params(result.get("attack_details", {}))
                    rows.append(
                        row
                        | result
                        | {
                            "attack": f"{label}[{target}]" if target else label,
                            "status": "ok",
                            "reason": "",
                            "attack_seconds": attack_s,
                            "seconds": privatize_s + utility_s + attack_s,
                            "cell_key": _cell_key(row["cell_key"], target),
                        }
                    )
            except Exception as exc:
                rows.append(row | _failed(label, attack, exc))
            bar.update()
        _write_rows(rows, run_dir)
    bar.close()

    frame = _write_rows(rows, run_dir)
    plots = []
    ok = frame[frame["status"] == "ok"]
    for attack_name in sorted(ok["attack"].unique()):
        sub = ok[ok["attack"] == attack_name]
        safe = attack_name.replace("[", "-").replace("]", "")
        path = run_dir / f"pareto_{safe}.png"
        plot_pareto(sub, path, attack=attack_name, chance=chance)
        plots.append(path)
    meta = {"chance_accuracy": chance, "corpus_sizes": corpus.sizes(), "backbone": bb.name}
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return RunResult(run_dir=run_dir, frame=frame, plots=plots, chance=chance)


def _most_frequent_token(bb: Any, texts: list[str]) -> int | None:
    counts = np.bincount(np.concatenate([np.asarray(t, np.int64) for t in bb.token_ids(texts)]))
    return int(counts.argmax()) if counts.size else None


def _memoized_query(defense: Defense, rng: np.random.Generator) -> Any:
    """The attacker's query access to the mechanism at this privacy level. Several attacks
    query the same aux texts; they share one privatization (one draw of the mechanism, as a
    single attacker holding the aux release would) instead of paying for it each time."""
    cache: dict[str, Release] = {}

    def query(texts: list[str]) -> Release:
        key = hashlib.sha256(json.dumps(list(texts)).encode()).hexdigest()
        if key not in cache:
            cache[key] = defense.privatize(list(texts), rng=rng).public()
        return cache[key]

    return query


def _calibrated_levels(
    defense: Defense, rates: list[float], texts: list[str], seed: int, n_docs: int = 150
) -> list[tuple[float | None, float | None]]:
    """Knob values reaching each target replacement rate on a seeded sample of ``texts``."""
    from privaudit.audit.calibration import calibrate

    rng = np.random.default_rng(seed)
    sample = [texts[i] for i in sorted(rng.choice(len(texts), min(n_docs, len(texts)), False))]
    out: list[tuple[float | None, float | None]] = []
    known: dict[float, float] = {}
    for rate in rates:
        result = calibrate(defense, sample, target=rate, seed=seed, known=known)
        out.append((result.solution, rate))
    return out


def _failed(label: str, attack: Attack, exc: BaseException) -> dict[str, Any]:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" at {last[0].filename}:{last[0].lineno}" if last else ""
    return {
        "attack": label,
        "attack_metric": attack.metric,
        "attack_params": _fmt_params(attack.params()),
        "status": "failed",
        "reason": f"{type(exc).__name__}: {exc}{where}",
    }
