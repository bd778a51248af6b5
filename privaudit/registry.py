"""Named registries of defenses, attacks, corpora and utility evaluators.

Built-ins are declared once, in :data:`BUILTINS` at the bottom of this module: lazy
``"module:attr"`` entries, so ``privaudit list`` never imports torch. A built-in class's
``name`` equals its key (a test checks). Third-party plugins come in through the entry-point
groups ``privaudit.defenses``, ``privaudit.attacks``, ``privaudit.corpora`` and
``privaudit.utility`` (or :meth:`Registry.register` at run time); they are listed and
resolved like built-ins, but the project's own coverage (the quick preset, the attack
matrix) reads :meth:`Registry.builtins` only.
A ``"module:attr"`` string (or ``path/to/file.py:attr``) given where a name is expected also
resolves, so users can point at their own class without packaging it.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Iterable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def load_object(spec: str) -> Any:
    """Import ``"package.module:attr"`` or ``"path/to/file.py:attr"`` and return the attribute."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ValueError(f"Expected 'module:attribute' or 'file.py:attribute', got {spec!r}.")
    module_part, _, attr = spec.rpartition(":")
    if not module_part or not attr:
        raise ValueError(f"Expected 'module:attribute' or 'file.py:attribute', got {spec!r}.")
    if module_part.endswith(".py"):
        path = Path(module_part).expanduser().resolve()
        if not path.is_file():
            raise ValueError(f"No such file {path} (from {spec!r}).")
        mod_name = f"privaudit_user_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(mod_name, path)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"Cannot import {path} as a Python module.")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[mod_name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:  # the user's file: its line, not importlib's traceback
            del sys.modules[mod_name]
            raise ValueError(_import_failure(spec, str(path), exc)) from None
    else:
        try:
            module = importlib.import_module(module_part)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if not (module_part == missing or module_part.startswith(f"{missing}.")):
                raise ValueError(_import_failure(spec, None, exc)) from None
            raise ValueError(
                f"Cannot import module {module_part!r} (from {spec!r}): {exc}. "
                "Check the name and that its package is installed."
            ) from exc
        except Exception as exc:  # a syntax or import error inside the module itself
            raise ValueError(_import_failure(spec, None, exc)) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"Module {module_part!r} has no attribute {attr!r}.") from None


def _import_failure(spec: str, path: str | None, exc: BaseException) -> str:
    """One line for a plugin that fails to import: file, line, the error, what to do.

    The line is the one in the user's file (``path``, else the first file the import ran),
    found from the SyntaxError itself or the deepest traceback frame in that file."""
    where, code = "", ""
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename}:{exc.lineno}" + (f":{exc.offset}" if exc.offset else "")
        code = (exc.text or "").strip()
        error = f"SyntaxError: {exc.msg}"
    else:
        # importlib's and this module's frames say nothing about the user's file.
        skip = (Path(__file__), Path(importlib.__file__).parent)
        frames = [
            f
            for f in traceback.extract_tb(exc.__traceback__)
            if not f.filename.startswith("<")
            and Path(f.filename) != skip[0]
            and skip[1] not in Path(f.filename).parents
        ]
        target = path or (frames[0].filename if frames else None)
        mine = [f for f in frames if target and Path(f.filename) == Path(target)]
        frame = mine[-1] if mine else (frames[-1] if frames else None)
        if frame is not None:
            where, code = f"{frame.filename}:{frame.lineno}", (frame.line or "").strip()
        error = f"{type(exc).__name__}: {exc}"
    shown = f" ({code})" if code else ""
    hint = (
        "install the missing package or fix the import"
        if isinstance(exc, ImportError)
        else "fix the file"
    )
    return f"Cannot import plugin {spec!r}: {where or '?'}: {error}{shown}; {hint} and rerun."


