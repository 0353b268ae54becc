"""Investment banking world: its facts and the documents written from them.

`BankFacts` is what the world builder knows about a deal (the model, the comps, the offer as it
moved, the CIM's figures); the writers turn it into the workbooks, decks, PDFs and Word files on
the deal team's drive. Mail and chat, which also record facts as they are written, live in
`banking.py`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from openpyxl.utils import get_column_letter

from ..fabric import CITIES, Person, day, long_date
from ..render.documents import DocSpec
from ..render.sheets import Formula, WorkbookSpec
from ..render.slides import DeckSpec
from ..spec import WorldContext

CODENAMES = (
    *("Atlas", "Andromeda", "Borealis", "Bastion", "Cedar", "Caspian", "Everest", "Draco"),
    *("Helios", "Equinox", "Kepler", "Fornax", "Lyra", "Gemini", "Monarch", "Hydra", "Nova"),
    *("Indus", "Orion", "Juno", "Polaris", "Lynx", "Sierra", "Meteor", "Vega", "Perseus"),
)
"""Deal code names; a world draws from its split's part (`fabric.split_part`)."""
TABS = ("Core Peers", "Extended Peers")
PEER_SUFFIX = ("Industries", "Systems", "Technologies", "Group", "Materials", "Controls", "Works")
METHODS = (
    "Trading comparables",
    "Precedent transactions",
    "DCF (perpetuity growth)",
    "52-week trading range",
    "Analyst price targets",
)
SEGMENTS = (
    *("Industrial Solutions", "Process Automation", "Aftermarket Services", "Field Services"),
    *("Digital Platforms", "Cloud Software", "Specialty Components", "Precision Parts"),
    *("Energy Systems", "Power Electronics", "Healthcare Products", "Medical Devices"),
    *("Aerospace Components", "Water Technologies", "Test and Measurement"),
)
"""Business segments; a world draws from its split's part."""
FIGURES = {  # answer key -> (CIM paragraph heading, description)
    "employees": ("Workforce", "number of employees"),
    "customers": ("Customers", "number of active customers"),
    "manufacturing_sites": ("Manufacturing footprint", "number of manufacturing sites"),
    "countries": ("Global reach", "number of countries where products are sold"),
    "recurring_revenue_pct": ("Revenue model", "recurring share of FY2024 revenue, in percent"),
}
HIST_YEARS = ("FY2022", "FY2023", "FY2024")
PURPOSES = ("the board deck refresh", "the fairness committee materials")
# Statement lines: key, label, formula (None for an input); {c} is the column, {p} the one before.
STATEMENTS: dict[str, list[tuple[str, str, str | None]]] = {
    "IS": [
        ("revenue", "Revenue", None),
        ("cogs", "Cost of goods sold", None),
        ("gp", "Gross profit", "={c}{revenue}-{c}{cogs}"),
        ("opex", "Operating expenses", None),
        ("ebitda", "EBITDA", "={c}{gp}-{c}{opex}"),
        ("da", "Depreciation & amortisation", None),
        ("ebit", "EBIT", "={c}{ebitda}-{c}{da}"),
        ("interest", "Interest expense", None),
        ("ebt", "Profit before tax", "={c}{ebit}-{c}{interest}"),
        ("tax", "Income tax", "={c}{ebt}*TaxRate"),
        ("net_income", "Net income", "={c}{ebt}-{c}{tax}"),
    ],
    "BS": [
        ("cash", "Cash", "=CF!{c}{end}"),
        ("ar", "Receivables", None),
        ("inv", "Inventory", None),
        ("ppe", "PP&E, net", None),
        ("ta", "Total assets", "=SUM({c}{cash}:{c}{ppe})"),
        ("ap", "Payables", None),
        ("debt", "Debt", None),
        ("equity", "Equity", "={c}{ta}-{c}{ap}-{c}{debt}"),
        ("tle", "Total liabilities and equity", "=SUM({c}{ap}:{c}{equity})"),
        ("net_debt", "Net debt", "={c}{debt}-{c}{cash}"),
    ],
    "CF": [
        ("cf_ni", "Net income", "=IS!{c}{net_income}"),
        ("cf_da", "Depreciation & amortisation", "=IS!{c}{da}"),
        ("dwc", "Change in working capital", None),
        ("cfo", "Cash flow from operations", "={c}{cf_ni}+{c}{cf_da}+{c}{dwc}"),
        ("capex", "Capital expenditure", None),
        ("fcf", "Free cash flow", "={c}{cfo}+{c}{capex}"),
        ("repay", "Debt repayment", None),
        ("beg", "Beginning cash", "={p}{end}"),
        ("end", "Ending cash", "={c}{beg}+{c}{fcf}+{c}{repay}"),
    ],
}


