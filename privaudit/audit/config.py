"""Grid configurations, validated with pydantic; a preset's name loads it
(:mod:`privaudit.audit.presets`: ``quick``, ``paper``, ``smoke``, ``real``, ...).

Labels are identities: results, plots and the leaderboard key every row by a defense's display
label (``label``, else ``name[params]``), so the config refuses two entries sharing one, and
the label ``none`` on any but the ``none`` defense.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from privaudit.api import NONE
from privaudit.audit.presets import PRESETS
from privaudit.registry import ATTACKS, CORPORA, DEFENSES, UTILITY
from privaudit.runtime.devices import check_device


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


_LABEL_FORBIDDEN = re.compile(r"[/\\\x00-\x1f]")


def _check_label(label: str | None) -> str | None:
    """Labels name files (plots) and table rows: no path separators or control characters."""
    if label is not None:
        if not label.strip():
            raise ValueError("a label must not be empty")
        bad = _LABEL_FORBIDDEN.search(label)
        if bad:
            raise ValueError(
                f"a label may not contain {bad.group()!r} (path separators and control "
                f"characters name no file), got {label!r}"
            )
    return label


class CorpusSpec(_Strict):
    name: str = "synthetic-reviews"
    params: dict[str, Any] = Field(default_factory=dict)
    limits: dict[str, int | None] = Field(
        default_factory=dict, description="at most this many documents per split"
    )


class DefenseSpec(_Strict):
    name: str
    label: str | None = Field(
        default=None, description="name in tables and plots (default: name[param=value,...])"
    )
    params: dict[str, Any] = Field(default_factory=dict)

    @property
    def display(self) -> str:
        """The entry's identity in every table, plot and leaderboard row: its ``label``, else
        ``name[param=value,...]`` (``backbone`` and ``spacy_model`` not shown). No two entries
        of a grid share one (:meth:`GridConfig._distinct_labels`)."""
        if self.label:
            return self.label
        shown = {k: v for k, v in self.params.items() if k not in ("backbone", "spacy_model")}
        if not shown:
            return self.name
        return f"{self.name}[{','.join(f'{k}={v}' for k, v in sorted(shown.items()))}]"

    knob_values: list[float] | None = Field(
        default=None, description="values of the defense's privacy knob to sweep"
    )
    target_rates: list[float] | None = Field(
        default=None,
        description="privacy levels as target replacement rates, calibrated to knob values "
        "on the corpus's train split before the grid runs (defenses with an eta-like knob)",
    )

    _label = field_validator("label")(classmethod(lambda cls, v: _check_label(v)))

    @field_validator("target_rates")
    @classmethod
    def _rates(cls, values: list[float] | None) -> list[float] | None:
        if values is not None:
            if not values:
                raise ValueError("target_rates is empty; give at least one rate or omit it")
            if any(not 0 < v < 1 for v in values):  # the values given are appended once
                raise ValueError("target rates must lie strictly between 0 and 1")
            _once(values, "target_rates")
        return values

    @field_validator("knob_values")
    @classmethod
    def _listed(cls, values: list[float] | None) -> list[float] | None:
        # What a value may be is the defense's knob declaration's, checked when the grid is
        # planned (privaudit.audit.plan.check_levels); here only the list itself.
        if values is not None:
            if not values:
                raise ValueError("knob_values is empty; give at least one value or omit it")
            _once(values, "knob_values")
        return values


class AttackSpec(_Strict):
    """An attack by name, with constructor parameters (e.g. cost bounds)."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)
    label: str | None = Field(
        default=None,
        description="name of this attack in results and plots (default: the attack's name); "
        "needed when one attack is listed twice with different parameters",
    )

    _label = field_validator("label")(classmethod(lambda cls, v: _check_label(v)))

    def display(self) -> str:
        return self.label or self.name


class UtilitySpec(_Strict):
    """A utility evaluator by name (``probe``, ``peft``, ``prompt-tuning``, ``prefix-tuning``,
    ``lora``, ``fine-tuning``), with constructor parameters (e.g. ``profile``, ``epochs``)."""

    name: str = "probe"
    params: dict[str, Any] = Field(default_factory=dict)


class ExecutorSpec(_Strict):
    """Where cells run: ``local`` (``jobs`` worker processes; 1 = in the driver) or ``ray``
    (an existing cluster at ``address``, ``auto`` or ``HOST:PORT``; none = a local one)."""

    kind: Literal["local", "ray"] = "local"
    jobs: int = Field(default=1, ge=1, description="parallel worker processes (local)")
    address: str | None = None