class Registry(Generic[T]):
    """A name → object map with lazy entries, entry-point plugins and did-you-mean errors."""

    def __init__(
        self, kind: str, plural: str, group: str, check: Callable[[str, T], None] | None = None
    ) -> None:
        self.kind = kind  # "defense", "attack", ...
        self.plural = plural  # as `privaudit list PLURAL` spells it
        self.group = group
        # Run on every object as it is registered or first resolved (a ValueError line).
        self.check = check
        self._objects: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._builtins: dict[str, str] = {}
        self._plugins_loaded = False

    def register(self, name: str) -> Callable[[T], T]:
        """Register an object under ``name`` at run time (a plugin that is not installed)."""

        def decorate(obj: T) -> T:
            existing = self._objects.get(name)
            if existing is not None and existing is not obj:
                raise ValueError(f"{self.kind} {name!r} is already registered as {existing!r}.")
            if self.check is not None:
                self.check(name, obj)
            self._objects[name] = obj
            return obj

        return decorate

    def add_builtin(self, name: str, spec: str) -> None:
        """Declare a built-in: ``spec`` is ``"module:attr"``, imported on first use."""
        self._builtins[name] = spec
        self._lazy[name] = spec

    def remove(self, name: str) -> None:
        """Forget ``name`` (tests that add a component and take it away again)."""
        for table in (self._builtins, self._lazy, self._objects):
            table.pop(name, None)

    def builtins(self) -> list[str]:
        """The built-in names, in declaration order (never a third-party plugin)."""
        return list(self._builtins)

    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        for ep in entry_points(group=self.group):
            self._lazy.setdefault(ep.name, ep.value)

    def names(self) -> list[str]:
        self._load_plugins()
        return sorted(set(self._objects) | set(self._lazy))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def get(self, name: str) -> T:
        """Resolve a registered name or a ``module:attr`` spec; unknown names say what exists."""
        if not isinstance(name, str):
            raise TypeError(f"A {self.kind} name must be a string, got {type(name).__name__}.")
        if name in self._objects:
            return self._objects[name]
        self._load_plugins()
        if name in self._lazy:
            obj = load_object(self._lazy[name])
            if self.check is not None:
                self.check(name, obj)
            self._objects.setdefault(name, obj)
            return self._objects[name]
        if ":" in name:
            obj = load_object(name)
            if self.check is not None:
                self.check(name, obj)
            return obj
        raise ValueError(self._unknown(name))

    def _unknown(self, name: str) -> str:
        known = self.names()
        close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return (
            f"Unknown {self.kind} {name!r}.{hint} Known: {', '.join(known) or '(none)'}. "
            f"Run `privaudit list {self.plural}` to see them, or pass 'module:Class'."
        )


def _check_attack(name: str, obj: Any) -> None:
    """An attack's ``metric`` resolves to a declared metric when the attack is registered: an
    unknown one fails here, naming the known metrics, before any grid is planned."""
    metric = getattr(obj, "metric", None)
    if metric is None:
        return  # not an attack class: the grid's own checks say so
    # lazy: privaudit.metrics stays out of `--help`, `list defenses` and `privatize`; it
    # loads on the first attack resolved.
    from privaudit.metrics import metric_spec

    where = f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)}"
    try:
        metric_spec(metric)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"attack {name!r} ({where}): {exc}") from None
    sd = getattr(obj, "fit_sd", 0.0)
    if isinstance(sd, bool) or not isinstance(sd, (int, float)) or not 0 <= sd < float("inf"):
        raise ValueError(
            f"attack {name!r} ({where}): fit_sd is {sd!r}; set it to the standard deviation "
            "of the attack's score between fits, a finite number >= 0 (0: deterministic)."
        )


def _check_utility(name: str, obj: Any) -> None:
    """An evaluator's declared ``fit_sd`` is a finite number >= 0 when it is registered."""
    sd = getattr(obj, "fit_sd", 0.0)
    if isinstance(sd, bool) or not isinstance(sd, (int, float)) or not 0 <= sd < float("inf"):
        where = f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)}"
        raise ValueError(
            f"utility evaluator {name!r} ({where}): fit_sd is {sd!r}; set it to the standard "
            "deviation of its metric between fits, a finite number >= 0 (0: deterministic)."
        )


DEFENSES: Registry[Any] = Registry("defense", "defenses", "privaudit.defenses")
ATTACKS: Registry[Any] = Registry("attack", "attacks", "privaudit.attacks", _check_attack)
CORPORA: Registry[Any] = Registry("corpus", "corpora", "privaudit.corpora")
UTILITY: Registry[Any] = Registry(
    "utility evaluator", "utility", "privaudit.utility", _check_utility
)