@dataclass
class Peer:
    name: str
    ev: float
    ebitda: float
    revenue: float
    net_debt: float

    @property
    def ev_ebitda(self) -> float:
        return self.ev / self.ebitda

    @property
    def ev_revenue(self) -> float:
        return self.ev / self.revenue


@dataclass
class Model:
    """A three-statement model: line items by key, one value per fiscal-year column."""

    years: list[str]
    v: dict[str, list[float]]
    wacc: float  # percent
    tax: float
    tg: float
    kd: float

    def value(self, key: str, year: str) -> float:
        return self.v[key][self.years.index(year)]

    @property
    def net_debt(self) -> float:
        return self.value("net_debt", "FY2024A")


@dataclass
class Merger:
    """Merger-model inputs; `run` is the accretion / dilution arithmetic of one year."""

    acq_price: float
    acq_shares: float
    stock_pct: int
    kd: float  # percent
    tax: int  # percent
    acq_ni: list[float]
    tgt_ni: list[float]
    phase: tuple[int, ...] = (50, 75, 100)

    def run(self, price: float, synergies: float, shares: float, k: int) -> dict[str, float]:
        equity = price * shares
        new_shares = equity * self.stock_pct / 100 / self.acq_price
        keep = 1 - self.tax / 100
        interest = equity * (1 - self.stock_pct / 100) * self.kd / 100 * keep
        syn = synergies * self.phase[k] / 100 * keep
        pf_ni = self.acq_ni[k] + self.tgt_ni[k] + syn - interest
        sa_eps = self.acq_ni[k] / self.acq_shares
        pf_eps = pf_ni / (self.acq_shares + new_shares)
        return {
            "new_shares": new_shares,
            "sa_eps": sa_eps,
            "pf_eps": pf_eps,
            "accretion": (pf_eps / sa_eps - 1) * 100,
            "syn": syn,
            "interest": interest,
            "pf_ni": pf_ni,
        }


@dataclass
class Offer:
    """The offer as it stood from `since` on: the deck's terms, then each revision."""

    since: date
    price: float
    synergies: int
    mail: str = ""


def timetable_file(f: BankFacts) -> str:
    """The deal timetable calendar (`banking._timetable`)."""
    return f"calendar/project_{f.code.lower()}_timetable.ics"


@dataclass
class BankFacts:
    ctx: WorldContext
    bank: str
    code: str
    target: str
    acquirer: str
    md: Person
    vp: Person
    cfo: Person
    model: Model
    model_file: str
    comps: dict[str, list[Peer]]
    comps_file: str
    outliers: dict[str, str]
    merger: Merger
    unaffected: float
    shares: float
    offers: list[Offer]
    deck_file: str
    methods: list[tuple[str, float, float]]
    cim_file: str
    segments: dict[str, list[float]]
    figures: dict[str, float]
    guidance: list[tuple[Person, date, str, str]] = field(default_factory=list)
    bid_deadline: date | None = None
    """The final bid deadline as the deal timetable calendar now shows it."""

    @property
    def latest(self) -> Offer:
        return self.offers[-1]

    def offer_on(self, when: date) -> Offer:
        return [o for o in self.offers if o.since <= when][-1]

    @property
    def net_debt(self) -> float:
        return self.model.net_debt


# -- writers -----------------------------------------------------------------------------------
def model_xlsx(ctx: WorldContext, rel: str, m: Model) -> None:
    wb = WorkbookSpec(title="Three-statement model")
    a = wb.sheet("Assumptions")
    a.append(["Assumption", "Value"])
    for label, value in [
        ("Tax rate", m.tax),
        ("WACC", m.wacc),
        ("Terminal growth rate", m.tg),
        ("Cost of debt", m.kd),
    ]:
        a.append([label, round(value / 100, 6)])
    a.number_formats, a.col_widths = {2: "0.00%"}, {1: 24}
    wb.names.update(
        TaxRate="Assumptions!$B$2", WACC="Assumptions!$B$3", TerminalGrowth="Assumptions!$B$4"
    )
    rows = {key: i + 2 for lines in STATEMENTS.values() for i, (key, _, _) in enumerate(lines)}
    for name, lines in STATEMENTS.items():
        sheet = wb.sheet(name)
        sheet.append(["($m)", *m.years])
        for key, label, expr in lines:
            cells: list[Any] = [label]
            for j in range(len(m.years)):
                value = m.v[key][j]
                if expr is None or (key == "beg" and j == 0):
                    cells.append(value)
                else:
                    refs = {"c": get_column_letter(j + 2), "p": get_column_letter(j + 1)}
                    cells.append(Formula(expr.format(**refs, **rows), value))
            sheet.append(cells)
        sheet.number_formats = {j + 2: "#,##0.0" for j in range(len(m.years))}
        sheet.col_widths = {1: 30}
    ctx.xlsx(rel, wb)


