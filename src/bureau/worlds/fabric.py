"""Names, dates and amounts that worlds are woven from.

Everything draws from a `random.Random` seeded per world, so a world depends only on the seed.

Every value an instruction can hold (a company, a person, a contract id, a code name...) comes
from its split's part of one shared pool, and the part a value belongs to is decided by a hash
of the value (`split_part`, `in_split`), not by its place in a list or a range. The three splits
(train, validation, eval) thus never share a value, and their values have the same distribution
of letters, digits, lengths and subword tokens: a held-out prompt asks for values never trained
on, not for a kind of value never trained on (a leading digit, a longer name).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TypeVar

T = TypeVar("T")

FIRST = [
    "Ana",
    "Ben",
    "Chloe",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Imani",
    "Jonas",
    "Kai",
    "Lena",
    "Marco",
    "Nadia",
    "Omar",
    "Priya",
    "Quinn",
    "Rafael",
    "Sofia",
    "Tariq",
    "Uma",
    "Victor",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoe",
    "Aidan",
    "Bea",
    "Carlos",
    "Dana",
    "Emil",
    "Fatima",
    "Gabe",
    "Hana",
    "Ivan",
    "Julia",
    "Kofi",
    "Lucia",
    "Mateo",
    "Nina",
    "Oscar",
    "Paula",
    "Rohan",
    "Sara",
    "Tomas",
    "Ursula",
    "Vera",
    "Will",
    "Yara",
]
LAST = [
    "Abbott",
    "Banerjee",
    "Castillo",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kowalski",
    "Larsen",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quintero",
    "Rossi",
    "Schmidt",
    "Tanaka",
    "Ueda",
    "Varga",
    "Whitfield",
    "Xu",
    "Yilmaz",
    "Zhang",
    "Almeida",
    "Brennan",
    "Cho",
    "Delgado",
    "Esposito",
    "Fontaine",
    "Grant",
    "Holm",
    "Iqbal",
    "Jovanovic",
    "Keller",
    "Lindqvist",
    "Mendes",
    "Novak",
    "Osei",
    "Park",
    "Reyes",
    "Sato",
    "Torres",
    "Vance",
    "Weber",
    "Young",
]
PREFIX = [
    "Amber",
    "Birch",
    "Cobalt",
    "Delta",
    "Ember",
    "Fjord",
    "Granite",
    "Harbor",
    "Indigo",
    "Juniper",
    "Kestrel",
    "Lumen",
    "Meridian",
    "Northgate",
    "Onyx",
    "Pioneer",
    "Quarry",
    "Redwood",
    "Summit",
    "Tidewater",
    "Umber",
    "Vantage",
    "Willow",
    "Yarrow",
    "Zephyr",
    "Aster",
    "Beacon",
    "Cinder",
    "Drift",
    "Everly",
    "Falcon",
    "Glacier",
    "Halcyon",
    "Ironwood",
    "Jasper",
    "Keystone",
    "Larch",
    "Mosaic",
    "Nimbus",
    "Orchard",
    "Pinnacle",
    "Quill",
    "Ridge",
    "Sable",
    "Thornbury",
    "Upland",
    "Verity",
    "Wexford",
    "Aurora",
    "Bramble",
    "Cascade",
    "Dunmore",
    "Elmstead",
    "Foxglove",
    "Greystone",
    "Hollis",
    "Isle",
    "Kingsley",
    "Lockhart",
    "Maple",
    "Norwood",
    "Oakley",
    "Prism",
    "Quay",
    "Rowan",
    "Sterling",
    "Tamarack",
    "Unity",
    "Valor",
    "Wren",
    "Alder",
    "Bluewater",
    "Crescent",
    "Dovetail",
    "Evergreen",
]
_HEADS = (
    *("Ash", "Bay", "Black", "Bright", "Cedar", "Clear", "Cold", "Copper", "Crane", "Deer"),
    *("East", "Elm", "Fair", "Fern", "Glen", "Gold", "Green", "Hazel", "High", "Iron"),
    *("Kings", "Lake", "Lark", "Long", "Mill", "Moss", "North", "Oak", "Pine", "Red"),
    *("Rock", "Rose", "Silver", "South", "Stone", "Sun", "West", "White", "Wild", "Wolf"),
)
_TAILS = (
    *("brook", "bridge", "field", "ford", "gate", "hill", "hurst", "land", "leigh", "mere"),
    *("mont", "more", "port", "ridge", "stead", "ton", "vale", "view", "well", "wood"),
)
PREFIX += sorted({h + t for h in _HEADS for t in _TAILS} - set(PREFIX))
"""Company names' first words: the handwritten ones, then place-like compounds (`Ashbrook`,
`Copperford`), 871 in all, so that each split's part (`split_part`) holds about 290 and a
policy meets a company of its own split's part rarely enough that it must copy the name, not
recall it."""
SUFFIX = {
    "law": ("Holdings", "Industries", "Group", "Technologies", "Logistics", "Energy", "Foods"),
    "consulting": ("Retail", "Health", "Mobility", "Foods", "Telecom", "Apparel", "Software"),
    "banking": ("Capital", "Manufacturing", "Networks", "Materials", "Pharma", "Systems", "Brands"),
}
CITIES = [
    "Boston",
    "Chicago",
    "Denver",
    "Austin",
    "Seattle",
    "Atlanta",
    "Toronto",
    "London",
    "Dublin",
    "Frankfurt",
    "Singapore",
    "Sydney",
    "Madrid",
    "Milan",
    "Oslo",
    "Zurich",
]
LAW_FIRMS = ("Harrow & Vale LLP", "Linden Marsh LLP", "Cole Brandt LLP", "Ashby Quist LLP")
CONSULTANCIES = ("Northbridge Partners", "Calder & Finch", "Stratum Advisory", "Brightline Group")
BANKS = ("Halden Securities", "Morrow Brothers", "Castleton Capital", "Ardent Partners")


@dataclass(frozen=True)
class Person:
    first: str
    last: str
    title: str
    email_domain: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"

    @property
    def email(self) -> str:
        return f"{self.first.lower()}.{self.last.lower()}@{self.email_domain}"

    @property
    def address(self) -> str:
        return f"{self.name} <{self.email}>"


def slug(text: str) -> str:
    out = "".join(ch.lower() if ch.isalnum() else "-" for ch in text)
    return "-".join(part for part in out.split("-") if part)


SPLITS = ("train", "validation", "eval")
"""The splits worlds are built for. Any other split name draws as `eval` does."""


def split_index(split: str, ways: int = 3) -> int:
    """Which part of a pool `split` draws from: train 0, validation 1, eval (and any other) 2;
    with `ways=2`, train 0 and every held-out split 1."""
    if split == "train":
        return 0
    return 1 if ways == 2 or split == "validation" else 2


def value_hash(value: object) -> int:
    """A stable 64-bit hash of the value's text (not Python's `hash`, which varies by process)."""
    digest = hashlib.blake2b(str(value).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def in_split(value: object, split: str, ways: int = 3) -> bool:
    """Whether a value drawn from an open range (a contract id `C-569`) belongs to `split`: its
    hash modulo `ways`. Every split then sees the whole range, each value in one split only."""
    return value_hash(value) % ways == split_index(split, ways)


def split_part(pool: Sequence[T], split: str, ways: int = 3) -> list[T]:
    """The part of a finite pool that worlds of `split` draw from, in the pool's order: the
    pool ranked by `value_hash`, every `ways`-th entry by rank, so the parts are as even as the
    pool allows and no value is in two. Names that reach an instruction (companies, people,
    counterparties, peers, projects, segments, regions, milestones, laws, resolutions) come from
    such parts, so training, validation and evaluation worlds never ask about the same names.
    `ways=2` splits a pool too small for three into train and held out (validation and eval
    then share it)."""
    if ways not in (2, 3):
        raise ValueError(f"a pool is split 2 or 3 ways, not {ways}")
    ranked = sorted(range(len(pool)), key=lambda i: (value_hash(pool[i]), i))
    chosen = {i for rank, i in enumerate(ranked) if rank % ways == split_index(split, ways)}
    return [value for i, value in enumerate(pool) if i in chosen]


def company_name(rng: random.Random, split: str, domain: str, taken: set[str]) -> str:
    """A company name unique within `taken`, from the split's part of the prefix list."""
    part = split_part(PREFIX, split)
    for _ in range(1000):
        name = f"{rng.choice(part)} {rng.choice(SUFFIX[domain])}"
        if name not in taken:
            taken.add(name)
            return name
    # A huge split exhausts the pairs; a roman-numeral-free suffix keeps names readable.
    n = len(taken)
    name = f"{rng.choice(part)} {rng.choice(SUFFIX[domain])} {n}"
    taken.add(name)
    return name