# The one list of built-ins, in the order tables and the quick grid show them.
BUILTINS: dict[Registry[Any], dict[str, str]] = {
    DEFENSES: {
        "none": "privaudit.defenses.none:NoDefense",
        "t2t": "privaudit.defenses.t2t:T2T",
        "pct2t": "privaudit.defenses.pct2t:PCT2T",
        "rapt": "privaudit.defenses.rapt:RAPT",
        "embedding-dx": "privaudit.defenses.embedding_dx:EmbeddingDX",
        "has": "privaudit.defenses.has:HideAndSeek",
        "presidio": "privaudit.defenses.presidio:Presidio",
        "sap": "privaudit.defenses.sap:SAP",
        "sap-cti": "privaudit.defenses.sap:SAPCTI",
        "cape": "privaudit.defenses.cape:CAPE",
        "dpnr": "privaudit.defenses.dpnr:DPNR",
        "clean": "privaudit.defenses.clean:CleanRelease",
        # Word-level metric-DP mechanisms (issue 51): their own preset, not the quick grid's.
        "santext": "privaudit.defenses.santext:SanText",
        "santext-plus": "privaudit.defenses.santext:SanTextPlus",
        "custext": "privaudit.defenses.custext:CusText",
        "custext-plus": "privaudit.defenses.custext:CusTextPlus",
        "tem": "privaudit.defenses.tem:TEM",
        "mahalanobis": "privaudit.defenses.mahalanobis:MahalanobisMechanism",
        "vickrey": "privaudit.defenses.vickrey:Vickrey",
        "diffractor": "privaudit.defenses.diffractor:OneDiffractor",
    },
    ATTACKS: {
        "nn-inversion": "privaudit.attacks.nn_inversion:NNInversion",
        "mlp-inversion": "privaudit.attacks.mlp_inversion:MLPInversion",
        "bayes-inversion": "privaudit.attacks.bayes_inversion:BayesInversion",
        "ae-inversion": "privaudit.attacks.ae_inversion:AEInversion",
        "optimization-inversion": "privaudit.attacks.optimization_inversion:OptimizationInversion",
        "attribute-inference": "privaudit.attacks.attribute_inference:AttributeInference",
        "person-attribute-inference": (
            "privaudit.attacks.person_attribute_inference:PersonAttributeInference"
        ),
        "ner": "privaudit.attacks.ner:NERAttack",
        "has-deanonymization": "privaudit.attacks.has_deanonymization:HaSDeanonymization",
        "bow-inversion": "privaudit.attacks.bow_inversion:BowInversion",
        "geia": "privaudit.attacks.geia:GEIA",
        "vec2text": "privaudit.attacks.vec2text:Vec2Text",
        "reidentification": "privaudit.attacks.reidentification:Reidentification",
    },
    CORPORA: {
        "synthetic-reviews": "privaudit.corpora.synthetic:synthetic_reviews",
        "file": "privaudit.corpora.files:load_file",
        "hf": "privaudit.corpora.files:load_hf",
        "tab": "privaudit.corpora.tab:load_tab",
        "synthpai": "privaudit.corpora.synthpai:synthpai",
    },
    UTILITY: {
        "service": "privaudit.utility.service:Service",
        "probe": "privaudit.utility.probe:Probe",
        "peft": "privaudit.utility.peft_tuning:PeftUtility",
        "prompt-tuning": "privaudit.utility.peft_tuning:PromptTuning",
        "prefix-tuning": "privaudit.utility.peft_tuning:PrefixTuning",
        "lora": "privaudit.utility.peft_tuning:LoRA",
        "fine-tuning": "privaudit.utility.peft_tuning:FineTuning",
    },
}
for _registry, _table in BUILTINS.items():
    for _name, _spec in _table.items():
        _registry.add_builtin(_name, _spec)


def build_component(
    registry: Registry[Any], name: str, params: dict[str, Any], backbone: str | None, where: str
) -> Any:
    """``registry``'s ``name`` built with ``params`` (and the grid's backbone, where the class
    declares one). A wrong name or value is one ``ValueError`` line that starts with ``where``
    (the config field). Imports only the named component's module, so a client privatizing
    text loads no attack, trainer or grid module."""
    # lazy: privaudit.params (pydantic) stays out of `privaudit --help`
    from privaudit.params import ParamError, declared

    cls = registry.get(name)
    kwargs = dict(params)
    if backbone is not None and "backbone" in declared(cls):
        kwargs.setdefault("backbone", backbone)
    try:
        return cls(**kwargs)
    except ParamError as exc:
        raise ValueError(f"{where}: {exc}") from None


def build_defense(name: str, params: dict[str, Any], backbone: str | None) -> Any:
    """The defense ``name`` built with ``params`` (see :func:`build_component`)."""
    return build_component(DEFENSES, name, params, backbone, f"defense {name!r}")


def attack_fit_sds(labels: Iterable[str]) -> dict[str, float]:
    """Each attack label's declared between-fit sd (``Attack.fit_sd``), by the registered
    name before its ``[target]``: what :func:`privaudit.metrics.stats.run_stats` adds to the
    intervals. A label that names no registered attack (a custom ``label``, a plugin not
    installed here) is left out, and counts as deterministic."""
    return _fit_sds(ATTACKS, labels)


def utility_fit_sds(labels: Iterable[str]) -> dict[str, float]:
    """Each utility evaluator label's declared between-fit sd (``UtilityEvaluator.fit_sd``),
    by the registered name before its ``[method]`` (``service``, ``peft[lora]``): what
    :func:`privaudit.metrics.stats.run_stats` adds to the utility intervals. A label that
    names no registered evaluator is left out, and counts as deterministic."""
    return _fit_sds(UTILITY, labels)


def _fit_sds(registry: Registry, labels: Iterable[str]) -> dict[str, float]:
    """The declared positive ``fit_sd`` of each label's class (the name before ``[``)."""
    out: dict[str, float] = {}
    for label in set(labels):
        name = str(label).split("[", 1)[0]
        try:
            cls = registry.get(name) if ":" not in name else None
        except ValueError:
            continue
        sd = float(getattr(cls, "fit_sd", 0.0) or 0.0)
        if sd > 0:
            out[str(label)] = sd
    return out