def comps_xlsx(ctx: WorldContext, rel: str, comps: dict[str, list[Peer]], when: date) -> None:
    wb = WorkbookSpec(title="Trading comparables")
    cover = wb.sheet("Cover")
    cover.append(["Trading comparables", ""])
    cover.append(["Prices as of", when.isoformat()])
    cover.append(["Source", "Market data; EBITDA is last twelve months"])
    for tab, peers in comps.items():
        sheet = wb.sheet(tab)
        sheet.append(
            [
                "Company",
                "Enterprise Value ($m)",
                "EBITDA ($m)",
                "Revenue ($m)",
                "Net Debt ($m)",
                "EV/EBITDA",
                "EV/Revenue",
            ]
        )
        for r, p in enumerate(peers, start=2):
            sheet.append(
                [
                    p.name,
                    p.ev,
                    p.ebitda,
                    p.revenue,
                    p.net_debt,
                    Formula(f"=B{r}/C{r}", round(p.ev_ebitda, 6)),
                    Formula(f"=B{r}/D{r}", round(p.ev_revenue, 6)),
                ]
            )
        n = len(peers) + 1
        sheet.append([])
        for stat, fn in (("Median", statistics.median), ("Mean", statistics.fmean)):
            sheet.append(
                [
                    stat,
                    None,
                    None,
                    None,
                    None,
                    Formula(
                        f"={stat.upper()}(F2:F{n})".replace("MEAN", "AVERAGE"),
                        round(fn(p.ev_ebitda for p in peers), 6),
                    ),
                    Formula(
                        f"={stat.upper()}(G2:G{n})".replace("MEAN", "AVERAGE"),
                        round(fn(p.ev_revenue for p in peers), 6),
                    ),
                ]
            )
        sheet.bold_rows = {1, n + 2, n + 3}
        sheet.number_formats = {
            2: "#,##0.0",
            3: "#,##0.0",
            4: "#,##0.0",
            5: "#,##0.0",
            6: '0.00"x"',
            7: '0.00"x"',
        }
        sheet.col_widths = {1: 24, 2: 20, 3: 14, 4: 14, 5: 14, 6: 12, 7: 12}
    ctx.xlsx(rel, wb)


def merger_xlsx(ctx: WorldContext, rel: str, f: BankFacts) -> None:
    m, offer = f.merger, f.offers[0]
    equity = offer.price * f.shares
    wb = WorkbookSpec(title=f"Project {f.code} merger model")
    inp = wb.sheet("Inputs")
    rows: list[list[Any]] = [
        ["Input", "Value"],
        ["Offer price per share ($)", offer.price],
        ["Target diluted shares (m)", f.shares],
        ["Acquirer share price ($)", m.acq_price],
        ["Acquirer shares outstanding (m)", m.acq_shares],
        ["Stock consideration (%)", m.stock_pct / 100],
        ["Cash consideration (%)", Formula("=1-B6", 1 - m.stock_pct / 100)],
        ["Pre-tax cost of new debt (%)", m.kd / 100],
        ["Tax rate (%)", m.tax / 100],
        ["Run-rate synergies ($m)", offer.synergies],
        ["Equity purchase price ($m)", Formula("=B2*B3", round(equity, 6))],
        [
            "New acquirer shares issued (m)",
            Formula("=B11*B6/B4", round(equity * m.stock_pct / 100 / m.acq_price, 6)),
        ],
        ["New debt raised ($m)", Formula("=B11*B7", round(equity * (1 - m.stock_pct / 100), 6))],
    ]
    for row in rows:
        inp.append(row)
    inp.col_widths = {1: 32, 2: 14}
    wb.names.update(OfferPrice="Inputs!$B$2", Synergies="Inputs!$B$10")
    ad = wb.sheet("Accretion Dilution")
    ad.append(["($m unless stated)", "Year 1", "Year 2", "Year 3"])
    runs = [m.run(offer.price, offer.synergies, f.shares, k) for k in range(3)]
    pf_shares = m.acq_shares + runs[0]["new_shares"]
    lines: list[tuple[str, str | None, list[float]]] = [
        ("Synergy phase-in (%)", None, [p / 100 for p in m.phase]),
        ("Acquirer net income", None, m.acq_ni),
        ("Target net income", None, [round(x, 6) for x in m.tgt_ni]),
        ("After-tax synergies", "=Inputs!$B$10*{c}2*(1-Inputs!$B$9)", [r["syn"] for r in runs]),
        (
            "After-tax interest on new debt",
            "=Inputs!$B$13*Inputs!$B$8*(1-Inputs!$B$9)",
            [r["interest"] for r in runs],
        ),
        ("Pro-forma net income", "={c}3+{c}4+{c}5-{c}6", [r["pf_ni"] for r in runs]),
        ("Acquirer standalone shares (m)", "=Inputs!$B$5", [m.acq_shares] * 3),
        ("Pro-forma shares (m)", "={c}8+Inputs!$B$12", [pf_shares] * 3),
        ("Standalone EPS ($)", "={c}3/{c}8", [r["sa_eps"] for r in runs]),
        ("Pro-forma EPS ($)", "={c}7/{c}9", [r["pf_eps"] for r in runs]),
        ("Accretion / (dilution) (%)", "={c}11/{c}10-1", [r["accretion"] / 100 for r in runs]),
    ]
    for label, expr, values in lines:
        cells: list[Any] = [label]
        for j, value in enumerate(values):
            col = get_column_letter(j + 2)
            cells.append(
                round(value, 6) if expr is None else Formula(expr.format(c=col), round(value, 6))
            )
        ad.append(cells)
    ad.col_widths = {1: 32, 2: 12, 3: 12, 4: 12}
    ctx.xlsx(rel, wb)


