"""Named-entity recognition on released text: which of the author's entities survive?"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Self

import numpy as np
from annotated_types import Ge, MinLen

from privaudit.api import Attack, Knowledge, Predictions, Release, Space
from privaudit.mechanisms.inputs import check_texts
from privaudit.mechanisms.seeding import seeded_torch
from privaudit.models.backbone import backbone
from privaudit.models.entities import Span, spacy_entities
from privaudit.params import PositiveFloat, PositiveInt
from privaudit.runtime.devices import module_device, torch_device

if TYPE_CHECKING:
    import datasets


def released_texts(release: object, name: str) -> list[str]:
    """The texts of a text release, checked, without RAPT's public plain-word prefix
    (:meth:`Release.content_texts`: protocol, not the author's words)."""
    if not isinstance(release, Release):
        raise TypeError(f"{name} attacks a Release, got {type(release).__name__}.")
    if release.kind != "text":
        raise ValueError(
            f"{name} reads released text, not a {release.kind!r} release: vectors carry no "
            "surface string to tag."
        )
    check_texts(release.texts, name)
    return release.content_texts()


@dataclass
class _Tagger:
    """The fine-tuned token classifier: encoder copy, linear head, BIO tag names."""

    encoder: Any  # a private deep copy of the backbone's transformers model
    head: Any  # torch.nn.Linear(dim, n_tags)
    tags: list[str]  # "O", "B-PERSON", "I-PERSON", ...


class NERAttack(Attack):
    """Named-entity recognition on the released text.

    Paper: the NER attack of RAPT (Li et al., "Privacy-Preserving Prompt Tuning for Large
    Language Model Services", §IV-A3): a pretrained NER model reads the privatized prompt and
    the attack succeeds on the named entities of the original it finds.

    Threat model: the attacker sees the released text only. ``model="spacy"`` (default) is an
    off-the-shelf pretrained pipeline (``en_core_web_sm``; no query, no aux, no white box).
    ``model="finetuned"`` fine-tunes the public backbone (the transformers encoder of
    ``backbone`` plus a linear head, BIO tags over word pieces) on the attacker's aux split and
    its entity annotations (``aux["entities"]``): it needs aux, no query and no mechanism
    internals. Training reads the *clean* aux text (the attacker's own labelled data); it is
    brief (``epochs`` passes, AdamW, ``lr`` for the encoder and 20×``lr`` for the fresh head)
    and seeded from the ``rng`` given to ``fit`` without touching the process-wide torch random
    state; the shared backbone is deep-copied, never modified. Documents longer than
    ``max_length`` word pieces are cut into consecutive windows.

    RAPT's plain-word prefix (``release.plain_prefix`` leading words) is public protocol, not
    the author's words: it is skipped. Vector releases have no text to tag (``n/a``).

    Output: per document a list of ``{"text", "type"}`` (OntoNotes labels for spaCy, the aux
    annotation's types for the fine-tuned tagger). Metric: micro F1 of (normalised text, type)
    against the original's entities, types absent from the truth ignored; privacy 1 - F1.
    """

    name: ClassVar[str] = "ner"
    cost_prior: ClassVar[float] = 0.09  # s per 1,000 words (estimate)
    gpu: ClassVar[float] = 0.25  # model='finetuned' trains the encoder (privaudit.runtime.devices)
    accepts: ClassVar[frozenset[Space]] = frozenset({Space.TEXT})
    metric: ClassVar[str] = "entity_f1"
    # Deterministic given its data: 5 fits at none and t2t eta 100, sd 0 (2026-11-26).
    fit_sd: ClassVar[float] = 0.0
    needs_white_box: ClassVar[bool] = False
    needs_query: ClassVar[bool] = False
    needs_aux: ClassVar[bool] = False  # only model="finetuned" needs it (see applicable)

    def __init__(
        self,
        model: Literal["spacy", "finetuned"] = "spacy",
        spacy_model: Annotated[str, MinLen(1)] | None = None,
        backbone: str | None = None,
        epochs: PositiveInt = 3,
        lr: PositiveFloat = 1e-4,
        batch_size: PositiveInt = 16,
        max_length: Annotated[int, Ge(8)] = 128,  # word pieces per window
        max_aux: PositiveInt | None = None,
    ) -> None:
        self.model = model
        self.spacy_model = spacy_model
        self.backbone = backbone
        self.epochs = epochs
        self.lr = lr
        self.batch_size = batch_size
        self.max_length = max_length
        self.max_aux = max_aux
        self._backbone: str | None = backbone  # resolved by fit: declared, else knowledge's
        self._tagger: _Tagger | None = None

    def applicable(self, release: Release, knowledge: Knowledge) -> str | None:
        reason = super().applicable(release, knowledge)
        if reason is None and self.model == "finetuned" and knowledge.aux is None:
            return "ner with model='finetuned' trains on the attacker's aux split, which is absent"
        return reason

    # ---------------------------------------------------------------------------------------
    # Fitting
    # ---------------------------------------------------------------------------------------

    def fit(self, knowledge: Knowledge, *, rng: np.random.Generator) -> Self:
        self._backbone = self.backbone if self.backbone is not None else knowledge.backbone
        if self.model == "finetuned":
            if knowledge.aux is None:
                raise ValueError(
                    "ner with model='finetuned' trains on the attacker's aux split with entity "
                    "annotations (Knowledge.aux); give one, or use model='spacy'."
                )
            self._tagger = self._train(knowledge.aux, rng)
        return self

    def _train(self, aux: datasets.Dataset, rng: np.random.Generator) -> _Tagger:
        import torch

        if "entities" not in aux.column_names or "text" not in aux.column_names:
            raise ValueError(
                "The aux split needs 'text' and 'entities' columns (entities: lists of "
                "{start, end, type, text}) to fine-tune an NER tagger."
            )
        if self.max_aux is not None and len(aux) > self.max_aux:
            aux = aux.select(range(int(self.max_aux)))
        texts = [str(t) for t in aux["text"]]
        spans = [
            [(int(e["start"]), int(e["end"]), str(e["type"])) for e in d] for d in aux["entities"]
        ]
        types = sorted({t for doc in spans for _, _, t in doc})
        if not types:
            raise ValueError("The aux split carries no entity annotations to learn from.")
        tags = ["O"] + [f"{p}-{t}" for t in types for p in ("B", "I")]
        index = {t: i for i, t in enumerate(tags)}

        bb = backbone(self._backbone)
        windows = _windows(bb.tokenizer, texts, int(self.max_length))
        examples = []  # (input ids, BIO tag ids with -100 on specials)
        for doc, ids, offsets in windows:
            examples.append((ids, [_bio(s, e, spans[doc], index) for s, e in offsets]))
        if not examples:
            raise ValueError("The aux split has no text to fine-tune the NER tagger on.")

        device = torch_device()  # the current device: the tagger trains there
        with seeded_torch(rng) as generator:  # head init and dropout: scoped, seeded
            encoder = copy.deepcopy(bb.model).to(device)  # never train the shared backbone
            head = torch.nn.Linear(bb.dim, len(tags)).to(device)
            optimizer = torch.optim.AdamW(
                [
                    {"params": encoder.parameters(), "lr": float(self.lr)},
                    {"params": head.parameters(), "lr": 20 * float(self.lr)},
                ],
                weight_decay=0.01,
            )
            loss_fn = torch.nn.CrossEntropyLoss(ignore_index=-100)
            encoder.train()
            bs = int(self.batch_size)
            # Batches of similar length (little padding), visited in a seeded random order.
            by_length = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
            batches = [by_length[i : i + bs] for i in range(0, len(by_length), bs)]
            for _ in range(int(self.epochs)):
                for b in torch.randperm(len(batches), generator=generator).tolist():
                    batch = [examples[i] for i in batches[b]]
                    ids, mask, labels = _pad(batch, bb.tokenizer.pad_token_id or 0, device)
                    optimizer.zero_grad(set_to_none=True)
                    hidden = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
                    loss = loss_fn(head(hidden).reshape(-1, len(tags)), labels.reshape(-1))
                    loss.backward()
                    optimizer.step()
        encoder.eval()
        return _Tagger(encoder=encoder, head=head, tags=tags)

    # ---------------------------------------------------------------------------------------
    # Attacking
    # ---------------------------------------------------------------------------------------

    def attack(self, release: Release) -> Predictions:
        model = self.model
        texts = released_texts(release, self.name)
        t0 = time.perf_counter()
        if model == "spacy":
            found = spacy_entities(texts, self.spacy_model)
        else:
            if self._tagger is None:
                raise ValueError(
                    "ner with model='finetuned' is not fitted: call fit(knowledge) first."
                )
            found = self._tag(texts)
        entities = [
            [{"text": text[s:e], "type": t} for s, e, t in spans]
            for text, spans in zip(texts, found, strict=True)
        ]
        settings = {"model": model}
        if model == "spacy":
            settings["spacy_model"] = self.spacy_model or "en_core_web_sm"
        else:
            settings |= {"backbone": self._backbone, "epochs": self.epochs}
        return Predictions(
            "entities",
            entities=entities,
            meta={"settings": settings, "seconds": time.perf_counter() - t0},
        )

    def _tag(self, texts: list[str]) -> list[list[Span]]:
        import torch

        tagger = self._tagger
        assert tagger is not None
        bb = backbone(self._backbone)
        out: list[list[Span]] = [[] for _ in texts]
        jobs = [i for i, t in enumerate(texts) if t.strip()]
        windows = _windows(bb.tokenizer, [texts[i] for i in jobs], int(self.max_length))
        windows.sort(key=lambda w: len(w[1]))  # little padding per batch
        bs = 64
        device = module_device(tagger.encoder)
        with torch.inference_mode():
            for start in range(0, len(windows), bs):
                chunk = windows[start : start + bs]
                ids, mask, _ = _pad([(w[1], [0] * len(w[1])) for w in chunk], 0, device)
                hidden = tagger.encoder(input_ids=ids, attention_mask=mask).last_hidden_state
                pred = tagger.head(hidden).argmax(-1).cpu().numpy()
                for row, (doc, _ids, offsets) in zip(pred, chunk, strict=True):
                    i = jobs[doc]
                    out[i].extend(_decode(texts[i], offsets, row[: len(offsets)], tagger.tags))
        return out


def _windows(
    tokenizer: Any, texts: Sequence[str], max_length: int
) -> list[tuple[int, list[int], list[tuple[int, int]]]]:
    """``(document, input ids with specials, char offsets per id)`` windows of at most
    ``max_length`` pieces; specials have offsets ``(0, 0)``."""
    if not texts:
        return []
    enc = tokenizer(
        list(texts),
        truncation=True,
        max_length=max_length,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        verbose=False,
    )
    mapping = enc["overflow_to_sample_mapping"]
    return [
        (int(doc), list(ids), [tuple(map(int, o)) for o in offs])
        for doc, ids, offs in zip(mapping, enc["input_ids"], enc["offset_mapping"], strict=True)
    ]


def _bio(s: int, e: int, spans: Sequence[Span], index: dict[str, int]) -> int:
    """The BIO tag id of the word piece at chars ``[s, e)`` (-100 for specials)."""
    if e <= s:
        return -100
    for a, b, t in spans:
        if a <= s < b:
            return index[f"B-{t}"] if s == a else index[f"I-{t}"]
        if s < a < e:  # a piece straddling the entity start (rare): it begins the entity
            return index[f"B-{t}"]
    return 0


def _pad(
    batch: Sequence[tuple[list[int], list[int]]], pad_id: int, device: Any = None
) -> tuple[Any, Any, Any]:
    """Padded ``(input ids, attention mask, labels)`` tensors, on ``device`` (default CPU)."""
    import torch

    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    for r, (i, lab) in enumerate(batch):
        ids[r, : len(i)] = torch.tensor(i, dtype=torch.long)
        mask[r, : len(i)] = 1
        labels[r, : len(lab)] = torch.tensor(lab, dtype=torch.long)
    return ids.to(device), mask.to(device), labels.to(device)


def _decode(
    text: str, offsets: Sequence[tuple[int, int]], tags: np.ndarray, names: Sequence[str]
) -> list[Span]:
    """Entity spans from per-piece BIO predictions: a ``B-`` (or an ``I-`` of another type
    than the open entity) opens one, matching ``I-`` pieces extend it. Pieces of one word
    (letters or digits touching) continue the open entity whatever their tag, so a name is
    never cut inside a word."""
    spans: list[Span] = []
    open_: list[Any] | None = None  # [start, end, type]
    for (s, e), tag in zip(offsets, tags, strict=True):
        if e <= s:
            continue
        name = names[int(tag)]
        if open_ is not None and s == open_[1] and text[s - 1].isalnum() and text[s].isalnum():
            open_[1] = e
            continue
        if name == "O":
            if open_ is not None:
                spans.append(tuple(open_))
                open_ = None
            continue
        prefix, etype = name.split("-", 1)
        if prefix == "I" and open_ is not None and open_[2] == etype:
            open_[1] = e
            continue
        if open_ is not None:
            spans.append(tuple(open_))
        open_ = [s, e, etype]
    if open_ is not None:
        spans.append(tuple(open_))
    return [(s, e, t) for s, e, t in spans if text[s:e].strip()]
