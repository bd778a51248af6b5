"""The phrase tables of ``synthetic-reviews``: what a review says.

Word lists, sentence templates and the ten review categories, as data beside the generator in
:mod:`privaudit.corpora.synthetic` (which holds the generative model, its rates and the writer
that fills the templates' ``{slots}``). The attribute cues, how a review betrays its author, are
in :mod:`privaudit.corpora.synthetic_cues`.

The writer picks from these tuples by index with a seeded rng, so editing a table, or reordering
one, changes every generated corpus and every score measured on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# --------------------------------------------------------------------------------------------
# Word lists
# --------------------------------------------------------------------------------------------

GENERIC_POS = (
    "excellent",
    "superb",
    "fantastic",
    "lovely",
    "brilliant",
    "outstanding",
    "great",
    "wonderful",
    "impressive",
    "spot on",
    "faultless",
    "top-notch",
    "amazing",
    "perfect",
    "delightful",
    "terrific",
)
GENERIC_NEG = (
    "awful",
    "terrible",
    "poor",
    "dreadful",
    "disappointing",
    "shocking",
    "rubbish",
    "mediocre",
    "appalling",
    "useless",
    "substandard",
    "abysmal",
    "shoddy",
    "horrible",
    "pathetic",
)
LUKEWARM = ("okay", "fine", "average", "decent enough", "passable", "so-so", "acceptable")
STAFF_POS = (
    "friendly",
    "helpful",
    "attentive",
    "welcoming",
    "professional",
    "lovely",
    "polite",
    "knowledgeable",
    "patient",
    "cheerful",
)
STAFF_NEG = (
    "rude",
    "dismissive",
    "unhelpful",
    "unfriendly",
    "clueless",
    "impatient",
    "abrupt",
    "condescending",
    "careless",
)
INTENSIFIERS = (
    "really ",
    "very ",
    "quite ",
    "absolutely ",
    "so ",
    "incredibly ",
    "pretty ",
    "extremely ",
    "genuinely ",
    "truly ",
)
WE = (
    "We",
    "I",
    "My partner and I",
    "My friend and I",
    "My family and I",
    "A few colleagues and I",
    "My sister and I",
    "Some friends and I",
)
UK_CITIES = (
    "London",
    "Manchester",
    "Leeds",
    "Bristol",
    "Glasgow",
    "Edinburgh",
    "Cardiff",
    "Belfast",
    "Liverpool",
    "Newcastle",
    "Sheffield",
    "Nottingham",
    "Brighton",
    "York",
    "Bath",
    "Oxford",
    "Cambridge",
    "Norwich",
    "Exeter",
    "Aberdeen",
    "Leicester",
    "Coventry",
    "Plymouth",
    "Swansea",
    "Southampton",
    "Derby",
    "Inverness",
    "Chester",
    "Durham",
    "Canterbury",
)
RELATIVE_DATES = (
    "yesterday",
    "last weekend",
    "last week",
    "last month",
    "two weeks ago",
    "a few days ago",
    "last summer",
    "earlier this year",
)
HOLIDAYS = ("Christmas", "the Easter weekend", "the bank holiday weekend", "New Year")
NAME_ADJ = (
    "Golden",
    "Crooked",
    "Red",
    "Old",
    "Hungry",
    "Blue",
    "Little",
    "Royal",
    "Silver",
    "Green",
    "Black",
    "Wild",
)
NAME_NOUN = (
    "Fork",
    "Spoon",
    "Lion",
    "Kitchen",
    "Oak",
    "Anchor",
    "Olive",
    "Pig",
    "Table",
    "Grill",
    "Swan",
    "Fox",
    "Harbour",
    "Lantern",
)
BRANDS = (
    "Nokara",
    "Zentek",
    "Veltro",
    "Orbix",
    "Lumio",
    "Kairo",
    "Novaphone",
    "Trion",
    "Helix",
    "Quanta",
    "Brightwell",
    "Corvin",
)
MODELS = ("X", "S", "Nova", "Pro", "Edge", "Note", "Zen", "Air", "Max", "Lite")
TITLE_ADJ = (
    "Silent",
    "Forgotten",
    "Last",
    "Hidden",
    "Broken",
    "Golden",
    "Winter",
    "Distant",
    "Burning",
    "Quiet",
    "Lost",
)
TITLE_NOUN = (
    "Harbour",
    "Garden",
    "Letter",
    "House",
    "River",
    "Daughter",
    "Promise",
    "Orchard",
    "Lighthouse",
    "Storm",
    "Summer",
    "Kingdom",
)

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


# --------------------------------------------------------------------------------------------
# Review categories
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Category:
    """One review category: the templates of its opening sentence, its aspects, its own
    adjectives, its staff roles and what a review of it is about (``items``; by the writer's
    apparent gender in ``items_by_gender``, for the gendered categories)."""

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

CATEGORIES: tuple[Category, ...] = (
    Category(
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
    Category(
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
    Category(
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
    Category(
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
    Category(
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
    Category(
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
    Category(
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
    Category(
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
    Category(
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
    Category(
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