def deck(
    ctx: WorldContext,
    f: BankFacts,
    rel: str,
    price: float,
    methods: list[tuple[str, float, float]],
    peers: list[Peer],
    when: date,
) -> None:
    draft = "DRAFT - " if "/drafts/" in rel else ""
    deck = DeckSpec(
        f"Project {f.code}",
        f"{draft}Discussion materials for the Board of Directors | {long_date(when)}",
    )
    deck.add(
        "Transaction overview",
        [
            f"{f.acquirer} proposes to acquire {f.target}; {f.bank} advises {f.ctx.company}",
            f"Offer price: ${price:.2f} per share",
            f"Premium to unaffected share price of ${f.unaffected:.2f}: "
            f"{(price / f.unaffected - 1) * 100:.1f}%",
            f"Target diluted shares: {f.shares:.1f}m",
            f"Implied equity value: ${price * f.shares:,.1f}m",
            f"Consideration: {f.merger.stock_pct}% stock / {100 - f.merger.stock_pct}% cash",
            f"Run-rate synergies: ${f.offers[0].synergies}m",
        ],
    )
    deck.add(
        "Valuation summary",
        table=(
            ["Methodology", "Low ($/share)", "High ($/share)"],
            [[m, f"{lo:.2f}", f"{hi:.2f}"] for m, lo, hi in methods],
        ),
    )
    deck.add(
        "Valuation football field ($ per share)",
        chart=(
            "bar",
            [m for m, _, _ in methods],
            {"Low": [lo for _, lo, _ in methods], "High": [hi for _, _, hi in methods]},
        ),
    )
    deck.add(
        f"Trading comparables: {TABS[0]}",
        table=(["Company", "EV/EBITDA"], [[p.name, f"{p.ev_ebitda:.1f}x"] for p in peers]),
    )
    deck.add(
        "Next steps",
        [
            "Board approval of the offer terms",
            "Confirmatory due diligence",
            f"Signing targeted for {long_date(day(when, 45))}",
        ],
    )
    ctx.pptx(rel, deck)


