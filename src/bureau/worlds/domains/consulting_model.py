"""Consulting worlds, part 1: the engagement's content as data.

Constants, the facts a world is built from (segments, market sizes, growth rates, survey
respondents, interviewees, milestones) and the random draws that make them. The files are
written by `consulting_files`, the tasks asked about them by `consulting_tasks`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date
from itertools import pairwise

from ..fabric import Person, day, round_to, split_part
from ..spec import WorldContext

SEGMENTS = (
    *("Enterprise", "Corporate", "Mid-Market", "Growth Companies", "Small Business"),
    *("Micro Business", "Public Sector", "Education", "Consumer", "Households"),
    *("Nonprofits", "Healthcare Providers", "Retail Chains", "Franchises", "Professional Firms"),
)
"""Customer segments; a world takes four of its split's five (`fabric.split_part`, three ways)."""
REGIONS = (
    *("North America", "Nordics", "Europe", "DACH", "Asia-Pacific", "Southeast Asia"),
    *("Latin America", "Oceania", "Middle East & Africa", "Gulf States"),
    *("Iberia", "Benelux", "Central Europe", "South Asia", "East Africa"),
)
"""Regions; a world has all five of its split's part (three ways)."""
YEARS = (2025, 2026, 2027, 2028, 2029, 2030)
MARKETS = {
    "Retail": "in-store analytics",
    "Health": "remote patient monitoring",
    "Mobility": "fleet electrification services",
    "Foods": "plant-based protein ingredients",
    "Telecom": "private 5G networks",
    "Apparel": "circular fashion platforms",
    "Software": "workflow automation software",
}
PUBLISHERS = ("Altus Insights", "Greyfield Analytics", "Corvane Research", "Pellham Data")
ROLES = (
    "Head of Procurement",
    "VP Operations",
    "IT Director",
    "Finance Director",
    "Chief Digital Officer",
    "Category Manager",
    "Head of Strategy",
    "Operations Manager",
)
IV_SUFFIX = ("Systems", "Labs", "Group", "Works", "Partners", "Co", "Networks")
PAINS = (
    "Integration with legacy systems takes too long",
    "Pricing is hard to compare across vendors",
    "Onboarding needs too much internal staff time",
    "Reporting does not meet audit requirements",
    "Support response times are slow",
    "Contract terms lock us in for too long",
    "Data quality from current providers is poor",
)
MILESTONES = (
    ("Kick-off and data request", "Mobilisation and data collection", "Launch and data intake"),
    ("Market sizing model", "Demand model", "Revenue pool model"),
    ("Customer survey and interviews", "Buyer research and workshops", "Voice of the customer"),
    ("Competitive landscape review", "Competitor benchmarking", "Peer performance review"),
    ("Final recommendations", "Board recommendations", "Steering committee report"),
)
"""Statement-of-work milestones, one stage a row in order; each stage's three names are split
three ways (`fabric.split_part`), so a world's milestones are its split's name of each stage."""
PROPOSED_MILESTONES = (
    *("Pricing study", "Go-to-market plan"),
    *("Implementation roadmap", "Partner screening"),
    *("Pilot design", "Operating model review"),
)
"""A milestone proposed by email after signing, never priced in the statement of work."""
DRIVERS = ("Cloud migration", "Regulation", "Cost pressure", "Digital adoption", "Price decline")
DECK_V2 = "engagement/deliverables/market_sizing_v2.pptx"
DECK_V1 = "engagement/archive/market_sizing_v1.pptx"
SURVEY = "research/survey/customer_survey_2025.xlsx"
SURVEY_PRELIM = "research/survey/archive/customer_survey_2025_PRELIMINARY.xlsx"
SOW = "engagement/contract/statement_of_work_signed.pdf"
MILESTONE_CALENDAR = "calendar/engagement_milestones.ics"
TAM_SLIDE = {1: 3, 2: 4}  # deck version -> slide number of the TAM table (cover is slide 1)


@dataclass
class Respondent:
    rid: str
    segment: str
    region: str
    employees: int
    satisfaction: int
    wtp: int


@dataclass
class Interviewee:
    name: str
    role: str
    company: str
    segment: str
    budget: int
    file: str
    held: date


