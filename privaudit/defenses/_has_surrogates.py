"""Hide-and-Seek's generative hide model: type-matched surrogates for the entities it hides.

Offline faker surrogates shaped like their original (a title kept, first name for first name,
country for country, a date's month/year/day form), chosen so that Seek stays exact; or, with
a Hugging Face ``model``, that model prompted for each surrogate, faker taking over when its
answer is unusable. :class:`privaudit.defenses.has.HideAndSeek` (``mode="generative"``) is the
one user; the label mode's placeholders stay in ``has``.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from privaudit.mechanisms.seeding import seeded_torch
from privaudit.models.entities import (
    IDENTIFIER,
    MONTHS,
    PERSON_TITLES,
    RELATIVE_DATES,
    WEEKDAYS,
    faker_countries,
    faker_first_names,
    placeholder,
)
from privaudit.models.generative import generative_model
from privaudit.runtime.devices import torch_device

if TYPE_CHECKING:
    from faker import Faker

_SURROGATE_TRIES = 30
_NORP = (
    "French",
    "German",
    "Canadian",
    "Brazilian",
    "Japanese",
    "Kenyan",
    "Norwegian",
    "Mexican",
    "Italian",
    "Egyptian",
    "Korean",
    "Spanish",
    "Dutch",
    "Swedish",
    "Polish",
    "Greek",
    "Chilean",
    "Nigerian",
    "Peruvian",
    "Turkish",
    "Vietnamese",
    "Australian",
    "Danish",
    "Finnish",
    "Portuguese",
    "Argentine",
    "Moroccan",
    "Austrian",
    "Hungarian",
    "Thai",
)
_LOC_NOUNS = ("Valley", "River", "Lake", "Bay", "Hills", "Forest", "Peninsula", "Highlands")
_FAC_NOUNS = ("Bridge", "Airport", "Stadium", "Hall", "Tower", "Centre", "Station", "Arena")
_UNITS = ("kilograms", "miles", "litres", "pounds", "metres", "feet", "acres", "tonnes", "grams")
_TYPE_WORDS = {  # how a hide model is told what to invent
    "DATE": "date",
    "MONEY": "amount of money",
    "PERCENT": "percentage",
    "QUANTITY": "quantity",
    "TIME": "time of day",
    "GPE": "city or country",
    "LOC": "location",
    "PERSON": "person's name",
    "WORK_OF_ART": "title of a book, film or song",
    "ORG": "company or organisation name",
    "NORP": "nationality or group",
    "LAW": "law",
    "FAC": "building or facility",
    "LANGUAGE": "language",
}


def _clashes(
    candidate: str, etype: str, text_cf: str, originals_cf: list[str], used: set[str]
) -> bool:
    """Would this surrogate leak an original or make Seek ambiguous?"""
    c = candidate.casefold()
    if not c.strip() or c in used or c in text_cf or "<" in c:
        return True
    if any(o in c for o in originals_cf):  # "East London" would re-release "London"
        return True
    # A PERSON surrogate's single names drive a fuzzy Seek rule; keep them unseen too.
    words = [w for w in c.split() if w.rstrip(".") not in PERSON_TITLES]
    return (
        etype == "PERSON"
        and len(c.split()) > 1
        and any(re.search(r"(?<!\w)" + re.escape(w) + r"(?!\w)", text_cf) for w in words)
    )


def surrogates(
    text: str,
    entities: list[tuple[str, str]],
    *,
    fake: Faker,
    model: Callable[[str, str], str | None] | None,
    consistent: bool = False,
) -> dict[str, str]:
    text_cf = text.casefold()
    originals_cf = [o.casefold() for o, _ in entities]
    used: set[str] = set()
    out: dict[str, str] = {}
    for n, (original, etype) in enumerate(entities, 1):
        chosen = None
        if model is not None:
            answer = model(original, etype)
            if answer and not _clashes(answer, etype, text_cf, originals_cf, used):
                chosen = answer
        if consistent and chosen is None:
            # A deterministic hide model: the entity alone picks its surrogate (no secret).
            fake.seed_instance(zlib.crc32(f"{etype}|{original}".encode()))
        for _ in range(_SURROGATE_TRIES if chosen is None else 0):
            candidate = _fake_like(fake, original, etype)
            if not _clashes(candidate, etype, text_cf, originals_cf, used):
                chosen = candidate
                break
        if chosen is None:  # exhausted (e.g. every nationality is in the text): a placeholder
            k = n
            while f"{etype}_{k}".casefold() in text_cf:
                k += 1
            chosen = placeholder(etype, k)
        used.add(chosen.casefold())
        out[original] = chosen
    return out


def _fake_like(fake: Faker, original: str, etype: str) -> str:
    """A faker surrogate of the same type, shaped like the original where that is cheap."""
    pick = fake.random_element
    words = original.split()
    if etype == "PERSON":
        if len(words) >= 2 and words[0].rstrip(".").lower() in PERSON_TITLES:
            return f"{words[0]} {fake.last_name()}"  # "Mr Smith" → "Mr Hughes"
        if len(words) == 1:  # "Smith" → a surname, "Sarah" → a first name
            return fake.first_name() if _is_first_name(original) else fake.last_name()
        return f"{fake.first_name()} {fake.last_name()}"
    if etype == "GPE":
        return fake.country() if _is_country(original) else fake.city()
    if etype == "ORG":
        return fake.company()
    if etype == "DATE":
        return _fake_date(fake, original)
    if etype == "TIME":
        h, m = fake.random_int(1, 12), fake.random_int(0, 59)
        if re.search(r"\d", original) is None:
            return pick(("this morning", "this afternoon", "tonight", "that evening"))
        if re.search(r"[ap]\.?m\.?", original, re.IGNORECASE):
            return f"{h}:{m:02d} {pick(('am', 'pm'))}"
        return f"{h + 12 * fake.random_int(0, 1) - 1:02d}:{m:02d}"
    if etype == "MONEY":
        # spaCy often leaves the symbol outside the span ("$" + "20"): add one only if inside.
        symbol = next((c for c in "£€$" if c in original), "")
        word = re.search(r"(?i)\b(dollars?|pounds?|euros?|quid|bucks)\b", original)
        amount = f"{symbol}{fake.random_int(2, 9999):,}"
        return f"{amount} {word.group(0)}" if word else amount
    if etype == "PERCENT":
        unit = "%" if "%" in original else " percent"
        return f"{fake.random_int(1, 99)}{unit}"
    if etype == "QUANTITY":
        return f"{fake.random_int(2, 500)} {pick(_UNITS)}"
    if etype == "NORP":
        return pick(_NORP)
    if etype == "LANGUAGE":
        return fake.language_name()
    if etype == "WORK_OF_ART":
        return "The " + " ".join(w.capitalize() for w in fake.words(2))
    if etype == "LAW":
        return f"the {fake.last_name()} Act of {fake.random_int(1950, 2020)}"
    if etype == "LOC":
        return f"{fake.last_name()} {pick(_LOC_NOUNS)}"
    if etype == "FAC":
        return f"{fake.last_name()} {pick(_FAC_NOUNS)}"
    if etype == IDENTIFIER:
        return _fake_identifier(fake, original)
    return f"{fake.last_name()} {etype.title()}"  # not reached for the 14 HaS types


def _fake_identifier(fake: Faker, original: str) -> str:
    """An identifier of the same shape: an e-mail, a URL, or digits for digits and capitals
    for capitals (``36110/97`` → ``52871/04``), separators kept."""
    if "@" in original:
        return fake.email()
    if original.lower().startswith(("http", "www.")):
        return fake.url()
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    return "".join(
        str(fake.random_int(0, 9))
        if c.isdigit()
        else letters[fake.random_int(0, 25)]
        if c.isalpha()
        else c
        for c in original
    )


def _is_first_name(name: str) -> bool:
    return name.casefold() in faker_first_names()


def _is_country(name: str) -> bool:
    return name.casefold().removeprefix("the ") in faker_countries()


def _fake_date(fake: Faker, original: str) -> str:
    """A date phrase of the original's shape; fixed ranges, so never depends on today."""
    year = fake.random_int(1990, 2024)
    month = MONTHS[fake.random_int(0, 11)]
    day = fake.random_int(1, 28)
    has_month = any(m in original for m in MONTHS)
    has_year = re.search(r"\b(1[89]|20)\d\d\b", original) is not None
    has_day = re.search(r"\b\d{1,2}(st|nd|rd|th)?\b", original) is not None
    if has_month and has_year and has_day:
        return f"{month} {day}, {year}" if original[:1].isalpha() else f"{day} {month} {year}"
    if has_month and has_year:
        return f"{month} {year}"
    if has_month:
        return f"{day} {month}" if has_day else month
    if has_year:
        return str(year)
    weekday = next((w for w in WEEKDAYS if w in original), None)
    if weekday is not None:  # "last Tuesday" → "last Friday"
        return original.replace(weekday, fake.random_element(WEEKDAYS))
    if re.search(r"\d", original):
        return f"{day} {month} {year}"
    return fake.random_element(RELATIVE_DATES)