def people(
    rng: random.Random, n: int, titles: list[str], email_domain: str, split: str
) -> list[Person]:
    """`n` distinct people with the split's surnames (`split_part`)."""
    pairs = rng.sample([(f, last) for f in FIRST for last in split_part(LAST, split)], n)
    return [
        Person(first, last, titles[i % len(titles)], email_domain)
        for i, (first, last) in enumerate(pairs)
    ]


def day(base: date, offset_days: int) -> date:
    return base + timedelta(days=offset_days)


def at(d: date, hour: int, minute: int = 0) -> datetime:
    return datetime(d.year, d.month, d.day, hour, minute)


def long_date(d: date) -> str:
    return f"{d.strftime('%B')} {d.day}, {d.year}"


def money(x: float, currency: str = "USD") -> str:
    """USD 2,450,000 or USD 2,450,000.50."""
    return f"{currency} {x:,.0f}" if float(x).is_integer() else f"{currency} {x:,.2f}"


def millions(x: float, digits: int = 1) -> str:
    return f"${x:,.{digits}f}m"


def round_to(rng: random.Random, lo: float, hi: float, step: float) -> float:
    """A random multiple of `step` in [lo, hi]."""
    n = rng.randint(int(lo // step), int(hi // step))
    value = n * step
    return int(value) if float(step).is_integer() else round(value, 6)