class BootstrapSpec(_Strict):
    """The run's confidence intervals: percentile bootstrap over the victims' units (people
    where the corpus declares authors, else documents), one set of ``resamples`` resamples per
    run (seeded by ``seed``) shared by every cell, so that two
    defenses' scores on a resample are paired. An output option: no cell key depends on it."""

    resamples: int = Field(default=1000, ge=10, le=100_000, description="bootstrap resamples")
    level: float = Field(default=0.95, gt=0, lt=1, description="interval coverage")
    seed: int = Field(default=0, ge=0, description="seed of the run's resample indices")


class FitNoiseSpec(_Strict):
    """Measured fit noise (:mod:`privaudit.audit.fit_noise`): ``refits`` more fits of every
    random fit at the undefended point; no cell key depends on it."""

    refits: int = Field(default=2, ge=0, le=20, description="refits per random fit")


class StrengthSpec(_Strict):
    """The attack-strength curve (:mod:`privaudit.audit.strength`): at the undefended ``none``
    point, each attack that learns from the attacker's aux is fitted again on these shares of
    the aux documents (nested seeded subsamples); 1.0 is the grid's own cell, reused. With
    ``public_fractions``, each attack that pre-trains on public text (``Attack.public_data``:
    geia, vec2text) is also fitted with a model pre-trained on those shares of its public
    documents (each a one-time pre-training, cached on disk like the grid's own)."""

    fractions: list[Any] = Field(
        default_factory=lambda: [0.25, 0.5, 1.0],
        description="shares of the attacker's aux documents, each in (0, 1]",
    )
    public_fractions: list[Any] = Field(
        default_factory=list,
        description="shares of the public pre-training documents, each in (0, 1]; each "
        "share pre-trains another model once (geia, vec2text)",
    )

    @field_validator("fractions")
    @classmethod
    def _fractions(cls, values: list[Any]) -> list[float]:
        if not values:
            raise ValueError(
                "fractions is empty; give at least one share of the aux, "
                "e.g. strength: {fractions: [0.25, 0.5, 1.0]}"
            )
        return _shares(values, "fractions", "the aux")

    @field_validator("public_fractions")
    @classmethod
    def _public_fractions(cls, values: list[Any]) -> list[float]:
        return _shares(values, "public_fractions", "the public documents")

    def levels(self) -> list[float]:
        """The curve's shares, ascending, without repeats, always ending at 1.0 (the grid's
        own cell)."""
        return sorted({*self.fractions, 1.0})

    def public_levels(self) -> list[float]:
        """The public-data curve's shares, as :meth:`levels`; empty when none is asked for."""
        return sorted({*self.public_fractions, 1.0}) if self.public_fractions else []


def _once(values: list[Any], key: str) -> None:
    """Refuse a value given twice (10 and 10.0 are one): it would give duplicate rows."""
    seen: set[float] = set()
    for v in values:
        if float(v) in seen:
            raise ValueError(f"{v!r} is given twice (equal as numbers); give each value once")
        seen.add(float(v))


def _shares(values: list[Any], key: str, of: str) -> list[float]:
    example = f"e.g. strength: {{{key}: [0.25, 0.5, 1.0]}}"
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(f"{v!r} is not a number; give shares of {of} in (0, 1], {example}")
        if not 0 < v <= 1:
            raise ValueError(
                f"{v!r} is not in (0, 1]; a share of {of} is above 0 and at most 1, {example}"
            )
    _once(values, key)
    return [float(v) for v in values]