# --------------------------------------------------------------------------------------------
# Optional HF hide model
# --------------------------------------------------------------------------------------------


def model_generator(name: str, rng: np.random.Generator) -> Callable[[str, str], str | None]:
    """Asks the HF model for one surrogate per entity; sampling is seeded from ``rng``."""
    tokenizer, model, seq2seq = generative_model(name)
    seed = int(rng.integers(2**31))

    def generate(original: str, etype: str) -> str | None:
        import torch

        kind = _TYPE_WORDS.get(etype, etype.lower())
        prompt = (
            f'Replace the {kind} "{original}" with a different, realistic {kind}. '
            "Answer with the replacement only."
        )
        if not seq2seq:
            prompt += "\nReplacement:"

        device = torch_device()  # the current device: the hide model generates there
        model.to(device)
        enc = tokenizer(prompt, return_tensors="pt").to(device)
        pad = (
            tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        )
        # crc32, not hash(): str hashes change between processes.
        with (
            seeded_torch(seed + zlib.crc32(f"{etype}|{original}".encode())),
            torch.inference_mode(),
        ):
            ids = model.generate(
                **enc, max_new_tokens=12, do_sample=True, top_p=0.9, pad_token_id=pad
            )
        new = ids[0] if seq2seq else ids[0, enc["input_ids"].shape[1] :]
        answer = tokenizer.decode(new, skip_special_tokens=True).strip().split("\n")[0]
        answer = answer.strip(" \"'.,;:")
        # A rambling answer is not a surrogate; faker takes over.
        return answer if 0 < len(answer) <= 60 else None

    return generate
