"""Grid configurations, validated with pydantic, and the built-in presets."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


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

    @field_validator("target_rates")
    @classmethod
    def _rates(cls, values: list[float] | None) -> list[float] | None:
        if values is not None:
            bad = [v for v in values if not 0 < v < 1]
            if not values or bad:
                raise ValueError(f"target rates must lie strictly between 0 and 1, got {bad}")
        return values

    @field_validator("knob_values")
    @classmethod
    def _positive(cls, values: list[float] | None) -> list[float] | None:
        if values is not None:
            if not values:
                raise ValueError("knob_values is empty; give at least one value or omit it")
            bad = [v for v in values if not v > 0]
            if bad:
                raise ValueError(f"knob values must be positive numbers, got {bad}")
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


class GridConfig(_Strict):
    name: str = "custom"
    corpus: CorpusSpec = Field(default_factory=CorpusSpec)
    backbone: str | None = None
    defenses: list[DefenseSpec]
    attacks: list[str | AttackSpec] = Field(
        description="attack names, or {name, params} to set an attack's parameters"
    )
    utility: str | UtilitySpec = Field(
        default="probe",
        description="utility evaluator name, or {name, params} (e.g. {name: lora, params: "
        "{profile: quick}})",
    )
    seeds: list[int] = Field(default_factory=lambda: [0])
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)

    @field_validator("defenses", "attacks", "seeds")
    @classmethod
    def _non_empty(cls, values: list[Any]) -> list[Any]:
        if not values:
            raise ValueError("must list at least one entry")
        return values

    def check_names(self) -> None:
        """Resolve every component name now, so a typo fails before any work starts."""
        from privaudit.registry import ATTACKS, CORPORA, DEFENSES, UTILITY

        def resolve(registry: Any, name: str, where: str) -> Any:
            try:
                return registry.get(name)
            except ValueError as exc:  # name the field, then the registry's hint
                raise ValueError(f"{where}: {exc}") from None

        resolve(CORPORA, self.corpus.name, "corpus.name")
        resolve(UTILITY, self.utility_spec().name, "utility")
        for i, d in enumerate(self.defenses):
            cls = resolve(DEFENSES, d.name, f"defenses.{i}.name")
            if (d.knob_values or d.target_rates) and getattr(cls, "knob", None) is None:
                raise ValueError(
                    f"Defense {d.name!r} has no privacy knob, but privacy levels were given."
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


def quick_preset() -> dict[str, Any]:
    """The default of `privaudit run`: every built-in defense (each of its ``variants``) at its
    declared ``levels``, against every built-in attack (with its ``quick_params`` cost bounds),
    on the default backbone and corpus. Derived from the registry's built-ins, so a new
    built-in is covered with no edit here; third-party plugins are not included."""
    from privaudit.registry import ATTACKS, DEFENSES

    defenses: list[dict[str, Any]] = []
    for name in DEFENSES.builtins():
        cls = DEFENSES.get(name)
        for variant in cls.variants:
            spec: dict[str, Any] = {"name": name}
            if variant:
                spec["params"] = dict(variant)
            if cls.knob is not None and cls.levels:
                spec["knob_values"] = list(cls.levels)
            defenses.append(spec)
    attacks: list[Any] = []
    for name in ATTACKS.builtins():
        params = dict(ATTACKS.get(name).quick_params)
        attacks.append({"name": name, "params": params} if params else name)
    return {
        "name": "quick",
        "corpus": {
            "name": "synthetic-reviews",
            "params": {"n_docs": 3000, "seed": 0},
            # Every point privatizes and encodes train + test, so their sizes set the pace.
            # train 800 keeps the probe's clean accuracy near .83 (600 gave .72, below some
            # defended points); aux 300 trims the black-box attacks (they scale with aux).
            "limits": {"train": 800, "test": 300, "aux": 300},
        },
        "defenses": defenses,
        "attacks": attacks,
        "utility": "probe",
        "seeds": [0],
    }


class _Presets(Mapping[str, dict[str, Any]]):
    """The built-in presets by name; ``quick`` is derived from the registry when asked for."""

    def __init__(self, fixed: dict[str, dict[str, Any]]) -> None:
        self._fixed = fixed

    def __getitem__(self, name: str) -> dict[str, Any]:
        if name == "quick":
            return quick_preset()
        return self._fixed[name]

    def __iter__(self) -> Iterator[str]:
        return iter(["quick", *self._fixed])

    def __len__(self) -> int:
        return 1 + len(self._fixed)


PRESETS = _Presets({
    # RAPT's grid (Li et al., Table II / Fig. 7): eta in {25, 75, 125, 150, 175} for the
    # text-to-text defenses, utility by prompt tuning with the paper's settings, three seeds,
    # the whole corpus. Meant for a larger machine (hours on a GPU; days on two CPU cores).
    "paper": {
        "name": "paper",
        "corpus": {"name": "synthetic-reviews", "params": {"n_docs": 6000, "seed": 0}},
        "defenses": [
            {"name": "none"},
            {"name": "t2t", "knob_values": [25, 75, 125, 150, 175]},
            {"name": "pct2t", "knob_values": [25, 75, 125, 150, 175]},
            {"name": "rapt", "knob_values": [25, 75, 125, 150, 175]},
            {"name": "embedding-dx", "knob_values": [25, 75, 125, 150, 175]},
            {"name": "has", "params": {"mode": "generative"}, "knob_values": [1, 2, 3, 4]},
            {"name": "sap", "knob_values": [25, 75, 125, 150, 175]},
            {"name": "sap-cti", "knob_values": [25, 75, 125, 150, 175]},
            {"name": "cape", "knob_values": [1, 3, 10, 30, 100]},
            {"name": "dpnr", "knob_values": [1, 3, 10, 30, 100]},
        ],
        "attacks": [
            "nn-inversion",
            "mlp-inversion",
            "ae-inversion",
            "optimization-inversion",
            "attribute-inference",
            "ner",
            "has-deanonymization",
        ],
        "utility": {"name": "prompt-tuning", "params": {"profile": "paper"}},
        "seeds": [0, 1, 2],
    },
    # Seconds, for tests: the tiny random BERT and a small corpus.
    "smoke": {
        "name": "smoke",
        "backbone": "tiny-random-bert",
        "corpus": {
            "name": "synthetic-reviews",
            "params": {"n_docs": 120, "seed": 0},
            "limits": {"train": 60, "test": 30},
        },
        "defenses": [{"name": "none"}, {"name": "t2t", "knob_values": [1, 10, 100]}],
        "attacks": ["nn-inversion"],
        "utility": "probe",
        "seeds": [0],
    },
})  # fmt: skip


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
                f"{source!r} is neither a preset ({', '.join(PRESETS)}) nor a config file."
            )
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = json.loads(text)
    try:
        return GridConfig.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']} (got {e.get('input')!r})"
            for e in exc.errors()
        ]
        if len(lines) == 1:
            raise ValueError(f"Invalid grid config: {lines[0]}") from None
        raise ValueError("Invalid grid config:\n  " + "\n  ".join(lines)) from None