class GridConfig(_Strict):
    name: str = "custom"
    corpus: CorpusSpec = Field(default_factory=CorpusSpec)
    backbone: str | None = None
    defenses: list[DefenseSpec]
    attacks: list[str | AttackSpec] = Field(
        description="attack names, or {name, params} to set an attack's parameters"
    )
    utility: str | UtilitySpec = Field(
        default="service",
        description="utility evaluator name, or {name, params} (e.g. {name: lora, params: "
        "{profile: quick}})",
    )
    seeds: list[Annotated[int, Field(ge=0)]] = Field(
        default_factory=lambda: [0], description="run seeds (non-negative integers)"
    )
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)
    show_examples: bool = Field(
        default=False,
        description="keep a few original/released text pairs per point in the run directory "
        "(examples.json) for `report --show-examples`; off by default, so the run directory "
        "holds no corpus text. An output option: it changes no cell key and no result",
    )
    bootstrap: BootstrapSpec = Field(
        default_factory=BootstrapSpec,
        description="confidence intervals: {resamples, level, seed} (an output option)",
    )
    strength: StrengthSpec | None = Field(
        default=None,
        description="the attack-strength curve: {fractions: [0.25, 0.5, 1.0]} refits each "
        "aux-trained attack at the undefended point on these shares of the aux (strength.csv, "
        "strength.png, the report's Attack strength section); derived from the cells, so an "
        "output option: --resume may add it",
    )
    fit_noise: FitNoiseSpec = Field(
        default_factory=lambda: FitNoiseSpec(),
        description="measured fit noise: {refits: 2} refits of every random fit (attacks "
        "declaring fit_sd > 0, the service) at the undefended point (fit_noise.csv); the "
        "board uses the larger of the measured and the declared spread; refits 0 uses the "
        "declarations alone. Derived from the cells: --resume may add it",
    )
    device: str = Field(
        default="auto",
        description="where torch runs: auto (a GPU when torch sees one), cpu, cuda, cuda:N or "
        "mps. Outside every cell key (recorded in run.json's provenance): a GPU's numbers may "
        "differ slightly from the CPU's, and --resume may continue on another device",
    )

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        return check_device(value)

    @model_validator(mode="after")
    def _strength_needs_none(self) -> GridConfig:
        """The strength curve is measured against the undefended release."""
        if self.strength is not None and not any(d.name == NONE for d in self.defenses):
            raise ValueError(
                "strength: the attack-strength curve is measured at the undefended point; add "
                f"{{name: {NONE}}} to defenses, or remove strength"
            )
        return self

    @model_validator(mode="after")
    def _distinct_labels(self) -> GridConfig:
        """Labels are identities: results, plots and the leaderboard key every row by its
        defense's display label, so two entries sharing one would be merged into one defense,
        and any entry shown as ``none`` would be folded into the undefended baseline."""
        seen: dict[str, int] = {}
        for i, spec in enumerate(self.defenses):
            shown = spec.display.strip()
            if shown.lower() == NONE and spec.name != NONE:
                raise ValueError(
                    f"defenses.{i} ({spec.name}) is labelled {spec.display!r}, the undefended "
                    "baseline's label: give it another label"
                )
            if shown in seen:
                how = "" if spec.label else " (the default label, name[params])"
                raise ValueError(
                    f"defenses.{seen[shown]} and defenses.{i} are both labelled {shown!r}{how}: "
                    "give each a distinct label"
                    + ("" if spec.label else ", or merge their knob_values into one entry")
                )
            seen[shown] = i
        return self

    @field_validator("defenses", "attacks", "seeds")
    @classmethod
    def _non_empty(cls, values: list[Any]) -> list[Any]:
        if not values:
            raise ValueError("must list at least one entry")
        return values

    def check_names(self) -> None:
        """Resolve every component name now, so a typo fails before any work starts."""

        def resolve(registry: Any, name: str, where: str) -> Any:
            try:
                return registry.get(name)
            except ValueError as exc:  # name the field, then the registry's hint
                raise ValueError(f"{where}: {exc}") from None

        resolve(CORPORA, self.corpus.name, "corpus.name")
        resolve(UTILITY, self.utility_spec().name, "utility")
        for i, d in enumerate(self.defenses):
            cls = resolve(DEFENSES, d.name, f"defenses.{i}.name")
            given = "knob_values" if d.knob_values else "target_rates"
            if (d.knob_values or d.target_rates) and getattr(cls, "knob", None) is None:
                raise ValueError(
                    f"defenses.{i}.{given}: defense {d.name!r} has no privacy knob; remove "
                    f"{given} (it runs once, at its only setting)."
                )
            if d.target_rates and not getattr(cls, "calibrates_by_rate", True):
                raise ValueError(
                    f"defenses.{i}.target_rates: defense {d.name!r} has no replacement-rate "
                    f"knob, so target rates cannot be calibrated; give knob_values instead."
                )
            if d.knob_values and d.target_rates:
                raise ValueError(f"Defense {d.name!r}: give knob_values or target_rates, not both.")
        seen: set[str] = set()
        for i, a in enumerate(self.attack_specs()):
            resolve(ATTACKS, a.name, f"attacks.{i}")
            if a.display() in seen:
                raise ValueError(
                    f"Attack {a.display()!r} is listed twice; give each entry a distinct "
                    "'label' (e.g. {name: has-deanonymization, label: hasdeanon-wb, "
                    "params: {white_box: true}})."
                )
            seen.add(a.display())

    def utility_spec(self) -> UtilitySpec:
        return UtilitySpec(name=self.utility) if isinstance(self.utility, str) else self.utility

    def attack_specs(self) -> list[AttackSpec]:
        return [AttackSpec(name=a) if isinstance(a, str) else a for a in self.attacks]


