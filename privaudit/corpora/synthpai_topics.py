"""The keyword lexicon that gives each SynthPAI comment its utility label, a coarse topic.

SynthPAI has no topic field, so :func:`topic_of` derives one: each topic's words are counted in
the lower-cased comment (whole words; an entry ending in ``*`` also matches the words it
starts), the topic with the most hits wins, a tie goes to the topic listed first in
:data:`TOPIC_WORDS`, and a comment with no hit is ``other``. The lexicon is fixed data, so the
label is a deterministic function of the text. Words that name a private attribute's value
outright ("married", "divorced", "phd", "salary") are left out on purpose, so the topic is what
the comment talks about, not who its author is; topics and attributes still correlate (a
comment about the family is more often by someone married), as any real forum's would.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

OTHER = "other"

# Specific topics first: a tie goes to the earlier one.
TOPIC_WORDS: dict[str, tuple[str, ...]] = {
    "food": (
        "food*", "cook*", "recipe*", "restaurant*", "eat", "eats", "eating", "ate", "dinner*",
        "lunch*", "breakfast*", "brunch*", "coffee*", "tea", "teas", "wine*", "beer*", "bake*",
        "baking", "bakery", "kitchen*", "dish", "dishes", "meal*", "taste*", "tasty", "flavor*",
        "flavour*", "chef*", "cuisine*", "snack*", "grill*", "bbq", "pizza*", "pasta*", "bread*",
        "cheese*", "spice*", "spicy", "sauce*", "soup*", "dessert*", "chocolate*", "cafe*",
        "café*", "bistro*", "vegan*", "vegetarian*", "sushi", "burger*", "taco*", "grocer*",
        "fruit*", "veggie*", "vegetable*", "apron*", "plate*", "cuppa", "espresso*", "latte*",
        "foodie*", "dumpling*", "noodle*", "rice", "curry", "curries", "delicious", "yummy",
        "menu*", "picnic*", "barbecue*", "butter*", "tapas", "pastr*", "croissant*",
    ),
    "tech": (
        "tech", "techie*", "technolog*", "computer*", "code", "coding", "coder*", "software",
        "app", "apps", "phone*", "smartphone*", "gadget*", "ai", "internet", "online", "data",
        "pc", "pcs", "laptop*", "device*", "digital*", "algorithm*", "programming",
        "programmer*", "debug*", "robot*", "wifi", "wi-fi", "gpu*", "cpu*", "keyboard*",
        "screen*", "smart", "electronic*", "software's", "python", "javascript", "linux",
        "server*", "cyber*", "hack*", "startup*", "crypto*", "blockchain", "vr", "drone*",
        "printer*", "console*", "update*", "upgrade*", "tesla", "ev", "evs", "engineering",
        "science*", "scientific", "scientist*", "research*", "lab", "labs", "physics",
        "chemistry", "biology", "math", "maths", "mathematic*", "telescope*", "astronom*",
        "stars", "galax*", "planet*", "solar", "renewable*",
    ),
    "family_relationships": (
        "family", "families", "kid", "kids", "child", "children", "childhood", "son", "sons",
        "daughter*", "parent*", "mom", "moms", "mum", "mums", "mother*", "dad", "dads",
        "father*", "wife", "husband*", "spouse*", "partner", "partners", "marriage*", "wedding*",
        "dating", "date", "dates", "relationship*", "romance", "romantic", "love", "loved",
        "lover*", "grandkid*", "grandchild*", "grandma*", "grandpa*", "grandmother*",
        "grandfather*", "grandparent*", "nonna*", "abuel*", "sibling*", "brother*", "sister*",
        "girlfriend*", "boyfriend*", "friend", "friends", "friendship*", "roommate*",
        "flatmate*", "household*", "baby", "babies", "toddler*", "teen", "teens", "teenager*",
        "nuptials", "in-law*", "heart", "heartbreak*", "breakup*", "ex", "couple*", "bond*",
        "neighbor", "neighbors", "neighbour", "neighbours",
    ),
    "leisure": (
        "music*", "musician*", "movie*", "film", "films", "cinema*", "book", "books",
        "read", "reading", "reads", "novel", "novels", "game", "games", "gaming", "gamer*",
        "sport", "sports", "football", "soccer", "hockey", "basketball", "tennis", "golf",
        "rugby", "cricket", "gym*", "workout*", "hobby", "hobbies", "hike", "hikes", "hiking",
        "art", "arts", "artist*", "artwork*", "concert*", "tv", "show", "shows", "series",
        "netflix", "festival*", "danc*", "paint*", "garden*", "knit*", "photograph*", "camping",
        "fishing", "yoga", "running", "jog*", "swim*", "ski", "skiing", "surf*", "band",
        "bands", "song*", "guitar*", "piano*", "theater*", "theatre*", "opera*", "podcast*",
        "anime", "comic*", "craft*", "diy", "lego*", "puzzle*", "chess", "vinyl*", "jazz",
        "playlist*", "binge*", "marathon*", "museum*", "gallery", "galleries", "sculpt*",
        "poetry", "poem*", "fitness", "lifting", "weights", "cycling", "boardgame*",
        "trail*", "club*", "karaoke", "sauna*", "fun",
    ),
    "education": (
        "school*", "college*", "uni", "university", "universities", "degree*", "study",
        "studies", "studying", "studied", "student*", "class", "classes", "classroom*",
        "teacher*", "teaching", "professor*", "exam*", "academ*", "lecture*", "campus*",
        "tuition", "thesis", "dissertation*", "homework", "grades", "diploma*", "graduat*",
        "grad", "grads", "course*", "curricul*", "scholarship*", "alumni", "semester*",
        "textbook*", "tutor*", "learn", "learned", "learning", "education*", "syllabus",
        "library", "libraries",
    ),
    "places": (
        "travel*", "trip", "trips", "city", "cities", "town", "towns", "neighborhood*",
        "neighbourhood*", "street*", "park", "parks", "beach*", "mountain*", "weather",
        "rain*", "snow*", "winter*", "summer*", "spring", "autumn", "sunshine", "sunny",
        "climate", "house", "houses", "housing", "apartment*", "flat", "flats", "architect*",
        "building*", "traffic", "commut*", "tourist*", "tourism", "vacation*", "holiday*",
        "flight*", "local", "locals", "urban", "suburb*", "downtown", "village*", "countryside",
        "ocean*", "sea", "seaside", "river*", "lake*", "fjord*", "skyline*", "metro", "subway*",
        "tram*", "bus", "buses", "bike*", "transit", "abroad", "expat*", "hometown*", "moved",
        "move", "moving", "visit*", "landmark*", "square", "squares", "cobble*", "brick*",
        "facade*", "façade*", "skyscraper*", "high-rise*", "country", "countries", "culture*",
        "cultural", "home", "homes", "streets", "harbor*", "harbour*", "island*",
        "road*", "highway*", "bridge*", "castle*", "cathedral*", "church*", "temple*",
        "market*", "bazaar*", "scenery", "landscape*", "view", "views", "breeze", "heat",
        "cold", "humid*", "storm*", "fog*",
    ),
    "work_money": (
        "job", "jobs", "work", "working", "workplace*", "workload*", "workday*", "workforce",
        "coworker*", "co-worker*", "career*", "boss", "bosses", "office*", "pay", "paid",
        "paycheck*", "payday", "budget*", "rent", "rents", "bill", "bills", "money", "cash",
        "saving", "savings", "save", "invest*", "mortgage*", "tax", "taxes", "taxed",
        "retire*", "pension*", "promotion*", "client*", "colleague*", "hustle*", "gig", "gigs",
        "freelanc*", "profession*", "business*", "finance*", "financial*", "financ*", "earn*",
        "wage*", "debt*", "loan*", "expens*", "afford*", "cost", "costs", "costly", "price*",
        "pricey", "cheap*", "luxur*", "frugal*", "shift", "shifts", "overtime", "hire",
        "hired", "hiring", "interview*", "corporat*", "entrepreneur*", "nurse", "nurses",
        "nursing", "hospital*", "patient", "patients", "deadline*", "meeting*", "manager*",
        "management", "employ*", "unemploy*", "industr*", "economy", "economic*", "inflation",
        "spend", "spending", "spent", "penny", "pennies", "dollar*", "euro*", "franc*",
        "yuan", "yen", "pound", "pounds", "bank*", "stock*", "invoice*", "spreadsheet*",
        "accounting", "accountant*", "lawyer*", "legal", "trade", "trades", "craftsman*",
        "customer*", "sales", "marketing", "contract*", "wealth*", "rich", "broke", "income*",
    ),
}  # fmt: skip

_WORD = re.compile(r"[\w'’-]+")  # a word, apostrophes and hyphens kept ("in-laws", "kid's")


def _pattern(words: Sequence[str]) -> re.Pattern[str]:
    """One regex for a topic: exact words, and prefixes for entries ending in ``*``."""
    parts = [re.escape(w[:-1]) + r"[\w'’-]*" if w.endswith("*") else re.escape(w) for w in words]
    return re.compile(r"(?<![\w'’-])(?:" + "|".join(parts) + r")(?![\w'’-])")


_PATTERNS = {topic: _pattern(words) for topic, words in TOPIC_WORDS.items()}


def topic_hits(texts: Sequence[str]) -> pd.DataFrame:
    """Each text's count of each topic's words (one column per topic, in lexicon order)."""
    import pandas as pd  # lazy: `privaudit list` imports synthpai, never pandas

    lowered = pd.Series(list(texts), dtype=object).str.lower()
    return pd.DataFrame({t: lowered.str.count(p) for t, p in _PATTERNS.items()})


def topic_of(texts: Sequence[str]) -> np.ndarray:
    """Each text's topic: the most hits, a tie to the earlier topic, ``other`` with none."""
    hits = topic_hits(texts)
    best = hits.to_numpy().argmax(axis=1)  # argmax takes the first maximum: the tie rule
    topics = np.asarray(list(TOPIC_WORDS), dtype=object)[best]
    return np.where(hits.to_numpy().max(axis=1) > 0, topics, OTHER).astype(str)
