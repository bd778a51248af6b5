"""``synthetic-reviews``: a seeded, offline corpus of customer reviews that leak their authors.

Generative model
----------------
Authors. Each author gets a gender (``F``/``M``, 50/50) and a birth-year bin (the TP-UK bins
``<=1955 … >=1986``, weights :data:`AGE_WEIGHTS`) and writes 1–4 reviews. Authors, not documents,
are split into ``train``/``test``/``aux`` (greedy by document count within each (gender, age bin)
stratum, so split sizes track ``split_fractions`` closely); the attacker's ``aux`` split therefore
shares no author with the victims.

Documents. A review has 2–5 sentences about one of ten categories (restaurant, hotel, phone, book,
shoes, clothing, laptop, furniture, garage, hairdresser): an optional opening that sets the scene
(where most named entities live), one or more opinion sentences, an optional closing verdict.
The label (0 = negative, 1 = positive, 50/50 per document) is expressed only through opinion
phrases. To keep a bag-of-words classifier from being perfect, opinion sentences after the first
argue the other side with probability :data:`P_CONTRAST` ("To be fair, the food was lovely"),
the first opinion is lukewarm with probability :data:`P_HEDGED`, and closings are sometimes hedged.

Entities. Openings, staff remarks and fillers carry PERSON (faker names: staff, book authors),
GPE (UK cities, faker towns and countries), ORG (venue, brand, retailer and company names) and
DATE ("last Tuesday", "March 2019", "14 June 2017") spans, recorded with exact offsets.

Leakage. Each document is *leaky* with probability ``leak_rate`` (default 0.6); nothing else in a
document depends on its author's attributes, so ``leak_rate=0`` leaves them unpredictable. A leaky
document first draws the *apparent* attributes it will betray: the true gender, flipped with
probability :data:`P_GENDER_FLIP` (men do write "my husband"), and the true age bin with
probability :data:`P_AGE_EXACT`, a neighbouring bin with probability :data:`P_AGE_NEIGHBOUR`, any
bin otherwise. It then always carries a gender cue and, with probability :data:`P_AGE_CUE`, an age
cue, realised as

- kin terms and self-description ("my husband", "as a dad of two", "the lads from work");
- in the gendered categories (shoes, clothing, hairdresser), also a gendered product ("heels",
  "a beard trim") with probability :data:`P_PRODUCT`;
- life stage ("since I retired", "my first flat", "between school runs", "my grandchildren");
- age-typical style for the oldest and youngest groups (intensifiers "lowkey"/"literally" vs
  "rather"/"most", "one must say", "not the vibe"), with probability :data:`P_STYLE`;
- instead of the plain kin cue, with probability :data:`P_COMBINED`, a cue for both attributes
  at once ("as a grandmother of five") that only reveals a coarse age group.

Cues appear as their own sentence or as a prefix to an opinion ("As a mum of two, I found …");
a review too short for all its cues drops style first. So a leaky review betrays the true gender
with probability 0.97 and names the exact age bin about 0.8 of the time, which caps a perfect
attacker near 0.6·0.97 + 0.4·0.5 ≈ 0.78 for gender. On default settings a TF-IDF +
logistic-regression attacker trained on ``aux`` (600 reviews) reaches about 0.71–0.77 gender
accuracy (majority ≈ 0.51) and about 0.44–0.47 age-bin accuracy (majority ≈ 0.2) across seeds;
with ``leak_rate=0`` both sit at their majority baselines, with ``leak_rate=1`` they reach about
0.96 and 0.73. Splits are stratified by (gender, age bin), so the baselines match across splits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from annotated_types import Ge

from privaudit.corpora.base import Corpus
from privaudit.corpora.files import assign_splits, check_fractions, corpus_features
from privaudit.lexicon import MONTHS, WEEKDAYS
from privaudit.params import NonNegativeInt, Probability, checked

if TYPE_CHECKING:
    from faker import Faker

GENERATOR = "privaudit synthetic-reviews v1"
LABEL_NAMES = ["negative", "positive"]
ATTRIBUTE_NAMES = ["gender", "age_bin"]
GENDERS = ("F", "M")
AGE_BINS = ("<=1955", "1956-1963", "1964-1971", "1972-1978", "1979-1985", ">=1986")
AGE_WEIGHTS = (0.15, 0.17, 0.18, 0.18, 0.16, 0.16)
# Coarse life stage for cues that cannot name a bin (combined cues, style).
AGE_GROUP = {
    "<=1955": "old",
    "1956-1963": "old",
    "1964-1971": "mid",
    "1972-1978": "mid",
    "1979-1985": "young",
    ">=1986": "young",
}

# Rates of the generative model (see the module docstring).
P_AGE_CUE = 0.95
P_GENDER_FLIP = 0.03
P_AGE_EXACT = 0.82
P_AGE_NEIGHBOUR = 0.13
P_COMBINED = 0.25
P_PRODUCT = 0.35
P_STYLE = 0.35
P_PREFIX = 0.35
P_CONTRAST = 0.3
P_HEDGED = 0.07
P_HEDGED_CLOSING = 0.15
P_STAFF = 0.3
P_FILLER = 0.3
P_ENTITY_OPINION = 0.6

Piece = tuple[str, str | None]  # (text, entity type or None)

# --------------------------------------------------------------------------------------------
# Word lists
# --------------------------------------------------------------------------------------------

GENERIC_POS = (
    "excellent", "superb", "fantastic", "lovely", "brilliant", "outstanding", "great",
    "wonderful", "impressive", "spot on", "faultless", "top-notch", "amazing", "perfect",
    "delightful", "terrific",
)  # fmt: skip
GENERIC_NEG = (
    "awful", "terrible", "poor", "dreadful", "disappointing", "shocking", "rubbish", "mediocre",
    "appalling", "useless", "substandard", "abysmal", "shoddy", "horrible", "pathetic",
)  # fmt: skip
LUKEWARM = ("okay", "fine", "average", "decent enough", "passable", "so-so", "acceptable")
STAFF_POS = (
    "friendly", "helpful", "attentive", "welcoming", "professional", "lovely", "polite",
    "knowledgeable", "patient", "cheerful",
)  # fmt: skip
STAFF_NEG = (
    "rude", "dismissive", "unhelpful", "unfriendly", "clueless", "impatient", "abrupt",
    "condescending", "careless",
)  # fmt: skip
INTENSIFIERS = (
    "really ", "very ", "quite ", "absolutely ", "so ", "incredibly ", "pretty ", "extremely ",
    "genuinely ", "truly ",
)  # fmt: skip
STYLE_INTENSIFIERS = {
    "young": ("lowkey ", "literally ", "super ", "legit ", "actually so "),
    "old": ("most ", "rather ", "thoroughly ", "jolly ", "exceedingly "),
}
WE = (
    "We", "I", "My partner and I", "My friend and I", "My family and I", "A few colleagues and I",
    "My sister and I", "Some friends and I",
)  # fmt: skip
UK_CITIES = (
    "London", "Manchester", "Leeds", "Bristol", "Glasgow", "Edinburgh", "Cardiff", "Belfast",
    "Liverpool", "Newcastle", "Sheffield", "Nottingham", "Brighton", "York", "Bath", "Oxford",
    "Cambridge", "Norwich", "Exeter", "Aberdeen", "Leicester", "Coventry", "Plymouth", "Swansea",
    "Southampton", "Derby", "Inverness", "Chester", "Durham", "Canterbury",
)  # fmt: skip
RELATIVE_DATES = (
    "yesterday", "last weekend", "last week", "last month", "two weeks ago", "a few days ago",
    "last summer", "earlier this year",
)  # fmt: skip
HOLIDAYS = ("Christmas", "the Easter weekend", "the bank holiday weekend", "New Year")
NAME_ADJ = (
    "Golden", "Crooked", "Red", "Old", "Hungry", "Blue", "Little", "Royal", "Silver", "Green",
    "Black", "Wild",
)  # fmt: skip
NAME_NOUN = (
    "Fork", "Spoon", "Lion", "Kitchen", "Oak", "Anchor", "Olive", "Pig", "Table", "Grill", "Swan",
    "Fox", "Harbour", "Lantern",
)  # fmt: skip
BRANDS = (
    "Nokara", "Zentek", "Veltro", "Orbix", "Lumio", "Kairo", "Novaphone", "Trion", "Helix",
    "Quanta", "Brightwell", "Corvin",
)  # fmt: skip
MODELS = ("X", "S", "Nova", "Pro", "Edge", "Note", "Zen", "Air", "Max", "Lite")
TITLE_ADJ = (
    "Silent", "Forgotten", "Last", "Hidden", "Broken", "Golden", "Winter", "Distant", "Burning",
    "Quiet", "Lost",
)  # fmt: skip
TITLE_NOUN = (
    "Harbour", "Garden", "Letter", "House", "River", "Daughter", "Promise", "Orchard",
    "Lighthouse", "Storm", "Summer", "Kingdom",
)  # fmt: skip

OPINION_ANY = (
    "The {aspect} {be} {intens}{adj}.",
    "I found the {aspect} {intens}{adj}.",
    "I thought the {aspect} {be} {intens}{adj}.",
    "Honestly, the {aspect} {be} {intens}{adj}.",
    "As for the {aspect}, {it} {be} {intens}{adj}.",
    "The {aspect} {be} {adj} and the {aspect} {be} {intens}{adj}.",
    "I have to say the {aspect} {be} {intens}{adj}.",
    "I'd describe the {aspect} as {intens}{adj}.",
    "The {aspect} {be} {adj}, and {intens}{adj} at that.",
)
# Opinions that name a date or a business, for reviews without an opening to carry entities.
ENTITY_OPINIONS = {
    True: (
        "I went to {org} {date} and the {aspect} {be} {intens}{adj}.",
        "I tried {org} {date} and found the {aspect} {intens}{adj}.",
        "I visited {date} and the {aspect} {be} {intens}{adj}.",
        "I went to {org} in {gpe} and the {aspect} {be} {intens}{adj}.",
    ),
    False: (
        "I got it from {org} and the {aspect} {be} {intens}{adj}.",
        "I bought it {date} and found the {aspect} {intens}{adj}.",
        "I ordered it from {org} {date} and the {aspect} {be} {intens}{adj}.",
        "I've had it since {date} and the {aspect} {be} {intens}{adj}.",
    ),
}
OPINION = {
    1: (
        "I was {intens}impressed with the {aspect}.",
        "I can't fault the {aspect}.",
        "The {aspect} really stood out.",
        "Special mention for the {aspect}, which {be} {intens}{adj}.",
        "I loved the {aspect}.",
        "The {aspect} exceeded my expectations.",
        "I was pleasantly surprised by the {aspect}.",
        "Ten out of ten for the {aspect}.",
        "I couldn't have asked for better {aspect}.",
        "The {aspect} {be} exactly what I hoped for.",
        "I'm {intens}happy with the {aspect}.",
        "I would happily pay again just for the {aspect}.",
    ),
    0: (
        "I was {intens}disappointed with the {aspect}.",
        "The {aspect} left a lot to be desired.",
        "The {aspect} {be} a real letdown.",
        "I can't believe how {adj} the {aspect} {be}.",
        "I had nothing but problems with the {aspect}.",
        "Don't get me started on the {aspect}.",
        "The {aspect} {be} nowhere near as good as advertised.",
        "Sadly, the {aspect} {be} {intens}{adj}.",
        "I'm {intens}unhappy with the {aspect}.",
        "I complained about the {aspect} but nothing was done.",
        "I regret paying for the {aspect}.",
    ),
}
# Sentences that argue against the document's label, softened.
CONTRAST = {
    1: (
        "The only downside was the {aspect}, which {be} a bit {oadj}.",
        "Not everything was perfect, as the {aspect} {be} {oadj}.",
        "The {aspect} could be better, but it's a minor gripe.",
        "I wasn't sure about the {aspect} at first.",
        "Admittedly, the {aspect} {be} {oadj}.",
        "My one complaint is that the {aspect} {be} {luke}.",
    ),
    0: (
        "To be fair, the {aspect} {be} {oadj}.",
        "The {aspect} {be} {oadj}, I'll give them that.",
        "The {aspect} {be} {luke}, but that's about it.",
        "I really wanted to like it.",
        "On paper the {aspect} looked great.",
        "I admit the {aspect} {be} {oadj}.",
    ),
}
HEDGED = (
    "The {aspect} {be} {luke}, nothing special.",
    "I have mixed feelings about this one.",
    "The {aspect} {be} {luke} at best.",
    "It was {luke}, to be honest.",
    "I honestly can't decide what I think of the {aspect}.",
)
STAFF = {
    1: (
        "{role} {person} was {intens}{staff}.",
        "Special thanks to {person}, who went above and beyond.",
        "{person} couldn't have been more helpful.",
        "{role}, {person}, made us feel {intens}welcome.",
    ),
    0: (
        "{role} {person} was {intens}{staff}.",
        "When I complained, {person} just shrugged.",
        "{person} was {staff} and unhelpful.",
        "{role}, {person}, couldn't have cared less.",
    ),
}
FILLERS = {
    True: (  # services
        "We visited {date}.",
        "We were there {date}.",
        "I went along {date} with a friend.",
        "It was our first time in {place}.",
        "We'd booked it {date}.",
    ),
    False: (  # products
        "It arrived {date}.",
        "I ordered it {date}.",
        "It was delivered to my home in {gpe}.",
        "I've had it since {date}.",
        "I paid for it {date}.",
    ),
}
CLOSINGS = {
    1: (
        "Would definitely recommend.",
        "Highly recommended.",
        "Five stars from me.",
        "I will definitely be back.",
        "Worth every penny.",
        "Already recommended it to friends.",
        "Great value for money.",
        "Keep up the good work!",
        "Can't wait to go back.",
        "Couldn't be happier.",
    ),
    0: (
        "Would not recommend.",
        "Avoid at all costs.",
        "Never again.",
        "Save your money.",
        "I've asked for a refund.",
        "One star is too generous.",
        "Very poor value for money.",
        "I won't be back.",
        "Not worth the money.",
        "Such a waste of money.",
    ),
}
HEDGED_CLOSINGS = {
    1: (
        "Overall it was decent enough.",
        "Probably worth it overall.",
        "Not perfect, but I'd go again.",
        "On balance, I'm glad I went for it.",
    ),
    0: (
        "Not sure I'd bother again.",
        "Maybe it was an off day.",
        "It might suit some people, but not me.",
        "On balance, I wish I hadn't bothered.",
    ),
}

# ---- attribute cues: (sentences, prefixes); prefixes precede an opinion that starts with "I ".
GENDER_CUES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # Parallel wording: only the kin or self-description words differ between the groups.
    "F": (
        (
            "My husband agreed with me on this one.",
            "My husband thinks the same.",
            "I'm a busy mum of two, so I don't have time for hassle.",
            "My husband was the one who suggested it.",
            "My husband and the kids came along too.",
            "The other mums at school had recommended it.",
            "I'm a mum, so practicality matters to me.",
            "Even my husband, who never writes reviews, told me to post this.",
            "My boyfriend came with me.",
            "As a woman on my own, I notice these things.",
            "The girls from work had recommended it.",
        ),
        ("As a mum of two, ", "As a busy mum, ", "Like my husband, ", "As a woman, "),
    ),
    "M": (
        (
            "My wife agreed with me on this one.",
            "My wife thinks the same.",
            "I'm a busy dad of two, so I don't have time for hassle.",
            "My wife was the one who suggested it.",
            "My wife and the kids came along too.",
            "The other dads at school had recommended it.",
            "I'm a dad, so practicality matters to me.",
            "Even my wife, who never writes reviews, told me to post this.",
            "My girlfriend came with me.",
            "As a bloke on my own, I notice these things.",
            "The lads from work had recommended it.",
        ),
        ("As a dad of two, ", "As a busy dad, ", "Like my wife, ", "As a bloke, "),
    ),
}
AGE_CUES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # Life stage, with a few keywords repeated per bin the way real reviewers repeat them.
    "<=1955": (
        (
            "Since I retired I have more time for this sort of thing.",
            "My grandchildren told me to leave a review.",
            "I'm writing this with my grandchildren's help.",
            "I've been retired and on my pension for some years now.",
            "We have been married for over fifty years.",
            "I'm in my seventies, so I've seen a lot.",
            "My grandchildren and great-grandchildren keep me busy.",
        ),
        ("As a retired pensioner, ", "Being long retired, ", "In my seventies, "),
    ),
    "1956-1963": (
        (
            "Now that I've taken early retirement, I shop around more.",
            "Our first grandchild arrived last year, so we're busier than ever.",
            "As a baby boomer, I expect proper service.",
            "With the kids long grown up and left home, we have more time for ourselves.",
            "I'm nearly sixty and counting down to early retirement.",
            "I'm in my late fifties.",
            "I turned sixty recently.",
        ),
        ("Having just taken early retirement, ", "As a baby boomer, ", "Nearly sixty, "),
    ),
    "1964-1971": (
        (
            "I'm in my late forties with two teenagers.",
            "My eldest teenager has just started university.",
            "With two teenagers in the house, nothing lasts long.",
            "I was a teenager in the eighties.",
            "As a Gen Xer, I'm sceptical of marketing.",
            "The mortgage is finally almost paid off.",
            "I turned fifty this year.",
        ),
        ("As a Gen Xer, ", "With two teenagers at home, ", "Now that I've hit fifty, "),
    ),
    "1972-1978": (
        (
            "I'm in my early forties.",
            "Between the school run and work, I don't have much spare time.",
            "My kids are at primary school, so weekends are hectic.",
            "I spent my teenage years in the nineties listening to Britpop.",
            "Juggling work, the school run and the kids' homework is my daily routine.",
            "I've just turned forty.",
        ),
        ("In my early forties, ", "Between school runs, ", "With the kids at primary school, "),
    ),
    "1979-1985": (
        (
            "I'm in my early thirties with a toddler.",
            "We've just had our first baby.",
            "Our toddler keeps us very busy.",
            "As a millennial, I do all my shopping online.",
            "We recently bought our first house, with the baby on the way.",
            "We got married last summer and the baby is due soon.",
            "Our toddler has just started nursery.",
        ),
        ("As a millennial, ", "As a new parent with a toddler, ", "In my early thirties, "),
    ),
    ">=1986": (
        (
            "I'm a student at uni, so money is tight.",
            "I've just moved into my first flat.",
            "My housemates at uni and I share everything.",
            "I'm in my early twenties.",
            "I was revising for exams at uni at the time.",
            "Paying off my student loan means I watch every penny.",
            "I've just left uni and started my first proper job.",
        ),
        ("As a student, ", "On a student budget, ", "In my early twenties, "),
    ),
}
COMBINED_CUES: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("F", "old"): (
        (
            "As a grandmother of five, I know good value.",
            "I've been a widow since my husband passed away.",
            "My husband and I are both retired now.",
            "My husband and I have been married over forty years.",
        ),
        ("As a grandmother of five, ", "Now that my husband and I are retired, "),
    ),
    ("M", "old"): (
        (
            "As a grandfather of five, I know good value.",
            "I've been a widower since my wife passed away.",
            "My wife and I are both retired now.",
            "My wife and I have been married over forty years.",
        ),
        ("As a grandfather of five, ", "Now that my wife and I are retired, "),
    ),
    ("F", "mid"): (
        (
            "As a working mum with two teenagers, I'm hard to please.",
            "My husband and I have just become empty nesters.",
            "I'm a mum of three in my forties.",
        ),
        ("As a working mum of teenagers, ", "As a mum in her forties, "),
    ),
    ("M", "mid"): (
        (
            "As a working dad with two teenagers, I'm hard to please.",
            "My wife and I have just become empty nesters.",
            "I'm a dad of three in my forties.",
        ),
        ("As a working dad of teenagers, ", "As a dad in his forties, "),
    ),
    ("F", "young"): (
        (
            "My boyfriend and I have just moved into our first flat.",
            "I'm a new mum on maternity leave with our first baby.",
            "My husband and I only got married last summer.",
        ),
        ("As a young mum, ", "As a new mum on maternity leave, "),
    ),
    ("M", "young"): (
        (
            "My girlfriend and I have just moved into our first flat.",
            "I'm a new dad on paternity leave with our first baby.",
            "My wife and I only got married last summer.",
        ),
        ("As a young dad, ", "As a new dad on paternity leave, "),
    ),
}
STYLE_CUES: dict[str, dict[int, tuple[str, ...]]] = {
    "young": {
        1: (
            "Honestly such a vibe.",
            "Literally obsessed with it.",
            "Lowkey the best thing I've tried this year.",
            "Ten out of ten, no notes.",
            "The vibes were immaculate.",
        ),
        0: (
            "Not the vibe at all.",
            "Literally the worst, not gonna lie.",
            "Big yikes from me.",
            "Lowkey a total scam.",
            "The vibes were off from the start.",
        ),
    },
    "old": {
        1: (
            "A splendid experience, one must say.",
            "Most agreeable indeed.",
            "Jolly good value, I must say.",
            "First class, one must say.",
            "Quite splendid all round.",
        ),
        0: (
            "Most unsatisfactory, one must say.",
            "Frankly, not up to scratch at all.",
            "Standards have slipped dreadfully, I'm afraid.",
            "A most disappointing affair, one must say.",
            "I shall be writing to the management.",
        ),
    },
}
STYLE_PREFIXES = {
    "young": ("Ngl, ", "Not gonna lie, ", "Lowkey, ", "Literally, "),
    "old": ("I must say, ", "One must say, ", "Quite frankly, ", "I dare say "),
}


@dataclass(frozen=True)
class _Category:
    name: str
    service: bool
    org: str  # which name generator makes its ORG entities
    openings: tuple[str, ...]
    aspects_sg: tuple[str, ...]
    aspects_pl: tuple[str, ...]
    pos: tuple[str, ...]
    neg: tuple[str, ...]
    roles: tuple[str, ...]
    items: tuple[str, ...] = ()
    items_by_gender: dict[str, tuple[str, ...]] = field(default_factory=dict)


_PRODUCT_ROLES = ("The customer service agent", "The delivery driver", "The sales assistant")

CATEGORIES: tuple[_Category, ...] = (
    _Category(
        "restaurant",
        True,
        "restaurant",
        (
            "{we} had dinner at {org} in {gpe} {date}.",
            "{we} booked a table at {org} for a birthday meal.",
            "Popped into {org} for a quick lunch {date}.",
            "This review is for {org} on the high street in {gpe}.",
            "{we} tried {org} for the first time {date}.",
            "Went to {org} after reading the reviews.",
            "{we} ordered a takeaway from {org}.",
            "{we} had Sunday lunch at {org}.",
        ),
        ("food", "service", "atmosphere", "wine list", "dessert", "steak", "menu", "decor"),
        ("portions", "staff", "prices", "chips", "starters", "cocktails"),
        ("delicious", "tasty", "fresh", "generous", "perfectly cooked"),
        ("bland", "cold", "greasy", "overcooked", "stingy", "overpriced"),
        ("Our waiter", "Our server", "The manager", "The chef"),
    ),
    _Category(
        "hotel",
        True,
        "hotel",
        (
            "{we} stayed two nights at {org} in {gpe}.",
            "{we} stayed at {org} {date}.",
            "Booked {org} for a weekend break in {place}.",
            "{we} spent a week at {org} on our trip to {place}.",
            "Stayed one night at {org} before an early flight.",
            "I was at {org} for a work conference {date}.",
            "{we} checked into {org} {date}.",
        ),
        ("room", "bed", "breakfast", "view", "location", "bathroom", "pool", "spa", "Wi-Fi"),
        ("staff", "towels", "facilities", "rooms"),
        ("spotless", "comfortable", "spacious", "cosy", "quiet"),
        ("dirty", "cramped", "noisy", "tired", "shabby"),
        ("The receptionist", "The night porter", "The duty manager", "Our housekeeper"),
    ),
    _Category(
        "phone",
        False,
        "retailer",
        (
            "I bought the {brand} {model} {date}.",
            "Ordered a new phone from {org} {date}.",
            "I upgraded to the {brand} {model} after my old phone died.",
            "Got the {brand} {model} on contract through {org}.",
            "I've had this phone for about three months now.",
            "Picked up a {brand} handset while travelling in {place}.",
        ),
        ("battery life", "camera", "screen", "sound quality", "signal", "charger", "software"),
        ("speakers", "updates", "apps"),
        ("fast", "reliable", "crisp", "responsive", "sleek"),
        ("laggy", "slow", "glitchy", "flimsy", "unreliable"),
        _PRODUCT_ROLES,
    ),
    _Category(
        "book",
        False,
        "retailer",
        (
            "I read {title} by {person} {date}.",
            "Just finished {title} by {person}.",
            "Bought {title} from {org} for my holiday in {place}.",
            "Our book club picked {title} this month.",
            "I picked up {title} on a friend's recommendation.",
            "{title}, the new novel by {person}, came out {date}.",
        ),
        ("plot", "ending", "writing", "pacing", "main character", "dialogue", "cover", "twist"),
        ("characters", "chapters", "descriptions"),
        ("gripping", "moving", "beautifully written", "clever", "page-turning"),
        ("dull", "predictable", "tedious", "clunky", "confusing"),
        _PRODUCT_ROLES,
    ),
    _Category(
        "shoes",
        False,
        "retailer",
        (
            "I bought a pair of {item} from {org}.",
            "Ordered some {item} online from {org} {date}.",
            "My new {item} from {org} arrived {date}.",
            "I've been wearing my new {item} for a month now.",
            "Picked up some {item} in the sale at {org} in {gpe}.",
        ),
        ("fit", "sole", "stitching", "leather", "comfort", "sizing", "grip", "heel"),
        ("laces", "insoles", "materials"),
        ("comfortable", "sturdy", "stylish", "well made", "supportive"),
        ("uncomfortable", "flimsy", "cheap-looking", "tight", "poorly made"),
        _PRODUCT_ROLES,
        ("trainers", "walking boots", "sandals", "running shoes", "slippers"),
        {
            "F": ("heels", "ballet flats", "wedge sandals", "court shoes", "kitten heels"),
            "M": ("brogues", "men's trainers", "work boots", "loafers", "men's dress shoes"),
        },
    ),
    _Category(
        "clothing",
        False,
        "retailer",
        (
            "I ordered {item} from {org} {date}.",
            "Bought {item} from {org} for a wedding.",
            "I picked up {item} at {org} in {gpe}.",
            "Treated myself to {item} from {org}.",
            "I've worn {item} from {org} a few times now.",
        ),
        ("fabric", "fit", "stitching", "colour", "sizing", "cut", "quality", "delivery"),
        ("seams", "buttons", "pockets"),
        ("flattering", "soft", "well made", "stylish", "true to size"),
        ("scratchy", "see-through", "badly sewn", "shapeless", "cheap-looking"),
        _PRODUCT_ROLES,
        ("a winter coat", "a jumper", "a pair of jeans", "a hoodie", "a rain jacket"),
        {
            "F": ("a maxi dress", "a blouse", "a pencil skirt", "a maternity top", "a bikini"),
            "M": ("a men's suit", "a shirt and tie", "a pair of chinos", "men's boxers", "a tux"),
        },
    ),
    _Category(
        "laptop",
        False,
        "retailer",
        (
            "I bought the {brand} {model} laptop {date}.",
            "Ordered a laptop from {org} for work.",
            "My new {brand} laptop arrived {date}.",
            "Got a {brand} {model} from {org} in {gpe}.",
            "I've used this laptop every day for a few months.",
        ),
        ("keyboard", "screen", "battery", "trackpad", "performance", "fan", "build quality"),
        ("ports", "hinges", "speakers"),
        ("fast", "quiet", "solid", "responsive", "light"),
        ("sluggish", "noisy", "flimsy", "buggy", "heavy"),
        _PRODUCT_ROLES,
    ),
    _Category(
        "furniture",
        False,
        "retailer",
        (
            "We ordered a {item} from {org} {date}.",
            "The {item} from {org} took three weeks to arrive.",
            "Bought a {item} for the spare room {date}.",
            "I ordered a {item} from {org} in {gpe}.",
            "We finally replaced our old {item}.",
        ),
        ("assembly", "frame", "finish", "delivery", "wood", "colour", "cushioning"),
        ("instructions", "legs", "drawers", "screws"),
        ("sturdy", "solid", "elegant", "well made", "easy"),
        ("wobbly", "flimsy", "scratched", "damaged", "confusing"),
        _PRODUCT_ROLES,
        ("sofa", "dining table", "wardrobe", "bookcase", "bed frame", "desk", "reading chair"),
    ),
    _Category(
        "garage",
        True,
        "garage",
        (
            "Took my car to {org} in {gpe} for its MOT.",
            "Booked my car in at {org} {date} for a service.",
            "My car broke down near {gpe} and {org} sorted it.",
            "Had a new clutch fitted at {org}.",
            "I've used {org} for a few years now.",
            "{org} replaced my brakes {date}.",
        ),
        ("service", "repair", "price", "waiting area", "quote", "communication", "workmanship"),
        ("mechanics", "staff", "parts"),
        ("honest", "quick", "thorough", "professional", "fair"),
        ("slow", "dishonest", "overpriced", "sloppy", "careless"),
        ("The mechanic", "The service manager", "The receptionist"),
    ),
    _Category(
        "hairdresser",
        True,
        "salon",
        (
            "I had {item} at {org} {date}.",
            "Booked in with {person} at {org} for {item}.",
            "Went to {org} in {gpe} for {item}.",
            "First visit to {org} for {item}.",
            "I popped into {org} for {item} {date}.",
        ),
        ("cut", "colour", "salon", "head massage", "consultation", "result", "booking system"),
        ("stylists", "products", "prices"),
        ("flawless", "stylish", "professional", "relaxing", "precise"),
        ("uneven", "rushed", "patchy", "careless", "wonky"),
        ("My stylist", "The junior stylist", "The salon owner"),
        ("a haircut", "a trim", "a restyle", "a colour", "a wash and cut"),
        {
            "F": ("a cut and blow-dry", "highlights", "a balayage", "a bridal updo", "extensions"),
            "M": (
                "a skin fade",
                "a beard trim",
                "a short back and sides",
                "a hot shave",
                "a buzz cut",
            ),
        },
    ),
)


# --------------------------------------------------------------------------------------------
# Document writer
# --------------------------------------------------------------------------------------------

_SLOT = re.compile(r"\{(\w+)\}")
_DATE_LO, _DATE_HI = date(2012, 1, 1), date(2021, 12, 31)  # fixed: "today" would break seeding


@dataclass
class _Cue:
    sentences: tuple[str, ...]
    prefixes: tuple[str, ...]


@dataclass
class _Doc:
    text: str
    label: int
    entities: list[dict[str, Any]]


class _Writer:
    """Renders one review at a time from the templates; all randomness comes from rng and fake."""

    def __init__(self, rng: np.random.Generator, fake: Faker) -> None:
        self.rng = rng
        self.fake = fake
        # Per-document state, reset by write().
        self.cat: _Category = CATEGORIES[0]
        self.item = ""
        self.polarity = 1
        self.plural = False
        self.used_aspects: set[str] = set()
        self.intens: tuple[str, ...] = INTENSIFIERS

    def pick(self, options: Sequence[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    # ---- entities: each returns (prefix outside the span, span text)
    def _clean(self, make: Any, fallback: Sequence[str]) -> str:
        # Faker can yield "St. Kitts" or "Virgin Islands, U.S."; dots would split sentences.
        for _ in range(5):
            value = str(make())
            if not re.search(r"[.()!?,]", value):
                return value
        return self.pick(fallback)

    def person(self) -> str:
        if self.rng.random() < 0.3:
            return self.fake.first_name()
        return f"{self.fake.first_name()} {self.fake.last_name()}"

    def gpe(self, abroad: bool = False) -> str:
        """A town (real UK or faker-made), or with ``abroad`` sometimes a country."""
        u = self.rng.random()
        if abroad and u < 0.5:
            return self._clean(self.fake.country, UK_CITIES)
        if u < 0.7:
            return self.pick(UK_CITIES)
        return self._clean(self.fake.city, UK_CITIES)

    def date(self) -> tuple[str, str]:
        u = self.rng.random()
        if u < 0.2:
            return "", f"last {self.pick(WEEKDAYS)}"
        if u < 0.4:
            return "", self.pick(RELATIVE_DATES)
        if u < 0.5:
            return "over ", self.pick(HOLIDAYS)
        if u < 0.75:
            return "in ", f"{self.pick(MONTHS)} {int(self.rng.integers(2012, 2022))}"
        d = self.fake.date_between(start_date=_DATE_LO, end_date=_DATE_HI)
        return "on ", f"{d.day} {MONTHS[d.month - 1]} {d.year}"

    def org(self) -> tuple[str, str]:
        kind, u = self.cat.org, self.rng.random()
        last = self._clean(self.fake.last_name, ("Smith",))
        if kind == "restaurant":
            if u < 0.5:
                return "", f"The {self.pick(NAME_ADJ)} {self.pick(NAME_NOUN)}"
            if u < 0.8:
                return "", f"{last}'s"
            return "", self._clean(self.fake.company, ("Smith Ltd",))
        if kind == "hotel":
            if u < 0.5:
                return "the ", f"{self.pick(NAME_ADJ)} {self.pick(NAME_NOUN)} Hotel"
            if u < 0.8:
                return "", f"{last} House"
            return "the ", f"{self.pick(UK_CITIES)} Grand"
        if kind == "garage":
            return "", (f"{last} Motors" if u < 0.5 else f"{last}'s Garage")
        if kind == "salon":
            if u < 0.5:
                return "", f"{self.fake.first_name()}'s Hair Studio"
            return "", f"{self.pick(NAME_ADJ)} Scissors"
        if u < 0.6:
            return "", self._clean(self.fake.company, ("Smith Ltd",))
        return "", f"{self.pick(NAME_NOUN)} Direct"

    # ---- template rendering
    def slot(self, name: str) -> list[Piece]:
        if name == "we":
            return [(self.pick(WE), None)]
        if name == "org":
            prefix, text = self.org()
            return [(prefix, None), (text, "ORG")]
        if name == "brand":
            return [(self.pick(BRANDS), "ORG")]
        if name == "model":
            return [(f"{self.pick(MODELS)} {int(self.rng.integers(2, 15))}", None)]
        if name in ("gpe", "place"):  # "place" may be abroad (trips, holidays)
            return [(self.gpe(abroad=name == "place"), "GPE")]
        if name == "date":
            prefix, text = self.date()
            return [(prefix, None), (text, "DATE")]
        if name == "person":
            return [(self.person(), "PERSON")]
        if name == "title":
            return [(f"The {self.pick(TITLE_ADJ)} {self.pick(TITLE_NOUN)}", None)]
        if name == "item":
            return [(self.item, None)]
        if name == "aspect":
            return [(self.aspect(), None)]
        if name == "be":
            return [("were" if self.plural else "was", None)]
        if name == "it":
            return [("they" if self.plural else "it", None)]
        if name in ("adj", "oadj"):
            pol = self.polarity if name == "adj" else 1 - self.polarity
            return [(self.adjective(pol), None)]
        if name == "luke":
            return [(self.pick(LUKEWARM), None)]
        if name == "intens":
            return [("" if self.rng.random() < 0.35 else self.pick(self.intens), None)]
        if name == "role":
            return [(self.pick(self.cat.roles), None)]
        if name == "staff":
            return [(self.pick(STAFF_POS if self.polarity else STAFF_NEG), None)]
        raise KeyError(f"unknown template slot {name!r}")

    def aspect(self) -> str:
        n_sg, n_pl = len(self.cat.aspects_sg), len(self.cat.aspects_pl)
        for _ in range(4):  # avoid repeating an aspect within a review
            i = int(self.rng.integers(n_sg + n_pl))
            name = self.cat.aspects_sg[i] if i < n_sg else self.cat.aspects_pl[i - n_sg]
            if name not in self.used_aspects:
                break
        self.used_aspects.add(name)
        self.plural = i >= n_sg
        return name

    def adjective(self, polarity: int) -> str:
        generic, specific = (GENERIC_POS, self.cat.pos) if polarity else (GENERIC_NEG, self.cat.neg)
        return self.pick(specific if self.rng.random() < 0.4 else generic)

    def render(self, template: str, polarity: int, prefix: str = "") -> list[Piece]:
        self.polarity = polarity
        pieces: list[Piece] = [(prefix, None)] if prefix else []
        pos = 0
        for m in _SLOT.finditer(template):
            pieces.append((template[pos : m.start()], None))
            pieces.extend(self.slot(m.group(1)))
            pos = m.end()
        pieces.append((template[pos:], None))
        pieces = [p for p in pieces if p[0]]
        # Sentence-initial capital ("last Tuesday" → "Last Tuesday"), applied before spans exist.
        first, etype = pieces[0]
        pieces[0] = (first[0].upper() + first[1:], etype)
        return pieces

    # ---- cues
    def cues(self, gender: str, age_bin: str, label: int) -> tuple[list[_Cue], bool]:
        """The cues of a leaky document, and whether it also names a gendered product."""
        rng = self.rng
        g = gender if rng.random() >= P_GENDER_FLIP else GENDERS[1 - GENDERS.index(gender)]
        a = _noisy_bin(rng, age_bin)
        group = AGE_GROUP[a]
        cues: list[_Cue] = []
        product = False
        if self.cat.items_by_gender and rng.random() < P_PRODUCT:
            product = True  # a gendered product, on top of the kin cue below
            self.item = self.pick(self.cat.items_by_gender[g])
        if rng.random() < P_COMBINED:
            cues.append(_Cue(*COMBINED_CUES[(g, group)]))
        else:
            cues.append(_Cue(*GENDER_CUES[g]))
        if rng.random() < P_AGE_CUE:
            cues.append(_Cue(*AGE_CUES[a]))
        if group != "mid" and rng.random() < P_STYLE:
            # Style colours the whole review: its intensifiers and a remark in its polarity.
            self.intens = STYLE_INTENSIFIERS[group] + INTENSIFIERS[:3]
            # Cues are ordered gender, age, style: a short review with no room drops the last.
            cues.append(_Cue(STYLE_CUES[group][label], STYLE_PREFIXES[group]))
        return cues, product

    def write(self, gender: str, age_bin: str, leaky: bool) -> _Doc:
        rng = self.rng
        self.cat = CATEGORIES[int(rng.integers(len(CATEGORIES)))]
        self.item = self.pick(self.cat.items) if self.cat.items else ""
        self.used_aspects = set()
        self.intens = INTENSIFIERS
        label = int(rng.random() < 0.5)
        n_sent = int(rng.integers(2, 6))

        cues, product = self.cues(gender, age_bin, label) if leaky else ([], False)
        standalone: list[str] = []
        prefixes: list[str] = []
        budget = n_sent - 1  # keep at least one sentence for the opinion
        for cue in cues:
            if budget > 0 and rng.random() >= P_PREFIX:
                standalone.append(self.pick(cue.sentences))
                budget -= 1
            else:
                prefixes.append(self.pick(cue.prefixes))
        prefixes = prefixes[: n_sent - len(standalone)]  # each prefix needs an opinion of its own

        # Layout of the non-cue sentences: [opening] opinions... [closing]
        k = n_sent - len(standalone)
        has_open = k >= 2 and (product or rng.random() < 0.9)
        has_close = k - has_open >= 2 and rng.random() < 0.75
        # Every prefix needs an opinion to lead (k ≥ len(prefixes) after the trim above).
        if k - has_open - has_close < len(prefixes):
            has_close = False
        if k - has_open - has_close < len(prefixes):
            has_open = False
        m = k - int(has_open) - int(has_close)

        sentences: list[list[Piece]] = []
        if has_open:
            sentences.append(self.render(self.pick(self.cat.openings), label))
        hedged = rng.random() < P_HEDGED
        staff_done = False
        prefix_slots = set(rng.permutation(m)[: len(prefixes)].tolist())
        opinions: list[list[Piece]] = []
        for i in range(m):
            prefix = prefixes.pop() if i in prefix_slots else ""
            contrast = i > 0 and rng.random() < P_CONTRAST
            pol = 1 - label if contrast else label
            if not prefix and i > 0 and not staff_done and rng.random() < P_STAFF:
                staff_done = True
                opinions.append(self.render(self.pick(STAFF[pol]), pol))
                continue
            if not prefix and i > 0 and m >= 2 and rng.random() < P_FILLER:
                opinions.append(self.render(self.pick(FILLERS[self.cat.service]), label))
                continue
            if i == 0 and hedged:
                bank: Sequence[str] = HEDGED
            elif i == 0 and not has_open and rng.random() < P_ENTITY_OPINION:
                bank = ENTITY_OPINIONS[self.cat.service]
            elif contrast:
                bank = CONTRAST[label]
            else:
                bank = OPINION_ANY + OPINION[label]
            if prefix:  # "As a dad, I found …" needs an opinion that starts with "I "
                bank = [t for t in bank if t.startswith("I ")] or [
                    t for t in OPINION_ANY + OPINION[label] if t.startswith("I ")
                ]
            opinions.append(self.render(self.pick(bank), label, prefix=prefix))
        sentences.extend(opinions)
        # Stand-alone cues go anywhere after the opening.
        for cue_text in standalone:
            at = int(rng.integers(1 if has_open else 0, len(sentences) + 1))
            sentences.insert(at, [(cue_text, None)])
        if has_close:
            hedge_close = rng.random() < P_HEDGED_CLOSING
            closing = self.pick((HEDGED_CLOSINGS if hedge_close else CLOSINGS)[label])
            sentences.append([(closing, None)])
        return _assemble(sentences, label)


def _assemble(sentences: list[list[Piece]], label: int) -> _Doc:
    parts: list[str] = []
    entities: list[dict[str, Any]] = []
    offset = 0
    for s_idx, pieces in enumerate(sentences):
        if s_idx:
            parts.append(" ")
            offset += 1
        for text, etype in pieces:
            if etype is not None:
                entities.append(
                    {"start": offset, "end": offset + len(text), "type": etype, "text": text}
                )
            parts.append(text)
            offset += len(text)
    return _Doc("".join(parts), label, entities)


def _noisy_bin(rng: np.random.Generator, age_bin: str) -> str:
    """The age bin a cue betrays: mostly the true one, sometimes a neighbour or any bin."""
    i = AGE_BINS.index(age_bin)
    u = rng.random()
    if u < P_AGE_EXACT:
        return age_bin
    if u < P_AGE_EXACT + P_AGE_NEIGHBOUR:
        neighbours = [j for j in (i - 1, i + 1) if 0 <= j < len(AGE_BINS)]
        return AGE_BINS[neighbours[int(rng.integers(len(neighbours)))]]
    return AGE_BINS[int(rng.integers(len(AGE_BINS)))]


# --------------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------------


@checked
def synthetic_reviews(
    n_docs: Annotated[int, Ge(10)] = 3000,  # so that train, test and aux all get documents
    *,
    seed: NonNegativeInt = 0,
    leak_rate: Probability = 0.6,  # the share of reviews with an attribute cue
    split_fractions: Sequence[float] = (0.6, 0.2, 0.2),
) -> Corpus:
    """Generate the ``synthetic-reviews`` corpus (see the module docstring for the model).

    Same arguments → byte-identical texts; nothing is cached on disk and nothing is downloaded.
    """
    fractions = check_fractions(split_fractions, "split_fractions")
    import datasets
    from faker import Faker

    n_docs, seed, leak_rate = int(n_docs), int(seed), float(leak_rate)
    rng = np.random.default_rng(seed)
    fake = Faker("en_GB")
    fake.seed_instance(seed)  # instance-level: never touch Faker's global random state

    # Authors and how many reviews each writes (the last one is trimmed to hit n_docs exactly).
    counts: list[int] = []
    while sum(counts) < n_docs:
        counts.append(int(rng.integers(1, 5)))
    counts[-1] -= sum(counts) - n_docs
    genders = rng.choice(GENDERS, size=len(counts))
    ages = rng.choice(AGE_BINS, size=len(counts), p=np.asarray(AGE_WEIGHTS))

    writer = _Writer(rng, fake)
    seen: set[str] = set()
    rows: list[dict[str, Any]] = []
    for a_idx, n in enumerate(counts):
        author = f"author-{a_idx:05d}"
        gender, age_bin = str(genders[a_idx]), str(ages[a_idx])
        for _ in range(n):
            leaky = bool(rng.random() < leak_rate)
            for _attempt in range(20):  # duplicates are rare; redraw to keep every text unique
                doc = writer.write(gender, age_bin, leaky)
                if doc.text not in seen:
                    break
            seen.add(doc.text)
            rows.append(
                {
                    "text": doc.text,
                    "label": doc.label,
                    "attributes": {"gender": gender, "age_bin": age_bin},
                    "entities": doc.entities,
                    "author": author,
                }
            )

    # Stratify by (gender, age bin) so every split mirrors the population's attribute mix.
    strata = [f"{g}|{a}" for g, a in zip(genders, ages, strict=True)]
    split_of_author = assign_splits(counts, fractions, rng, strata=strata)
    features = corpus_features(ATTRIBUTE_NAMES)
    splits: dict[str, datasets.Dataset] = {}
    doc_author = np.repeat(np.arange(len(counts)), counts)
    for split in ("train", "test", "aux"):
        idx = np.flatnonzero(split_of_author[doc_author] == split)
        idx = rng.permutation(idx)  # interleave authors within a split
        splits[split] = datasets.Dataset.from_list([rows[i] for i in idx], features=features)
    return Corpus(
        name="synthetic-reviews",
        splits=splits,
        label_names=list(LABEL_NAMES),
        attribute_names=list(ATTRIBUTE_NAMES),
        info={"seed": seed, "n_docs": n_docs, "leak_rate": leak_rate, "generator": GENERATOR},
    )