def load_config(source: str | Path | dict[str, Any]) -> GridConfig:
    """A preset name, a YAML/JSON file, or a dict → a validated :class:`GridConfig`."""
    if isinstance(source, dict):
        data = source
    elif str(source) in PRESETS:
        data = PRESETS[str(source)]
    else:
        path = Path(source)
        if not path.is_file():
            raise ValueError(
                f"'{source}' is neither a preset ({', '.join(PRESETS)}) nor a config file."
            )
        data = _parse(path)
    if not isinstance(data, dict):
        raise ValueError(f"A grid config is a mapping of fields, got {type(data).__name__}.")
    try:
        return GridConfig.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # ``attacks: [name | {name, ...}]``: drop the "not a string" branch of a mapping entry
        mapped = {tuple(e["loc"][:2]) for e in errors if len(e["loc"]) > 3}
        errors = [
            e for e in errors if not (e["loc"][-1:] == ("str",) and tuple(e["loc"][:2]) in mapped)
        ]
        # a misspelt field is one error ("did you mean"), not also "the right one is missing"
        suggested = {_suggestion(e) for e in errors if e["type"] == "extra_forbidden"}
        errors = [
            e
            for e in errors
            if e["type"] != "missing" or (tuple(e["loc"][:-1]), e["loc"][-1]) not in suggested
        ]
        lines = [_error_line(e) for e in errors]
        if len(lines) == 1:
            raise ValueError(f"Invalid grid config: {lines[0]}") from None
        raise ValueError("Invalid grid config:\n  " + "\n  ".join(lines)) from None


def _parse(path: Path) -> Any:
    """A YAML or JSON file's data; a syntax error is one line with the file, line and column."""
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ValueError(f"{where}: invalid YAML: {problem}.") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}.") from None


#: The model behind each config field that holds one, for did-you-mean on unknown keys.
_SECTIONS: dict[str, type[BaseModel]] = {
    "corpus": CorpusSpec,
    "defenses": DefenseSpec,
    "attacks": AttackSpec,
    "utility": UtilitySpec,
    "executor": ExecutorSpec,
    "strength": StrengthSpec,
}


_MODEL_NAMES = {"AttackSpec", "UtilitySpec", "str"}


def _known_here(loc: list[str]) -> list[str]:
    model = _SECTIONS.get(loc[0], GridConfig) if len(loc) > 1 else GridConfig
    return list(model.model_fields)


def _suggestion(error: Any) -> tuple[tuple[Any, ...], str | None]:
    """(where, the known field an unknown key is closest to)."""
    loc = [str(part) for part in error["loc"] if str(part) not in _MODEL_NAMES]
    close = difflib.get_close_matches(loc[-1], _known_here(loc), n=1, cutoff=0.6)
    return tuple(error["loc"][:-1]), close[0] if close else None


def _error_line(error: Any) -> str:
    """One validation error as ``field: message (got value)``, with did-you-mean for an
    unknown key."""
    loc = [str(part) for part in error["loc"] if str(part) not in _MODEL_NAMES]
    where = ".".join(loc) or "(top level)"
    if error["type"] == "extra_forbidden":
        known, close = _known_here(loc), _suggestion(error)[1]
        hint = f" Did you mean {close!r}?" if close else ""
        return f"{where}: unknown field.{hint} Allowed here: {', '.join(known)}"
    if error["type"] == "missing":
        return f"{where}: required field is missing"
    msg, got = error["msg"].removeprefix("Value error, "), repr(error.get("input"))
    if not loc:  # a check across fields (distinct labels): its message names the fields
        return msg
    return f"{where}: {msg}" if got in msg else f"{where}: {msg} (got {got})"
