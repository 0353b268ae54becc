"""Management consulting: a consultancy's market assessment for the world's company.

Files: market-sizing decks (the final v2 and a superseded v1 with stale numbers), a customer
survey workbook with a formula summary and named ranges (plus a preliminary extract), interview
notes, an industry outlook PDF with two-column text and a ruled table (plus a draft), a signed
statement of work with a ruled milestone table (plus a draft), change requests, client mail that
revises growth assumptions and asks about slides and interviews, and an #engagement channel.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date
from itertools import pairwise
from typing import Any

from ..fabric import CONSULTANCIES, FIRST, LAST, Person, at, day, long_date, round_to, slug
from ..render.documents import DocSpec
from ..render.messages import ChatMessage, Email
from ..render.sheets import Formula, WorkbookSpec
from ..render.slides import DeckSpec
from ..spec import (
    Difficulty,
    Kind,
    PdfProbe,
    TaskSpec,
    Template,
    WorldContext,
    entities,
    file_exists,
    numeric,
    pptx_content,
    text,
    xlsx_cell,
)

SEGMENTS = ("Enterprise", "Mid-Market", "Small Business", "Public Sector", "Consumer")
REGIONS = ("North America", "Europe", "Asia-Pacific", "Latin America", "Middle East & Africa")
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
    "Kick-off and data request",
    "Market sizing model",
    "Customer survey and interviews",
    "Competitive landscape review",
    "Final recommendations",
)
DRIVERS = ("Cloud migration", "Regulation", "Cost pressure", "Digital adoption", "Price decline")
DECK_V2 = "engagement/deliverables/market_sizing_v2.pptx"
DECK_V1 = "engagement/archive/market_sizing_v1.pptx"
SURVEY = "research/survey/customer_survey_2025.xlsx"
SURVEY_PRELIM = "research/survey/archive/customer_survey_2025_PRELIMINARY.xlsx"
SOW = "engagement/contract/statement_of_work_signed.pdf"
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


@dataclass
class Milestone:
    number: int
    name: str
    due: date
    fee: int
    revised_fee: int | None = None

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
    tam: dict[str, list[float]]
    sam: dict[str, list[float]]
    growth: dict[str, float]
    shares: dict[str, float]
    survey: list[Respondent]
    interviewees: list[Interviewee]
    milestones: list[Milestone]
    revised: dict[str, float] = field(default_factory=dict)
    revision_mails: list[str] = field(default_factory=list)
    approved_crs: list[str] = field(default_factory=list)
    cagr: dict[str, float] = field(default_factory=dict)
    industry_pdf: str = ""
    requests: list[SlideRequest] = field(default_factory=list)
    interview_mails: list[tuple[str, date, Interviewee]] = field(default_factory=list)

    def current_growth(self, segment: str) -> float:
        return self.revised.get(segment, self.growth[segment])


# -- world -----------------------------------------------------------------------------------
def build(ctx: WorldContext) -> ConsultingFacts:
    rng = ctx.rng
    starter = ctx.difficulty == "starter"
    firm = rng.choice(CONSULTANCIES)
    firm_domain = slug(firm.split()[0]) + ".example.com"
    pairs = rng.sample([(f, last) for f in FIRST for last in LAST], 16)
    staff = ["Partner", "Engagement Manager", "Consultant", "Business Analyst"]
    team = [Person(f, la, t, firm_domain) for (f, la), t in zip(pairs[:4], staff, strict=True)]
    client = [
        Person(f, la, t, ctx.email_domain)
        for (f, la), t in zip(pairs[4:6], ["Chief Strategy Officer", "CFO"], strict=True)
    ]
    chosen = rng.sample(SEGMENTS, 4)
    segments = [s for s in SEGMENTS if s in chosen]
    tam, growth = _sizing(rng, segments)
    facts = ConsultingFacts(
        ctx=ctx,
        firm=firm,
        partner=team[0],
        manager=team[1],
        analysts=team[2:],
        sponsor=client[0],
        cfo=client[1],
        market=MARKETS.get(ctx.company.split()[-1], "adjacent services"),
        segments=segments,
        tam=tam,
        growth=growth,
        sam={
            s: [round(v * f, 1) for v in tam[s]]
            for s, f in zip(segments, [rng.randint(30, 65) / 100 for _ in segments], strict=True)
        },
        shares=_shares(rng),
        survey=_respondents(rng, segments, 40 if starter else 120),
        interviewees=[],
        milestones=_milestones(rng),
    )
    names = [f"{f} {la}" for f, la in pairs[6:]]
    _interviews(ctx, facts, names, 1 if starter else 2)
    _deck(ctx, DECK_V2, facts, tam, facts.sam, growth, facts.shares, 2)
    _survey(ctx, SURVEY, facts.survey, segments)
    _sow_pdf(ctx, facts)
    if starter:
        _revisions(ctx, facts, 1)
        return facts
    stale_tam = {
        s: [round(v * rng.choice([0.88, 0.92, 1.07, 1.12]), 1) for v in tam[s]] for s in segments
    }
    stale_growth = {s: g + rng.choice([-1.5, -1.0, 1.0, 1.5]) for s, g in growth.items()}
    stale_sam = {s: [round(v * 0.5, 1) for v in stale_tam[s]] for s in segments}
    _deck(ctx, DECK_V1, facts, stale_tam, stale_sam, stale_growth, _shares(rng), 1)
    _survey(ctx, SURVEY_PRELIM, _preliminary(rng, facts.survey), segments)
    _industry(ctx, facts)
    _sow_draft(ctx, facts)
    _draft_report(ctx, facts, stale_tam, stale_growth)
    _deck_mails(ctx, facts)
    _revisions(ctx, facts, 2)
    _change_requests(ctx, facts)
    _interview_mails(ctx, facts)
    _chat(ctx, facts)
    return facts


def _sizing(
    rng: random.Random, segments: list[str]
) -> tuple[dict[str, list[float]], dict[str, float]]:
    tam, growth = {}, {}
    for s in segments:
        base = rng.randint(2000, 30000) / 10
        g = float(round_to(rng, 3.0, 15.0, 0.5))
        growth[s] = g
        tam[s] = [round(base * (1 + g / 100) ** (y - YEARS[0]), 1) for y in YEARS]
    return tam, growth


def _shares(rng: random.Random) -> dict[str, float]:
    while True:
        weights = [rng.randint(40, 400) for _ in REGIONS]
        values = [round(100 * w / sum(weights), 1) for w in weights]
        values[-1] = round(100 - sum(values[:-1]), 1)
        ordered = sorted(values)
        if min(values) > 0 and all(b - a >= 0.5 for a, b in pairwise(ordered)):
            return dict(zip(REGIONS, values, strict=True))


def _respondents(rng: random.Random, segments: list[str], n: int) -> list[Respondent]:
    cells = [(s, r) for s in segments for r in REGIONS] * 2
    cells += [(rng.choice(segments), rng.choice(REGIONS)) for _ in range(max(0, n - len(cells)))]
    rng.shuffle(cells)
    level = {s: rng.randint(30, 150) * 10 for s in segments}
    mood = {s: [rng.randint(1, 6) for _ in range(5)] for s in segments}
    factor = {r: rng.uniform(0.8, 1.25) for r in REGIONS}
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


def _preliminary(rng: random.Random, survey: list[Respondent]) -> list[Respondent]:
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


def _milestones(rng: random.Random) -> list[Milestone]:
    start = date(2025, rng.randint(6, 9), rng.randint(1, 20))
    out, offset = [], 0
    for k, name in enumerate(MILESTONES[: rng.randint(4, 5)], start=1):
        offset += rng.randint(10, 30)
        out.append(Milestone(k, name, day(start, offset), rng.randint(8, 50) * 5000))
    return out


def _interviews(ctx: WorldContext, facts: ConsultingFacts, names: list[str], n_files: int) -> None:
    rng = ctx.rng
    roles = rng.sample(ROLES, 4 * n_files)
    companies = rng.sample([f"{la} {s}" for la in LAST for s in IV_SUFFIX], 4 * n_files)
    segs = (facts.segments * 2)[: 4 * n_files]
    rng.shuffle(segs)
    quotes = (
        '"We have about USD {b} a year set aside for this," {first} said.',
        '"Our annual budget for this area is USD {b}, and it is not growing," according to '
        "{first}.",
        '{first} put the annual budget at USD {b}: "that is what finance signed off."',
    )
    k = 0
    for batch in range(1, n_files + 1):
        rel = f"research/interviews/interview_notes_batch{batch}.docx"
        spec = DocSpec(f"Customer interviews, batch {batch}: {facts.market}")
        spec.p(
            f"Interviews run by {facts.firm} for {ctx.company}. Notes by "
            f"{facts.analysts[batch % 2].name}."
        )
        for _ in range(4):
            iv = Interviewee(
                names[k], roles[k], companies[k], segs[k], rng.randint(10, 180) * 5000, rel
            )
            k += 1
            held = day(facts.milestones[1].due, rng.randint(-20, 5))
            spec.h1(f"Interview {k}: {iv.name}")
            spec.p(f"Role: {iv.role}")
            spec.p(f"Company: {iv.company} ({iv.segment} segment)")
            spec.p(f"Date: {long_date(held)}")
            spec.p(rng.choice(quotes).format(b=f"{iv.budget:,}", first=iv.name.split()[0]))
            spec.p(
                f"The team has {rng.randint(3, 40)} people and looked at "
                f"{rng.randint(2, 6)} vendors over the last {rng.randint(2, 5)} years."
            )
            spec.h2("Pain points")
            for pain in rng.sample(PAINS, rng.randint(2, 3)):
                spec.bullet(pain)
            facts.interviewees.append(iv)
        ctx.docx(rel, spec)


def _deck(
    ctx: WorldContext,
    rel: str,
    facts: ConsultingFacts,
    tam: dict[str, list[float]],
    sam: dict[str, list[float]],
    growth: dict[str, float],
    shares: dict[str, float],
    version: int,
) -> None:
    rng = ctx.rng
    deck = DeckSpec(
        f"{ctx.company}: {facts.market} market sizing", f"{facts.firm} | version {version}"
    )
    total = [sum(tam[s][i] for s in facts.segments) for i in (0, -1)]
    leader = max(shares, key=lambda r: shares[r])
    deck.add(
        "Executive summary",
        [
            f"Total TAM of USD {total[0]:,.1f}m in {YEARS[0]}, USD {total[1]:,.1f}m by {YEARS[-1]}",
            f"{leader} is the largest region of the {YEARS[0]} TAM",
            f"Survey of {len(facts.survey)} customers and structured interviews",
        ],
    )
    if version == 2:
        deck.add(
            "Scope and definitions",
            [
                "TAM: total annual spend on the category by all buyers in the segment",
                "SAM: the part of TAM reachable with the current offer and channels",
                "All figures in USD m, nominal",
            ],
        )
    years = [str(y) for y in YEARS]
    for metric, data in (("TAM", tam), ("SAM", sam)):
        rows = [[s, *(f"{v:,.1f}" for v in data[s])] for s in facts.segments]
        deck.add(f"{metric} by segment (USD m)", table=(["Segment", *years], rows))
    deck.add(
        f"Regional share of TAM, {YEARS[0]}",
        chart=("pie", list(shares), {"Share of TAM (%)": list(shares.values())}),
    )
    rows = [[s, f"{growth[s]:.1f}", rng.choice(DRIVERS)] for s in facts.segments]
    deck.add(
        "Growth assumptions",
        ["Compound annual rates applied to the 2025 base"],
        table=(["Segment", f"CAGR {YEARS[0]}-{YEARS[-1]} (%)", "Key driver"], rows),
    )
    deck.add(
        "Methodology",
        ["Top-down sizing from industry data", "Bottom-up check from survey willingness to pay"],
    )
    ctx.pptx(rel, deck)


def _survey(ctx: WorldContext, rel: str, rows: list[Respondent], segments: list[str]) -> None:
    wb = WorkbookSpec(title="Customer survey 2025")
    resp = wb.sheet("Responses")
    resp.append(
        [
            "Respondent ID",
            "Segment",
            "Region",
            "Employees",
            "Satisfaction (1-5)",
            "Willingness to pay (USD)",
        ]
    )
    for r in rows:
        resp.append([r.rid, r.segment, r.region, r.employees, r.satisfaction, r.wtp])
    resp.col_widths = {1: 14, 2: 16, 3: 22, 4: 12, 5: 18, 6: 24}
    n = len(rows) + 1
    seg, sat, wtp = (f"Responses!${c}$2:${c}${n}" for c in "BEF")
    summary = wb.sheet("Summary")
    summary.append(
        ["Segment", "Respondents", "Avg satisfaction", "Avg WTP (USD)", "Satisfied (4-5)"]
    )
    for i, s in enumerate(segments, start=2):
        mine = [r for r in rows if r.segment == s]
        summary.append(
            [
                s,
                Formula(f"=COUNTIF({seg},A{i})", len(mine)),
                Formula(f"=AVERAGEIF({seg},A{i},{sat})", _mean([r.satisfaction for r in mine])),
                Formula(f"=AVERAGEIF({seg},A{i},{wtp})", _mean([r.wtp for r in mine])),
                Formula(
                    f'=COUNTIFS({seg},A{i},{sat},">=4")',
                    sum(1 for r in mine if r.satisfaction >= 4),
                ),
            ]
        )
    k = len(segments) + 2
    summary.append(
        [
            "All respondents",
            Formula(f"=COUNTA(Responses!$A$2:$A${n})", len(rows)),
            Formula(f"=AVERAGE({sat})", _mean([r.satisfaction for r in rows])),
            Formula(f"=AVERAGE({wtp})", _mean([r.wtp for r in rows])),
            Formula(f'=COUNTIF({sat},">=4")', sum(1 for r in rows if r.satisfaction >= 4)),
        ]
    )
    summary.bold_rows = {1, k}
    summary.number_formats = {3: "0.00", 4: "#,##0.00"}
    summary.col_widths = {1: 18, 2: 13, 3: 16, 4: 16, 5: 15}
    wb.names.update(
        {
            "TotalRespondents": f"Summary!$B${k}",
            "AvgSatisfaction": f"Summary!$C${k}",
            "AvgWTP": f"Summary!$D${k}",
        }
    )
    book = wb.sheet("Codebook")
    book.append(["Column", "Meaning"])
    book.append(["Satisfaction (1-5)", "1 = very dissatisfied, 5 = very satisfied"])
    book.append(["Willingness to pay (USD)", "Stated annual spend the respondent would accept"])
    ctx.xlsx(rel, wb)


def _mean(values: list[int]) -> float:
    return round(sum(values) / len(values), 10)


def _industry(ctx: WorldContext, facts: ConsultingFacts) -> None:
    rng = ctx.rng
    publisher = rng.choice(PUBLISHERS)
    facts.cagr = {s: float(round_to(rng, 2.0, 16.0, 0.1)) for s in facts.segments}
    draft = {s: round(c + rng.choice([-1.2, -0.8, 0.6, 1.1]), 1) for s, c in facts.cagr.items()}
    regions = [(r, rng.randint(20, 400) / 10) for r in REGIONS]
    base = f"research/industry/{slug(publisher)}_{slug(facts.market)}_outlook_2025"
    facts.industry_pdf = base + ".pdf"
    for rel, cagr in (
        (facts.industry_pdf, facts.cagr),
        (base.replace("industry/", "industry/drafts/") + "_DRAFT.pdf", draft),
    ):
        is_draft = rel.endswith("_DRAFT.pdf")
        doc = ctx.pdf(
            rel,
            f"{publisher}: {facts.market} industry outlook 2025",
            footer=f"{publisher} | licensed to {facts.firm}",
            watermark="DRAFT" if is_draft else "",
        )
        doc.para(
            f"This report covers the global {facts.market} market from 2025 to 2030. "
            "All figures are in US dollars and growth rates are compound annual rates."
        )
        paras = [
            f"Market overview|Buyers spent an estimated USD {rng.randint(30, 90)} bn on "
            f"the category in 2024, up {rng.randint(3, 12)}% on the year before, across "
            f"{rng.randint(400, 900)} active vendors."
        ]
        for s in facts.segments:
            paras.append(
                f"{s} outlook|We expect spending by {s.lower()} buyers to grow at a CAGR of "
                f"{cagr[s]:.1f}% between 2025 and 2030. Around {rng.randint(20, 70)}% of buyers "
                f"plan a new purchase within {rng.randint(12, 36)} months, and average contract "
                f"length is {rng.randint(12, 48)} months."
            )
        paras.append(
            f"Methodology|We surveyed {rng.randint(300, 1200)} buyers and interviewed "
            f"{rng.randint(20, 80)} executives between March and June 2025."
        )
        doc.two_columns(paras)
        doc.heading("Regional market size")
        doc.table(
            ["Region", "2025 (USD bn)", "2030 (USD bn)", "CAGR (%)"],
            [
                [r, f"{v:.1f}", f"{v * (1 + c / 100) ** 5:.1f}", f"{c:.1f}"]
                for (r, v), c in zip(
                    regions, [rng.randint(20, 140) / 10 for _ in regions], strict=True
                )
            ],
        )
        doc.save()


def _sow_pdf(ctx: WorldContext, facts: ConsultingFacts) -> None:
    doc = ctx.pdf(
        SOW,
        f"Statement of Work: {facts.market} market assessment",
        footer=f"{facts.firm} | {ctx.company}",
    )
    start = facts.milestones[0].due
    doc.kv(
        [
            ("Client", ctx.company),
            ("Consultant", facts.firm),
            ("Engagement partner", facts.partner.name),
            ("Client sponsor", facts.sponsor.name),
            ("Signed", long_date(day(start, -20))),
        ]
    )
    doc.para(
        f"{facts.firm} will assess the {facts.market} market for {ctx.company}: size the "
        "addressable market by segment and region, survey and interview customers, and "
        "recommend where to enter first. Fees are fixed per milestone as set out below."
    )
    doc.heading("Milestones and fees")
    doc.table(
        ["No.", "Milestone", "Due date", "Fee (USD)"],
        [[str(m.number), m.name, m.due.isoformat(), f"{m.fee:,}"] for m in facts.milestones],
    )
    total = sum(m.fee for m in facts.milestones)
    doc.para(
        f"Total fees: USD {total:,}. Invoices are issued when a milestone is accepted and "
        "are payable within 30 days. Changes to scope or fees need a change request "
        "approved in writing by the client sponsor."
    )
    doc.kv([("For the client", facts.sponsor.name), ("For the consultant", facts.partner.name)])
    doc.save()


def _sow_draft(ctx: WorldContext, facts: ConsultingFacts) -> None:
    spec = DocSpec(f"DRAFT Statement of Work: {facts.market} market assessment")
    spec.p("Draft for discussion. Not signed; fees under negotiation.")
    spec.table(
        ["No.", "Milestone", "Due date", "Fee (USD)"],
        [
            [
                m.number,
                m.name,
                day(m.due, -7).isoformat(),
                f"{m.fee + ctx.rng.randint(1, 6) * 5000:,}",
            ]
            for m in facts.milestones
        ],
    )
    ctx.docx("engagement/contract/drafts/statement_of_work_draft.docx", spec)


def _draft_report(
    ctx: WorldContext, facts: ConsultingFacts, tam: dict[str, list[float]], growth: dict[str, float]
) -> None:
    spec = DocSpec(f"DRAFT final report: {facts.market} market assessment")
    spec.p("Working draft. Figures are taken from the v1 sizing and have not been refreshed.")
    spec.h1("Market size by segment")
    spec.table(
        ["Segment", f"TAM {YEARS[0]} (USD m)", f"TAM {YEARS[-1]} (USD m)", "CAGR (%)"],
        [
            [s, f"{tam[s][0]:,.1f}", f"{tam[s][-1]:,.1f}", f"{growth[s]:.1f}"]
            for s in facts.segments
        ],
    )
    ctx.docx("engagement/deliverables/final_report_DRAFT.docx", spec)


def _mail(ctx: WorldContext, folder: str, when: date, subject: str, mail: Email) -> str:
    rel = f"mail/{folder}/{when.isoformat()}_{slug(subject)[:48]}.eml"
    ctx.email(rel, mail)
    return rel


def _deck_mails(ctx: WorldContext, facts: ConsultingFacts) -> None:
    m = facts.manager
    for version, rel, offset in ((1, DECK_V1, -25), (2, DECK_V2, -5)):
        when = day(facts.milestones[1].due, offset)
        subject = f"Market sizing deck v{version}"
        body = (
            f"Dear {facts.sponsor.first},\n\nPlease find attached version {version} of the "
            "market sizing deck."
            + (
                " It supersedes v1: the sizing now uses the cleaned survey and updated "
                "industry data."
                if version == 2
                else ""
            )
            + f"\n\nBest regards,\n{m.name}\n{facts.firm}"
        )
        _mail(
            ctx,
            "sent",
            when,
            subject,
            Email(
                m.address,
                [facts.sponsor.address],
                subject,
                body,
                at(when, 17, 5),
                attachments=[ctx.workspace / rel],
            ),
        )


def _revisions(ctx: WorldContext, facts: ConsultingFacts, n: int) -> None:
    """The client revises growth rates by mail: A (and B), then A again; the latest wins."""
    rng = ctx.rng
    a, b = rng.sample(facts.segments, 2)
    when = day(facts.milestones[1].due, 5)
    for k, segs in enumerate([[a]] if n == 1 else [[a, b], [a]]):
        asks = []
        for seg in segs:
            old = facts.current_growth(seg)
            new = old + rng.choice([d for d in (-2.0, -1.5, -1.0, 1.0, 1.5, 2.5) if old + d >= 1])
            where = "my earlier email" if seg in facts.revised else "the deck"
            facts.revised[seg] = new
            asks.append(
                f"please use an annual growth rate of {new:.1f}% for the {seg} segment "
                f"instead of the {old:.1f}% in {where}."
            )
        when = day(when, rng.randint(3, 8))
        subject = "Revised growth assumptions" + (" (update)" if k else "")
        body = (
            f"Hi {facts.manager.first},\n\nFollowing our steering committee review, "
            + " Also, ".join(asks)
            + " Other assumptions stay as they are.\n\nThanks,\n"
            + facts.sponsor.name
        )
        facts.revision_mails.append(
            _mail(
                ctx,
                "inbox",
                when,
                subject,
                Email(
                    facts.sponsor.address,
                    [facts.manager.address],
                    subject,
                    body,
                    at(when, 9 + k, 30),
                    cc=[facts.cfo.address],
                ),
            )
        )


def _change_requests(ctx: WorldContext, facts: ConsultingFacts) -> None:
    rng = ctx.rng
    chosen = sorted(rng.sample(facts.milestones[1:], rng.randint(2, 3)), key=lambda m: m.number)
    approve = [True, False] + [rng.random() < 0.5] * (len(chosen) - 2)
    rng.shuffle(approve)
    files, when = [], day(facts.milestones[1].due, 12)
    for k, (m, ok) in enumerate(zip(chosen, approve, strict=True), start=1):
        cr, new = f"CR-{k:02d}", m.fee + rng.randint(2, 8) * 5000
        rel = f"engagement/contract/change_requests/{cr}_{slug(m.name)}.docx"
        spec = DocSpec(f"Change request {cr}")
        spec.p(
            f"{facts.firm} proposes to extend the scope of the milestone below at the "
            "client's request."
        )
        spec.table(
            ["Field", "Detail"],
            [
                ["Change request", cr],
                ["Milestone", m.name],
                ["Current fee (USD)", f"{m.fee:,}"],
                ["Proposed fee (USD)", f"{new:,}"],
                ["Status", "Submitted for client approval"],
            ],
        )
        ctx.docx(rel, spec)
        files.append(ctx.workspace / rel)
        if ok:
            m.revised_fee = new
            facts.approved_crs.append(cr)
    subject = "Change requests for approval"
    _mail(
        ctx,
        "sent",
        when,
        subject,
        Email(
            facts.manager.address,
            [facts.sponsor.address],
            subject,
            f"Dear {facts.sponsor.first},\n\nAttached are {len(chosen)} change requests for your "
            f"decision.\n\nBest regards,\n{facts.manager.name}",
            at(when, 15),
            attachments=files,
        ),
    )
    for k, ok in enumerate(approve, start=1):
        cr, when = f"CR-{k:02d}", day(when, rng.randint(1, 4))
        verdict = (
            f"I confirm that we approve change request {cr} as proposed."
            if ok
            else f"After review we will not approve change request {cr}; please continue "
            "under the original fee."
        )
        subject = f"Re: {cr} decision"
        _mail(
            ctx,
            "inbox",
            when,
            subject,
            Email(
                facts.sponsor.address,
                [facts.manager.address],
                subject,
                f"Hi {facts.manager.first},\n\n{verdict}\n\n{facts.sponsor.name}",
                at(when, 11),
            ),
        )


def _interview_mails(ctx: WorldContext, facts: ConsultingFacts) -> None:
    rng = ctx.rng
    when = day(facts.milestones[2].due, 2)
    for iv in rng.sample(facts.interviewees, 3):
        sender = rng.choice([facts.sponsor, facts.cfo])
        when = day(when, rng.randint(1, 5))
        subject = "Follow-up on the customer interviews"
        body = (
            f"Hi {facts.manager.first},\n\nIn the interviews your team ran, the {iv.role} at "
            f"{iv.company} mentioned a budget figure. Could you send me that number and "
            f"the person's name?\n\nThanks,\n{sender.name}"
        )
        _mail(
            ctx,
            "inbox",
            when,
            subject,
            Email(sender.address, [facts.manager.address], subject, body, at(when, 14, 10)),
        )
        facts.interview_mails.append((sender.name, when, iv))


def _request(facts: ConsultingFacts, rng: random.Random, who: str, when: date, channel: str) -> str:
    metric = rng.choice(["TAM", "SAM"])
    seg, year = rng.choice(facts.segments), rng.choice(YEARS[1:])
    slide = TAM_SLIDE[2] + (metric == "SAM")
    value = (facts.tam if metric == "TAM" else facts.sam)[seg][YEARS.index(year)]
    facts.requests.append(SlideRequest(who, when, channel, slide, metric, seg, year, value))
    return f"what is the {year} figure for {seg} on slide {slide} of the latest market sizing deck?"


def _chat(ctx: WorldContext, facts: ConsultingFacts) -> None:
    rng = ctx.rng
    p, m, a1, a2 = facts.partner, facts.manager, facts.analysts[0], facts.analysts[1]
    d = facts.milestones[1].due
    when = day(d, 8)
    ask = _request(facts, rng, facts.cfo.name, when, "email")
    subject = "Question on the market sizing deck"
    _mail(
        ctx,
        "inbox",
        when,
        subject,
        Email(
            facts.cfo.address,
            [m.address],
            subject,
            f"Hi {m.first},\n\nBefore the steering committee: {ask}\n\nThanks,\n{facts.cfo.name}",
            at(when, 10, 20),
        ),
    )
    steady = next(s for s in facts.segments if s not in facts.revised)
    msgs = [
        ChatMessage(
            a2.name,
            "Survey results are final in research/survey. The PRELIMINARY "
            "extract in the archive is superseded.",
            at(day(d, -12), 9, 40),
        ),
        ChatMessage(
            m.name,
            "v2 of the market sizing deck is in engagement/deliverables. v1 is "
            "superseded, please don't quote from it.",
            at(day(d, -5), 17, 30),
        ),
        ChatMessage(
            a1.name,
            f"Should we suggest {steady} growth at "
            f"{facts.growth[steady] - 1.5:.1f}% instead? The industry report looks more "
            "bearish.",
            at(day(d, 6), 11, 0),
        ),
    ]
    msgs.append(
        ChatMessage(
            p.name,
            f"Client wants to keep the deck figure for {steady}. No change.",
            at(day(d, 6), 15, 0),
            len(msgs) - 1,
        )
    )
    for k, who in enumerate((p, a1)):
        when = day(d, 10 + 3 * k + rng.randint(0, 2))
        msgs.append(
            ChatMessage(
                who.name,
                "Quick one for the steering committee pack: "
                + _request(facts, rng, who.name, when, "chat"),
                at(when, 10 + k, 15),
            )
        )
        msgs.append(ChatMessage(a2.name, "On it.", at(when, 12 + k), len(msgs) - 1))
    msgs.append(
        ChatMessage(
            m.name,
            "Draft final report is in deliverables; its numbers are still from v1, will refresh.",
            at(day(d, 20), 9, 5),
        )
    )
    ctx.chat("chat/engagement.json", "#engagement", [x.name for x in (p, m, a1, a2)], msgs)


# -- templates ----------------------------------------------------------------------------------
ORDINAL = {1: "largest", 2: "second-largest", 3: "third-largest"}


def _pick(items: list[Any], variant: int) -> Any:
    return items[variant % len(items)]


def _where(f: ConsultingFacts, rel: str) -> str:
    return f" (`{rel}`)" if f.ctx.difficulty == "starter" else ""


def _spec(
    template: str,
    kind: Kind,
    title: str,
    question: str,
    keys: dict[str, str],
    criteria: list[dict[str, Any]],
    oracle: dict[str, Any],
    signature: str,
    **extra: Any,
) -> TaskSpec:
    gold = {c["field"]: c["expected"] for c in criteria if "field" in c}
    return TaskSpec(
        f"consulting.{template}",
        kind,
        title,
        question,
        keys,
        criteria,
        gold,
        oracle,
        f"{template}:{signature}",
        **extra,
    )


def t_deck_tam(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    seg, year = _pick(f.segments, variant), rng.choice(YEARS[1:])
    tam, sam = f.tam[seg][YEARS.index(year)], f.sam[seg][YEARS.index(year)]
    return _spec(
        "deck_tam",
        "fact",
        f"Market size of the {seg} segment in {year}",
        f"{f.sponsor.name} ({f.sponsor.title}) needs the {year} total addressable market (TAM) "
        f"and serviceable addressable market (SAM) of the {seg} segment, as shown in the latest "
        f"version of the market-sizing deck{_where(f, DECK_V2)}, and the SAM as a percentage "
        "of the TAM.",
        {
            "tam": "number, TAM in USD m as shown in the deck",
            "sam": "number, SAM in USD m as shown in the deck",
            "sam_share_pct": "number, SAM / TAM in percent, rounded to 1 decimal",
        },
        [
            numeric("tam", tam, f"TAM {year} from the latest deck", rel_tol=1e-4, abs_tol=0.05),
            numeric("sam", sam, f"SAM {year} from the latest deck", rel_tol=1e-4, abs_tol=0.05),
            numeric("sam_share_pct", round(100 * sam / tam, 4), "SAM share of TAM", abs_tol=0.06),
        ],
        {"segment": seg, "year": year},
        f"{seg}:{year}",
    )


def t_regional(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    rank = variant % 3 + 1
    ranked = sorted(f.shares.items(), key=lambda kv: -kv[1])
    (region, share), (_, after) = ranked[rank - 1], ranked[rank]
    return _spec(
        "regional_leader",
        "fact",
        f"The {ORDINAL[rank]} region by share of TAM",
        f"The latest market-sizing deck charts each region's share of the {YEARS[0]} TAM. Which "
        f"region has the {ORDINAL[rank]} share, what is that share, and by how many percentage "
        "points does it exceed the share of the next region down?",
        {
            "region": "string, the region's name",
            "share_pct": "number, its share in percent",
            "lead_pp": "number, the gap to the next region in percentage points, 1 decimal",
        },
        [
            text("region", region, "Names the region"),
            numeric("share_pct", share, "States its share", abs_tol=0.05),
            numeric("lead_pp", round(share - after, 1), "Computes the lead", abs_tol=0.06),
        ],
        {"rank": rank},
        str(rank),
    )


def t_survey_sat(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    seg, threshold = _pick(f.segments, variant), 4 if variant % 2 == 0 else 5
    region = None if variant < len(f.segments) else rng.choice(REGIONS)
    rows = [r for r in f.survey if r.segment == seg and region in (None, r.region)]
    hits = sum(1 for r in rows if r.satisfaction >= threshold)
    scope = f"{seg} respondents" + (f" in {region}" if region else "")
    rated = "4 or 5" if threshold == 4 else "5"
    return _spec(
        "survey_satisfaction",
        "compute",
        f"Satisfaction of {scope}",
        f"Using the final customer survey results, how many {scope} are there, how many of them "
        f"gave a satisfaction score of {rated}, and what share of them is that?",
        {
            "respondents": "number of respondents in scope",
            "satisfied": f"number of them scoring {rated}",
            "share_pct": "number, the share in percent, rounded to 1 decimal",
        },
        [
            numeric("respondents", len(rows), "Counts the respondents"),
            numeric("satisfied", hits, "Counts the satisfied respondents"),
            numeric(
                "share_pct", round(100 * hits / len(rows), 4), "Computes the share", abs_tol=0.06
            ),
        ],
        {"segment": seg, "region": region, "threshold": threshold},
        f"{seg}:{region}:{threshold}",
    )


def _avg(rows: list[Respondent]) -> float:
    return round(sum(r.wtp for r in rows) / len(rows), 6)


def t_survey_wtp(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    seg = _pick(f.segments, variant)
    rows = [r for r in f.survey if r.segment == seg]
    by_region = sorted(
        ((_avg([r for r in rows if r.region == g]), g) for g in REGIONS), reverse=True
    )
    if by_region[0][0] - by_region[1][0] < 1:
        return None
    return _spec(
        "survey_wtp",
        "compute",
        f"Willingness to pay in the {seg} segment",
        f"From the final customer survey: what is the average willingness to pay of {seg} "
        "respondents, which region's {seg} respondents have the highest average, and what is "
        "that average? Round averages to 2 decimals.".replace("{seg}", seg),
        {
            "avg_wtp": "number, USD",
            "top_region": "string, the region",
            "top_region_avg_wtp": "number, USD",
        },
        [
            numeric("avg_wtp", _avg(rows), "Average WTP of the segment", rel_tol=0, abs_tol=0.006),
            text("top_region", by_region[0][1], "Names the top region"),
            numeric(
                "top_region_avg_wtp",
                by_region[0][0],
                "Average WTP in the top region",
                rel_tol=0,
                abs_tol=0.006,
            ),
        ],
        {"segment": seg},
        seg,
    )


def t_interviewee(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    if not f.interview_mails:
        return None
    sender, when, iv = _pick(f.interview_mails, variant)
    return _spec(
        "interviewee_budget",
        "multi_hop",
        "Budget quoted in a customer interview",
        f"On {long_date(when)}, {sender} emailed the engagement team a question about one of "
        "the customer interviews. Answer it: who was the interviewee, which customer segment is "
        "their company in, and what annual budget did they quote?",
        {
            "interviewee": "string, the person's full name",
            "segment": "string, the segment",
            "budget": "number, the quoted annual budget in USD",
        },
        [
            text("interviewee", iv.name, "Identifies the interviewee"),
            text("segment", iv.segment, "Names the segment"),
            numeric("budget", iv.budget, "States the quoted budget"),
        ],
        {"sender": sender, "date": when.isoformat()},
        iv.name,
    )


def t_slide_request(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    if not f.requests:
        return None
    r = _pick(f.requests, variant)
    how = "by email" if r.channel == "email" else "in the #engagement chat channel"
    return _spec(
        "slide_request",
        "multi_hop",
        f"Figure requested by {r.who}",
        f"On {long_date(r.when)}, {r.who} asked {how} for a figure from a slide of the "
        "market-sizing deck. Which segment and which measure (TAM or SAM) is it, and what is "
        "the figure?",
        {"segment": "string", "metric": 'string, "TAM" or "SAM"', "value": "number, USD m"},
        [
            text("segment", r.segment, "Names the segment"),
            text("metric", r.metric, "Names the measure on that slide"),
            numeric("value", r.value, "Reads the figure", rel_tol=1e-4, abs_tol=0.05),
        ],
        {"person": r.who, "date": r.when.isoformat(), "channel": r.channel},
        f"{r.who}:{r.when}",
    )


def t_growth(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    order = sorted(f.revised) + [s for s in f.segments if s not in f.revised]
    seg, year = _pick(order, variant), rng.choice(YEARS[3:])
    g = f.current_growth(seg)
    projected = round(f.tam[seg][0] * (1 + g / 100) ** (year - YEARS[0]), 4)
    return _spec(
        "growth_revision",
        "reconcile",
        f"Agreed growth and {year} TAM for {seg}",
        f"The client has been revising the growth assumptions behind the market sizing. What "
        f"annual growth rate does the latest market-sizing deck show for the {seg} segment, "
        f"which rate is agreed now, and what {year} TAM does the agreed rate imply when "
        f"compounded annually from the deck's {YEARS[0]} TAM for {seg}?",
        {
            "deck_growth_pct": "number, percent",
            "agreed_growth_pct": "number, percent",
            "tam": f"number, the implied {year} TAM in USD m, rounded to 1 decimal",
        },
        [
            numeric("deck_growth_pct", f.growth[seg], "Reads the deck's rate"),
            numeric("agreed_growth_pct", g, "Uses the latest client revision"),
            numeric("tam", projected, "Projects the TAM", rel_tol=1e-4, abs_tol=0.06),
        ],
        {"segment": seg, "year": year},
        f"{seg}:{year}",
    )


def t_industry(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    if not f.cagr:
        return None
    seg = _pick(f.segments, variant + 1)
    cagr, agreed = f.cagr[seg], f.current_growth(seg)
    return _spec(
        "industry_cagr",
        "fact",
        f"Industry CAGR vs agreed growth: {seg}",
        f"What CAGR does the published industry outlook report give for the {seg} segment, "
        "what annual growth rate is currently agreed with the client for that segment, and "
        "what is the difference (report minus agreed, in percentage points)?",
        {
            "report_cagr_pct": "number, percent",
            "agreed_growth_pct": "number, percent",
            "difference_pp": "number, percentage points (negative if the report is lower)",
        },
        [
            numeric("report_cagr_pct", cagr, "Reads the report's CAGR"),
            numeric("agreed_growth_pct", agreed, "Uses the agreed growth rate"),
            numeric("difference_pp", round(cagr - agreed, 2), "Computes the difference"),
        ],
        {"segment": seg},
        seg,
        pdf_probe=PdfProbe(f.industry_pdf, f"{seg} outlook", cagr, "two_column"),
    )


def t_sow(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    m = _pick(f.milestones, variant)
    return _spec(
        "sow_milestone",
        "fact",
        f"SOW milestone: {m.name}",
        f"According to the signed statement of work{_where(f, SOW)}, what fee is set for the "
        f'milestone "{m.name}", when is it due, and what are the total fees in the SOW?',
        {"fee": "number, USD", "due_date": "date", "total_fees": "number, USD"},
        [
            numeric("fee", m.fee, "Reads the milestone fee"),
            text("due_date", m.due.isoformat(), "Reads the due date"),
            numeric("total_fees", sum(x.fee for x in f.milestones), "States the total fees"),
        ],
        {"milestone": m.name},
        m.name,
        pdf_probe=PdfProbe(SOW, m.name, m.fee, "table"),
    )


def t_fee_change(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    if not f.approved_crs:
        return None
    order = sorted(f.milestones, key=lambda m: (m.revised_fee is None, m.number))
    m = _pick(order, variant)
    return _spec(
        "fee_change",
        "reconcile",
        f"Current fee for {m.name}",
        f'Taking change requests into account, what is the current fee for the milestone "{m.name}"'
        ", what do all milestones now cost in total, and which change requests did the client "
        "approve?",
        {
            "fee": "number, USD",
            "total_fees": "number, USD",
            "approved_change_requests": 'list of change request ids, e.g. ["CR-01"]',
        },
        [
            numeric("fee", m.current_fee, "Uses the approved fee"),
            numeric("total_fees", sum(x.current_fee for x in f.milestones), "Totals current fees"),
            entities("approved_change_requests", f.approved_crs, "Lists the approved requests"),
        ],
        {"milestone": m.name},
        m.name,
    )


def t_interview_budgets(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    seg = _pick(f.segments, variant)
    ivs = [iv for iv in f.interviewees if iv.segment == seg]
    if not ivs or f.ctx.difficulty == "starter":
        return None
    return _spec(
        "interview_budgets",
        "compute",
        f"Interview budgets in the {seg} segment",
        f"Across all customer interview notes, which interviewees work at companies in the "
        f"{seg} segment, and what is the sum of the annual budgets they quoted?",
        {"interviewees": "list of full names", "total_budget": "number, USD"},
        [
            entities("interviewees", [iv.name for iv in ivs], "Lists the interviewees"),
            numeric("total_budget", sum(iv.budget for iv in ivs), "Sums their budgets"),
        ],
        {"segment": seg},
        seg,
    )


def t_deck_pptx(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    year = YEARS[1 + variant % 5]
    i, path, title = YEARS.index(year), "output/segment_sizing.pptx", f"Sizing by segment, {year}"
    total = round(sum(f.tam[s][i] for s in f.segments), 1)

    def cell(row: str, column: str, value: float, what: str) -> dict[str, Any]:
        tc = {"row_label": row, "column": column, "expected": value, "rel_tol": 0, "abs_tol": 0.06}
        return pptx_content(path, what, title=title, table_cell=tc)

    s0, s1, s2 = (f.segments[(variant + k) % len(f.segments)] for k in range(3))
    return _spec(
        "segment_deck",
        "deliverable",
        f"Slide: TAM and SAM by segment, {year}",
        f"{f.partner.name} wants a one-slide summary of the {year} market size by segment, "
        "using the figures in the latest market-sizing deck.",
        {"total_tam": f"number, the total {year} TAM of all segments in USD m"},
        [
            file_exists(path, "Produces the deck"),
            cell(s0, "TAM (USD m)", f.tam[s0][i], f"TAM of {s0}"),
            cell(s1, "TAM (USD m)", f.tam[s1][i], f"TAM of {s1}"),
            cell(s2, "SAM (USD m)", f.sam[s2][i], f"SAM of {s2}"),
            cell("Total", "TAM (USD m)", total, "Total row"),
            numeric("total_tam", total, "Answers with the total TAM", rel_tol=0, abs_tol=0.06),
        ],
        {"year": year, "title": title, "path": path},
        str(year),
        deliverables={
            path: (
                f'a PowerPoint deck with a slide whose title is "{title}" and which holds a table '
                'with the header row "Segment", "TAM (USD m)", "SAM (USD m)", one row per segment '
                '(segment name in the first column, numbers as in the deck) and a last row "Total" '
                "with the sums."
            )
        },
    )


def t_survey_xlsx(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    region = _pick(list(REGIONS), variant)
    rows = [r for r in f.survey if r.region == region]
    path, sheet = "output/survey_averages.xlsx", "Averages"
    crit = [file_exists(path, "Produces the workbook")]
    for s in f.segments:
        mine = [r for r in rows if r.segment == s]
        crit.append(
            xlsx_cell(path, sheet, _avg(mine), f"Average WTP of {s}", row_label=s, column="Avg WTP")
        )
    seg = _pick(f.segments, variant)
    sat = [r.satisfaction for r in rows if r.segment == seg]
    crit.append(
        xlsx_cell(
            path,
            sheet,
            round(sum(sat) / len(sat), 6),
            f"Satisfaction of {seg}",
            row_label=seg,
            column="Avg Satisfaction",
        )
    )
    crit.append(
        xlsx_cell(
            path,
            sheet,
            len(rows),
            "Respondent count on the All row",
            row_label="All",
            column="Respondents",
        )
    )
    crit.append(numeric("respondents", len(rows), "Answers with the respondent count"))
    return _spec(
        "survey_averages",
        "deliverable",
        f"Survey averages for {region}",
        f"Build a workbook of customer survey averages per segment for respondents in {region}, "
        "from the final survey results.",
        {"respondents": f"number of survey respondents in {region}"},
        crit,
        {"region": region, "path": path},
        region,
        deliverables={
            path: (
                f'a workbook with a sheet named "{sheet}": row 1 holds "Segment", "Respondents", '
                '"Avg Satisfaction", "Avg WTP"; one row per segment (name in column A) with its '
                f"number of {region} respondents and their average satisfaction and willingness to "
                'pay (USD), rounded to 2 decimals; a last row "All" for all of them together.'
            )
        },
    )


def t_starter_named(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    name = _pick(["TotalRespondents", "AvgSatisfaction", "AvgWTP"], variant)
    values = [r.wtp if name == "AvgWTP" else r.satisfaction for r in f.survey]
    value = len(values) if name == "TotalRespondents" else round(sum(values) / len(values), 6)
    return _spec(
        "starter_named_range",
        "fact",
        f"Named range {name}",
        f"The survey workbook `{SURVEY}` defines the named range `{name}`. What value does it "
        "hold, and on which sheet is it?",
        {"value": "number, rounded to 2 decimals", "sheet": "string, the sheet's name"},
        [
            numeric("value", value, "Reads the named value", rel_tol=0, abs_tol=0.006),
            text("sheet", "Summary", "Names the sheet"),
        ],
        {"name": name},
        name,
    )


def t_starter_revision(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    seg = sorted(f.revised)[0]
    return _spec(
        "starter_growth_email",
        "reconcile",
        "Revised growth assumption",
        f"Read the client's email `{f.revision_mails[0]}`. Which segment's growth assumption "
        "does it revise, what rate does the client want now, and what rate did the deck use?",
        {
            "segment": "string",
            "new_growth_pct": "number, percent",
            "old_growth_pct": "number, percent",
        },
        [
            text("segment", seg, "Names the segment"),
            numeric("new_growth_pct", f.revised[seg], "States the new rate"),
            numeric("old_growth_pct", f.growth[seg], "States the old rate"),
        ],
        {"path": f.revision_mails[0]},
        seg,
    )


def t_starter_interview(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    iv = _pick(f.interviewees[:4], variant)
    return _spec(
        "starter_interview",
        "fact",
        f"Interview with {iv.name}",
        f"In `{iv.file}`, what annual budget did {iv.name} quote, and which company do they "
        "work for?",
        {"budget": "number, USD", "company": "string"},
        [
            numeric("budget", iv.budget, "States the budget"),
            text("company", iv.company, "Names the company"),
        ],
        {"path": iv.file, "name": iv.name},
        iv.name,
    )


BOTH: tuple[Difficulty, ...] = ("standard", "starter")
TEMPLATES = [
    Template("consulting.deck_tam", "fact", t_deck_tam, BOTH),
    Template("consulting.regional_leader", "fact", t_regional),
    Template("consulting.survey_satisfaction", "compute", t_survey_sat),
    Template("consulting.survey_wtp", "compute", t_survey_wtp),
    Template("consulting.interviewee_budget", "multi_hop", t_interviewee),
    Template("consulting.slide_request", "multi_hop", t_slide_request),
    Template("consulting.growth_revision", "reconcile", t_growth),
    Template("consulting.industry_cagr", "fact", t_industry),
    Template("consulting.sow_milestone", "fact", t_sow, BOTH),
    Template("consulting.fee_change", "reconcile", t_fee_change),
    Template("consulting.interview_budgets", "compute", t_interview_budgets),
    Template("consulting.segment_deck", "deliverable", t_deck_pptx),
    Template("consulting.survey_averages", "deliverable", t_survey_xlsx),
    Template("consulting.starter_named_range", "fact", t_starter_named, ("starter",)),
    Template("consulting.starter_growth_email", "reconcile", t_starter_revision, ("starter",)),
    Template("consulting.starter_interview", "fact", t_starter_interview, ("starter",)),
]
