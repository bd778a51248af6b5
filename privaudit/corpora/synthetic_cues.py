"""The attribute-cue tables of ``synthetic-reviews``: how a leaky review betrays its author.

Kin terms and self-description per gender, life stage per birth-year bin, cues for both at once
per (gender, coarse age group), and age-typical style for the oldest and youngest groups. Data
only: when and how often each cue appears is decided in :mod:`privaudit.corpora.synthetic` (see
its module docstring); the review's own phrases are in
:mod:`privaudit.corpora.synthetic_phrases`.

The writer picks from these tuples by index with a seeded rng, so editing a table, or reordering
one, changes every generated corpus and every score measured on it.
"""

from __future__ import annotations

# Each cue is (sentences, prefixes); prefixes precede an opinion that starts with "I ".
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

# Intensifiers of a review written in an age group's style (used beside three plain ones).
STYLE_INTENSIFIERS = {
    "young": ("lowkey ", "literally ", "super ", "legit ", "actually so "),
    "old": ("most ", "rather ", "thoroughly ", "jolly ", "exceedingly "),
}