@dataclass
class Milestone:
    number: int
    name: str
    due: date
    fee: int
    revised_fee: int | None = None
    change_request: str | None = None
    """The change request proposing a new fee (approved or not), its file and the sponsor's
    decision email; the acceptance meeting's day in the engagement calendar."""
    cr_file: str = ""
    decision_mail: str = ""
    accepted_on: date | None = None

    @property
    def current_fee(self) -> int:
        return self.fee if self.revised_fee is None else self.revised_fee


@dataclass
class SlideRequest:
    who: str
    when: date
    channel: str  # "email" or "chat"
    slide: int
    metric: str
    segment: str
    year: int
    value: float


@dataclass
class ConsultingFacts:
    ctx: WorldContext
    firm: str
    partner: Person
    manager: Person
    analysts: list[Person]
    sponsor: Person
    cfo: Person
    market: str
    segments: list[str]
    regions: list[str]
    tam: dict[str, list[float]]
    sam: dict[str, list[float]]
    growth: dict[str, float]
    shares: dict[str, float]
    survey: list[Respondent]
    interviewees: list[Interviewee]
    milestones: list[Milestone]
    revised: dict[str, float] = field(default_factory=dict)
    revision_mails: list[str] = field(default_factory=list)
    proposed: str = ""
    """A milestone only proposed by email: the statement of work sets no fee for it."""
    approved_crs: list[str] = field(default_factory=list)
    cagr: dict[str, float] = field(default_factory=dict)
    industry_pdf: str = ""
    requests: list[SlideRequest] = field(default_factory=list)
    interview_mails: list[tuple[str, date, Interviewee]] = field(default_factory=list)

    def current_growth(self, segment: str) -> float:
        return self.revised.get(segment, self.growth[segment])


def sizing(
    rng: random.Random, segments: list[str]
) -> tuple[dict[str, list[float]], dict[str, float]]:
    tam, growth = {}, {}
    for s in segments:
        base = rng.randint(2000, 30000) / 10
        g = float(round_to(rng, 3.0, 15.0, 0.5))
        growth[s] = g
        tam[s] = [round(base * (1 + g / 100) ** (y - YEARS[0]), 1) for y in YEARS]
    return tam, growth


def shares(rng: random.Random, regions: list[str]) -> dict[str, float]:
    while True:
        weights = [rng.randint(40, 400) for _ in regions]
        values = [round(100 * w / sum(weights), 1) for w in weights]
        values[-1] = round(100 - sum(values[:-1]), 1)
        ordered = sorted(values)
        if min(values) > 0 and all(b - a >= 0.5 for a, b in pairwise(ordered)):
            return dict(zip(regions, values, strict=True))


def respondents(
    rng: random.Random, segments: list[str], regions: list[str], n: int
) -> list[Respondent]:
    cells = [(s, r) for s in segments for r in regions] * 2
    cells += [(rng.choice(segments), rng.choice(regions)) for _ in range(max(0, n - len(cells)))]
    rng.shuffle(cells)
    level = {s: rng.randint(30, 150) * 10 for s in segments}
    mood = {s: [rng.randint(1, 6) for _ in range(5)] for s in segments}
    factor = {r: rng.uniform(0.8, 1.25) for r in regions}
    return [
        Respondent(
            rid=f"R-{i:04d}",
            segment=s,
            region=r,
            employees=rng.randint(5, 5000),
            satisfaction=rng.choices([1, 2, 3, 4, 5], weights=mood[s])[0],
            wtp=int(round(level[s] * factor[r] * rng.uniform(0.7, 1.3), -1)),
        )
        for i, (s, r) in enumerate(cells, start=1)
    ]


def preliminary(rng: random.Random, survey: list[Respondent]) -> list[Respondent]:
    early = survey[: len(survey) * 3 // 5]
    return [
        Respondent(
            r.rid,
            r.segment,
            r.region,
            r.employees,
            min(5, max(1, r.satisfaction + rng.choice([-1, 0, 1]))),
            r.wtp + rng.choice([-100, -50, 0, 50, 100]),
        )
        for r in early
    ]


def milestones(rng: random.Random, split: str) -> list[Milestone]:
    start = date(2025, rng.randint(6, 9), rng.randint(1, 20))
    out, offset = [], 0
    names = [split_part(stage, split)[0] for stage in MILESTONES]
    for k, name in enumerate(names[: rng.randint(4, 5)], start=1):
        offset += rng.randint(10, 30)
        out.append(Milestone(k, name, day(start, offset), rng.randint(8, 50) * 5000))
    return out