def cim(ctx: WorldContext, f: BankFacts) -> None:
    rng, fig = ctx.rng, f.figures
    doc = ctx.pdf(
        f.cim_file,
        f"Project {f.code} - Confidential Information Memorandum",
        footer=f"Strictly confidential | Prepared by {f.bank}",
    )
    doc.para(
        f'This memorandum describes {f.target} (the "Company") for the purposes of Project '
        f"{f.code}. It was prepared by {f.bank} from information supplied by management."
    )
    doc.heading("Business overview")
    doc.two_columns(
        [
            f"Company history|{f.target} was founded in {rng.randint(1950, 2004)} in "
            f"{rng.choice(CITIES)} and listed its shares in {rng.randint(2005, 2018)}. It has "
            f"completed {rng.randint(3, 12)} acquisitions since then.",
            f"Workforce|The Company employs {fig['employees']:,} people, about "
            f"{rng.randint(40, 70)}% of them in engineering and production roles; voluntary "
            f"turnover was {rng.randint(5, 14)}% last year.",
            f"Customers|The Company serves {fig['customers']:,} active customers. The largest "
            f"accounts for {rng.randint(3, 9)}% of revenue and the top ten for "
            f"{rng.randint(18, 40)}%.",
            f"Manufacturing footprint|Production runs across {fig['manufacturing_sites']} "
            f"manufacturing sites with {rng.randint(40, 400) * 1000:,} square metres of floor "
            f"space and average utilisation of {rng.randint(60, 90)}%.",
            f"Growth strategy|Management targets {rng.randint(4, 9)}% organic growth a year to "
            f"FY2028 and {rng.randint(2, 4)} bolt-on acquisitions a year.",
            f"Global reach|Products are sold in {fig['countries']} countries through "
            f"{rng.randint(20, 140)} distribution partners and {rng.randint(5, 30)} sales offices.",
            f"Revenue model|Recurring service and consumables revenue made up "
            f"{fig['recurring_revenue_pct']}% of FY2024 revenue, up from "
            f"{fig['recurring_revenue_pct'] - rng.randint(20, 80) / 10:.1f}% three years earlier.",
            f"Management|The executive team of {rng.randint(6, 11)} has an average tenure of "
            f"{rng.randint(6, 15)} years with the Company.",
        ]
    )
    doc.heading("Historical financials by segment")
    doc.para("Revenue by reporting segment in $m; fiscal years end in December.")
    rows = [[s, *(f"{x:,.1f}" for x in values)] for s, values in sorted(f.segments.items())]
    rows.append(["Total", *(f"{sum(v[j] for v in f.segments.values()):,.1f}" for j in range(3))])
    doc.table(["Segment", *HIST_YEARS], rows)
    doc.save()


def teaser(ctx: WorldContext, f: BankFacts) -> None:
    total = sum(v[2] for v in f.segments.values())
    doc = ctx.pdf(
        f"cim/project_{f.code.lower()}_teaser.pdf",
        f"Project {f.code} - Teaser",
        footer=f"{f.bank} | Strictly confidential",
    )
    doc.para(
        f"{f.bank} has been engaged on a potential transaction involving a market-leading "
        "industrial business (the Company). Figures below are rounded."
    )
    doc.kv(
        [
            ("FY2024 revenue", f"about ${round(total, -1):,.0f}m"),
            ("Employees", f"about {round(f.figures['employees'], -3):,.0f}"),
            ("Countries served", f"{f.figures['countries'] // 10 * 10}+"),
            ("Process", "Two-stage process; indicative offers due in four weeks"),
        ]
    )
    doc.save()


def term_sheet(ctx: WorldContext, f: BankFacts, rel: str, price: float) -> None:
    spec = DocSpec(f"Project {f.code} - Indicative Term Sheet")
    spec.p(
        f"This non-binding term sheet sets out the principal terms on which {f.acquirer} "
        f"proposes to acquire {f.target}."
    )
    spec.table(
        ["Term", "Detail"],
        [
            ["Acquirer", f.acquirer],
            ["Target", f.target],
            ["Offer price per share", f"${price:.2f}"],
            ["Consideration", f"{f.merger.stock_pct}% stock / {100 - f.merger.stock_pct}% cash"],
            ["Termination fee", f"${round(price * f.shares * 0.03, 1):,.1f}m"],
            ["Exclusivity", f"{ctx.rng.choice([30, 45, 60])} days from signing"],
        ],
    )
    spec.h1("Conditions")
    spec.p("Regulatory clearances, shareholder approval and confirmatory due diligence.")
    ctx.docx(rel, spec)


def ic_memo(ctx: WorldContext, f: BankFacts, rel: str) -> None:
    offer = f.offers[0]
    spec = DocSpec(f"Investment Committee Memo - Project {f.code}")
    spec.h1("Recommendation")
    spec.p(
        f"The deal team recommends proceeding on the terms in the board presentation: "
        f"${offer.price:.2f} per share with run-rate synergies of ${offer.synergies}m."
    )
    spec.h1("Key figures")
    spec.table(
        ["Item", "Value"],
        [
            ["Offer price per share", f"${offer.price:.2f}"],
            ["Implied equity value", f"${offer.price * f.shares:,.1f}m"],
            ["Run-rate synergies", f"${offer.synergies}m"],
        ],
    )
    ctx.docx(rel, spec)
