"""Where the inverter's public pre-training text comes from (:class:`PublicText`), the
sentences of a document (each training document's sentences are extra pairs), and what
``geia.plan`` reads to refuse public text that is the run's own corpus.

Which corpus stands for ``public_corpus: auto`` where the run's corpus holds no public text out
is :data:`FALLBACK`; whether a corpus is a seeded generator (another seed: other people's
documents) is declared on its loader (``public_by_seed``), read by :func:`by_seed`."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privaudit.registry import CORPORA

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


#: Suffixes read as a file of public documents when ``public_corpus`` is a bare path.
FILE_SUFFIXES = (".txt", ".csv", ".jsonl", ".parquet")
#: The public text of ``public_corpus: auto`` where the run's corpus declares no public split:
#: the built-in generator at the attack's own ``public_seed``.
FALLBACK = "synthetic-reviews"


def by_seed(corpus: str) -> bool:
    """Whether ``corpus`` is a seeded generator (its loader declares ``public_by_seed``): its
    public text is ``n_docs`` documents drawn at a seed, and only the same seed is the same
    documents. A file path or an unknown name is not."""
    if Path(corpus).suffix in FILE_SUFFIXES:
        return False
    try:
        loader = CORPORA.get(corpus)
    except (KeyError, ValueError, ImportError):  # not a corpus: texts() says so when read
        return False
    return bool(getattr(loader, "public_by_seed", False))


@dataclass(frozen=True)
class PublicText:
    """Where the attacker's public pre-training text comes from (the defaults are ``geia``'s
    declared parameters, which build it): ``corpus`` is a registered corpus name (with its
    ``params``, JSON) or a file path; ``split`` one of its splits ("" : its ``public`` split
    when it has one, else every split)."""

    corpus: str
    n_docs: int
    seed: int
    params: str = ""  # JSON of the corpus's parameters ("" for none: keeps older cache keys)
    split: str = ""

    def describe(self) -> str:
        what = self.corpus + (f" {self.params}" if self.params else "")
        what += f", split {self.split}" if self.split else ""
        if by_seed(self.corpus):
            return f"{what} ({self.n_docs} documents, seed {self.seed})"
        return f"{what} (at most {self.n_docs} documents)"

    def count(self) -> int:
        """How many documents :meth:`texts` gives: ``n_docs`` for the generator, else read
        (a held-out split may hold fewer than ``n_docs``)."""
        if by_seed(self.corpus) and not self.params:
            return int(self.n_docs)
        return len(_public_texts(self))

    def is_file(self) -> bool:
        return not self.params and Path(self.corpus).suffix in FILE_SUFFIXES

    def texts(self) -> list[str]:
        """The public documents, at most ``n_docs``: the built-in generator at ``seed``, a
        file (``.txt``: one document per line; ``.csv``/``.jsonl``/``.parquet``: its
        ``text`` column), or any registered corpus built with ``params`` (its ``split``, else
        its ``public`` split when it has one, else every split in order)."""
        if self.is_file():
            out = _file_texts(Path(self.corpus))
        else:
            params = json.loads(self.params) if self.params else {}
            if by_seed(self.corpus):
                params = {"seed": int(self.seed), "n_docs": int(self.n_docs)} | params
            corpus = CORPORA.get(self.corpus)(**params)
            split = self.split or ("public" if "public" in corpus.splits else "")
            chosen = [corpus.split(split)] if split else list(corpus.splits.values())
            out = [str(t) for ds in chosen for t in ds["text"]]
        out = [t for t in out if t.strip()]
        if not out:
            raise ValueError(f"The public corpus {self.describe()} has no text.")
        return out[: int(self.n_docs)]


@functools.lru_cache(maxsize=4)
def _public_texts(public: PublicText) -> tuple[str, ...]:
    return tuple(public.texts())


def _file_texts(path: Path) -> list[str]:
    import pandas as pd

    if not path.is_file():
        raise ValueError(
            f"The public corpus file {path} does not exist; give a file path or a "
            "corpus name (e.g. synthetic-reviews)."
        )
    if path.suffix == ".txt":
        return path.read_text(encoding="utf-8").splitlines()
    frame = {
        ".csv": pd.read_csv,
        ".jsonl": lambda p: pd.read_json(p, lines=True),
        ".parquet": pd.read_parquet,
    }[path.suffix](path)
    if "text" not in frame.columns:
        raise ValueError(
            f"The public corpus file {path} has no 'text' column; name its column with "
            "public_corpus: {name: file, params: {path: ..., text: COLUMN}}."
        )
    return [str(t) for t in frame["text"].dropna()]


def sentences(text: str) -> list[str]:
    return [p for p in _SENTENCE_END.split(text.strip()) if p]


#: A public document counts as one of the run's own from this many words (see ``geia.plan``).
OVERLAP_WORDS = 5


def checked_public(value: Any) -> str | dict[str, Any]:
    """``public_corpus`` as given, or one ``ValueError`` line saying what it may be."""
    if isinstance(value, str) and value.strip():
        return value
    if (
        isinstance(value, Mapping)
        and isinstance(value.get("name"), str)
        and not (set(value) - {"name", "params", "split"})
        and isinstance(value.get("params") or {}, Mapping)
    ):
        return dict(value)
    raise ValueError(
        f"public_corpus {value!r} is not a corpus: give 'auto', a registered corpus name, a "
        "file path, or {name: CORPUS, params: {...}, split: SPLIT} (e.g. {name: file, params: "
        "{path: reviews.csv, text: body}})."
    )


def resolve_public(
    public_corpus: str | dict[str, Any], corpus: str, params: Mapping[str, Any]
) -> str | dict[str, Any]:
    """``public_corpus`` for a run on ``corpus`` with ``params``: ``auto`` is the corpus's own
    public split where its loader declares one (``public_split``), else :data:`FALLBACK`;
    anything else as given."""
    if public_corpus != "auto":
        return public_corpus
    split = getattr(CORPORA.get(corpus), "public_split", None)
    if split:
        return {"name": corpus, "params": dict(params), "split": str(split)}
    return FALLBACK


def public_text_of(source: str | Mapping[str, Any], n_docs: int, seed: int) -> PublicText:
    """The :class:`PublicText` of a resolved ``public_corpus`` (``auto`` unresolved:
    :data:`FALLBACK`), at most ``n_docs`` documents, a generator's at ``seed``; one object
    per distinct input (its texts and count are memoised by it)."""
    if isinstance(source, Mapping):
        name, params = str(source["name"]), params_json(source.get("params") or {})
        return _public_text(name, n_docs, seed, params, str(source.get("split") or ""))
    return _public_text(FALLBACK if source == "auto" else str(source), n_docs, seed, "", "")


@functools.cache
def _public_text(corpus: str, n_docs: int, seed: int, params: str, split: str) -> PublicText:
    return PublicText(corpus, n_docs, seed, params, split)


def params_json(params: Mapping[str, Any]) -> str:
    return json.dumps(dict(params), sort_keys=True, default=str) if params else ""


def same_path(public: str, params: Mapping[str, Any]) -> bool:
    path = params.get("path")
    return path is not None and Path(str(path)).resolve() == Path(public).resolve()


@functools.lru_cache(maxsize=8)
def overlap(public: PublicText, name: str, params: str) -> int:
    """How many public documents are documents of the run corpus's train or test split."""

    def norm(text: str) -> str:
        return " ".join(text.lower().split())

    corpus = CORPORA.get(name)(**(json.loads(params) if params else {}))
    own = {
        norm(t)
        for split in ("train", "test")
        if split in corpus.splits
        for t in corpus.texts(split)
    }
    return sum(1 for t in public.texts() if len(t.split()) >= OVERLAP_WORDS and norm(t) in own)
