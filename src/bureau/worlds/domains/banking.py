"""Investment banking: a bank advises the world's company on an acquisition.

The deal team's drive holds the target's three-statement model (current v4 next to a superseded
v3), two dated trading-comps workbooks with two peer tabs each, a merger model with accretion /
dilution, the final board deck and an earlier draft (valuation table, football-field chart,
transaction overview), a CIM with a two-column business description and a ruled segment table,
a teaser, a term sheet and an IC memo. Mail carries peer-set guidance, a comps refresh and two
offer revisions that postdate the deck; #deal-team flags the outlier peer on each comps tab.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from ..fabric import BANKS, CITIES, LAST, Person, at, company_name, day, long_date, people, slug
from ..render.documents import DocSpec
from ..render.messages import ChatMessage, Email
from ..render.slides import DeckSpec
from ..spec import PdfProbe, TaskSpec, Template, WorldContext
from ..spec import docx_content as docx_has
from ..spec import file_exists, numeric, text, xlsx_cell

CODENAMES = "Atlas Borealis Cedar Everest Helios Kepler Lyra Monarch Nova Orion Polaris Sierra Vega"
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
    "Industrial Solutions",
    "Aftermarket Services",
    "Digital Platforms",
    "Specialty Components",
    "Energy Systems",
    "Healthcare Products",
)
FIGURES = {  # answer key -> (CIM paragraph heading, description)
    "employees": ("Workforce", "number of employees"),
    "customers": ("Customers", "number of active customers"),
    "manufacturing_sites": ("Manufacturing footprint", "number of manufacturing sites"),
    "countries": ("Global reach", "number of countries where products are sold"),
    "recurring_revenue_pct": ("Revenue model", "recurring share of FY2024 revenue, in percent"),
}
HIST_YEARS = ("FY2022", "FY2023", "FY2024")


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
class Offer:
    """The offer as it stood from `since` on: the deck's terms, then each revision."""

    since: date
    price: float
    synergies: int
    mail: str = ""


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

    @property
    def latest(self) -> Offer:
        return self.offers[-1]

    def offer_on(self, when: date) -> Offer:
        return [o for o in self.offers if o.since <= when][-1]

    @property
    def net_debt(self) -> float:
        return self.model.value("net_debt", "FY2024A")


# -- world -----------------------------------------------------------------------------------
def build(ctx: WorldContext) -> BankFacts:
    rng = ctx.rng
    starter = ctx.difficulty == "starter"
    other = company_name(rng, ctx.split, "banking", {ctx.company})
    target, acquirer = (ctx.company, other) if rng.random() < 0.5 else (other, ctx.company)
    bank = rng.choice(BANKS)
    code = rng.choice(CODENAMES.split())
    bankers = people(rng, 3, ["Managing Director", "Vice President", "Associate"], "x")
    bank_domain = slug(bank.split()[0]) + ".example.com"
    md, vp, assoc = (Person(p.first, p.last, p.title, bank_domain) for p in bankers)
    cfo = people(rng, 1, ["CFO"], ctx.email_domain)[0]
    history = _history(rng)
    model, stale = _models(rng, history, n_actual=rng.choice([1, 2]))
    tslug = slug(target)
    model_file = f"models/{tslug}_three_statement_model_v4.xlsx"
    base = date(2025, 9, 1) + (day(date(2025, 9, 1), rng.randint(0, 20)) - date(2025, 9, 1))
    old_comps, new_comps, outliers = _comps(rng, {target, acquirer})
    comps_old_file = f"comps/trading_comps_{day(base, -1).isoformat()}.xlsx"
    comps_file = f"comps/trading_comps_{day(base, 24).isoformat()}.xlsx"
    median = statistics.median(p.ev_ebitda for p in new_comps[TABS[0]] if p.name != outliers[TABS[0]])
    equity = median * model.value("ebitda", "FY2024A") - model.value("net_debt", "FY2024A")
    shares = rng.randint(150, 900) * 0.4
    unaffected = round(max(equity, 400.0) / shares * 4) / 4
    prices = [unaffected * (1 + rng.randint(18, 30) / 100)]
    prices.append(prices[0] + rng.randint(2, 8) * 0.25)
    prices.append(prices[1] + rng.randint(1, 6) * 0.25)
    prices = [round(p * 4) / 4 for p in prices]
    synergies = [rng.randint(4, 30) * 5]
    d0, d1 = day(base, 20), day(base, 30)
    d2 = day(d1, rng.randint(14, 20))
    offers = [Offer(d0, prices[0], synergies[0])]
    deck_file = f"decks/project_{code.lower()}_board_presentation.pptx"
    methods = _methods(rng, unaffected)
    merger = Merger(
        acq_price=rng.randint(160, 600) * 0.25,
        acq_shares=rng.randint(300, 1500) * 0.5,
        stock_pct=rng.choice([30, 40, 50, 60, 70]),
        kd=rng.randint(20, 30) * 0.25,
        tax=rng.choice([21, 24, 25, 26]),
        phase=[50, 75, 100],
        acq_ni=[],
        tgt_ni=[model.value("net_income", y) for y in model.years if y.endswith("E")],
    )
    acq_ni0 = merger.acq_price * merger.acq_shares / rng.randint(12, 20)
    merger.acq_ni = [round(acq_ni0 * (1.05**k), 1) for k in range(3)]
    facts = BankFacts(
        ctx, bank, code, target, acquirer, md, vp, cfo, model, model_file, new_comps,
        comps_file, outliers, merger, unaffected, shares, offers, deck_file, methods,
        f"cim/project_{code.lower()}_cim.pdf", history, _figures(rng),
    )
    _model_xlsx(ctx, model_file, model)
    _comps_xlsx(ctx, comps_file, new_comps, day(base, 24))
    _deck(ctx, facts, deck_file, prices[0], methods, old_comps[TABS[0]], d0)
    _cim(ctx, facts)
    rev1 = _revision(ctx, facts, d1, prices[1], None, starter)
    if starter:
        return facts
    _model_xlsx(ctx, f"models/{tslug}_three_statement_model_v3.xlsx", stale)
    _comps_xlsx(ctx, comps_old_file, old_comps, day(base, -1))
    _merger_xlsx(ctx, f"merger/project_{code.lower()}_merger_model.xlsx", facts)
    draft = f"decks/drafts/project_{code.lower()}_board_presentation_DRAFT.pptx"
    draft_methods = [(m, lo - 0.75, hi + rng.randint(1, 4) * 0.5) for m, lo, hi in methods]
    _deck(ctx, facts, draft, prices[0] - rng.randint(2, 6) * 0.25, draft_methods,
               old_comps[TABS[0]], day(base, 10))
    _teaser(ctx, facts)
    synergies.append(synergies[0] + rng.choice([-1, 1]) * rng.randint(1, 5) * 5)
    _mails(ctx, facts, assoc, base, draft, rev1, d2, prices, synergies)
    _chat(ctx, facts, assoc, base)
    return facts


def _history(rng: random.Random) -> dict[str, list[float]]:
    """Segment revenue for FY2022-FY2024; the totals are the model's historical revenue."""
    names = sorted(rng.sample(SEGMENTS, rng.randint(3, 4)))
    out: dict[str, list[float]] = {}
    for name in names:
        start = rng.randint(1200, 9000) / 10
        out[name] = [round(start * (1 + rng.randint(-4, 14) / 100) ** k, 1) for k in range(3)]
    return out


def _comps(
    rng: random.Random, taken: set[str]
) -> tuple[dict[str, list[Peer]], dict[str, list[Peer]], dict[str, str]]:
    pool = sorted({f"{last} {s}" for last in LAST for s in PEER_SUFFIX} - taken)
    names = rng.sample(pool, 13)
    old: dict[str, list[Peer]] = {}
    new: dict[str, list[Peer]] = {}
    outliers: dict[str, str] = {}
    for t, tab in enumerate(TABS):
        chosen = names[:6] if t == 0 else names[6 : 6 + rng.randint(6, 7)]
        odd = rng.randrange(len(chosen))
        outliers[tab] = chosen[odd]
        old[tab], new[tab] = [], []
        for i, name in enumerate(chosen):
            ebitda = rng.randint(1500, 25000) / 10
            mult = rng.randint(220, 340) / 10 if i == odd else rng.randint(650, 1450) / 100
            revenue = round(ebitda / (rng.randint(12, 35) / 100), 1)
            ev = round(ebitda * mult, 1)
            net_debt = round(ev * rng.randint(5, 35) / 100, 1)
            old[tab].append(Peer(name, ev, ebitda, revenue, net_debt))
            ev2 = round(ev * (1 + rng.randint(-80, 80) / 1000), 1)
            new[tab].append(Peer(name, ev2, ebitda, revenue, net_debt))
    return old, new, outliers


def _methods(rng: random.Random, price: float) -> list[tuple[str, float, float]]:
    out = []
    for method in METHODS:
        low = round(price * rng.randint(80, 112) / 100 * 4) / 4
        out.append((method, low, low + rng.randint(8, 40) * 0.25))
    return out


def _figures(rng: random.Random) -> dict[str, float]:
    return {
        "employees": rng.randint(80, 900) * 10,
        "customers": rng.randint(150, 4200),
        "manufacturing_sites": rng.randint(4, 26),
        "countries": rng.randint(11, 64),
        "recurring_revenue_pct": rng.randint(350, 780) / 10,
    }


def _revision(
    ctx: WorldContext, f: BankFacts, when: date, price: float, synergies: int | None, starter: bool
) -> str:
    prev = f.latest
    syn = prev.synergies if synergies is None else synergies
    rel = f"mail/inbox/{when.isoformat()}_project_{f.code.lower()}_offer_update.eml"
    body = (
        f"{f.cfo.first},\n\nFollowing the call with the {f.acquirer} board, the offer price is now "
        f"${price:.2f} per share (the board presentation showed ${prev.price:.2f}). "
    )
    if synergies is None:
        body += f"The consideration mix and run-rate synergies of ${syn}m are unchanged."
    else:
        body += f"Confirmatory diligence also moved the synergy case: run-rate synergies are now ${syn}m."
    ctx.email(
        rel,
        Email(
            sender=f.md.address,
            to=[f.cfo.address],
            cc=[f.vp.address],
            subject=f"Project {f.code}: revised offer",
            body=body + f"\n\nBest,\n{f.md.name}\n{f.bank}",
            sent=at(when, 18, ctx.rng.randint(0, 59)),
        ),
    )
    f.offers.append(Offer(when, price, syn, rel))
    return rel


def _mails(
    ctx: WorldContext,
    f: BankFacts,
    assoc: Person,
    base: date,
    draft: str,
    rev1: str,
    d2: date,
    prices: list[float],
    synergies: list[int],
) -> None:
    rng = ctx.rng
    code = f.code
    team = [f.md.address, f.vp.address, assoc.address]

    def mail(when: date, sender: Person, subject: str, body: str, att: list[str] = ()) -> None:  # type: ignore[assignment]
        rel = f"mail/inbox/{when.isoformat()}_{slug(subject)[:40]}.eml"
        ctx.email(
            rel,
            Email(
                sender=sender.address,
                to=[a for a in team if a != sender.address],
                subject=subject,
                body=body + f"\n\n{sender.first}",
                sent=at(when, rng.randint(8, 17), rng.randint(0, 59)),
                attachments=[ctx.workspace / a for a in att],
            ),
        )

    mail(base, f.md, f"Project {code} kickoff",
         f"Team,\n\n{f.bank} is mandated on Project {code}: {f.acquirer}'s proposed acquisition "
         f"of {f.target}. Working model is in models/ (v4 is the live version). Board meeting "
         f"planned for {long_date(f.offers[0].since)}.")
    mail(day(base, 10), assoc, f"Project {code} draft board deck",
         "Attached the first draft of the board deck for comments. Offer and ranges are "
         "placeholders until the model is locked.", [draft])
    purposes = ("the board deck refresh", "the fairness committee materials")
    tabs = list(TABS)
    rng.shuffle(tabs)
    for k, (who, purpose, tab) in enumerate(zip((f.vp, f.md), purposes, tabs, strict=True)):
        when = day(base, 15 + k * 12)
        f.guidance.append((who, when, purpose, tab))
        mail(when, who, f"Project {code} comps guidance for {purpose}",
             f"Team,\n\nFor {purpose}, please use the {tab} tab of the latest trading comps "
             f"workbook when valuing {f.target}. Leave out the outlier flagged in #deal-team.")
    mail(day(base, 24), assoc, f"Project {code} refreshed trading comps",
         "Attached the refreshed trading comps (prices as of today). Please use this version "
         "going forward; the earlier file is superseded.", [f.comps_file])
    term_sheet = f"legal/project_{code.lower()}_term_sheet.docx"
    _term_sheet(ctx, f, term_sheet, prices[1])
    mail(day(f.offers[1].since, 3), f.vp, f"Project {code} term sheet",
         f"Attached the indicative term sheet reflecting the revised offer of ${prices[1]:.2f}.",
         [term_sheet])
    _ic_memo(ctx, f, f"memos/project_{code.lower()}_ic_memo.docx")
    _revision(ctx, f, d2, prices[2], synergies[1], False)
    mail(day(base, rng.randint(3, 40)), assoc, "Printer for board books",
         f"The print shop needs {rng.randint(12, 30)} copies by Thursday at 10:00.")


# -- templates ------------------------------------------------------------------------------
def _pick(items: list[Any], variant: int) -> Any:
    return items[variant % len(items)]


def _tie(value: float, digits: int) -> bool:
    """True when `value` sits so near a rounding midpoint that the rounded form is ambiguous."""
    scaled = abs(value) * 10**digits
    return abs(scaled - int(scaled) - 0.5) < 0.02


def _where(f: BankFacts, rel: str) -> str:
    return f" (`{rel}`)" if f.ctx.difficulty == "starter" else ""


def _median(f: BankFacts, tab: str, exclude: str | None, attr: str = "ev_ebitda") -> float:
    return statistics.median(getattr(p, attr) for p in f.comps[tab] if p.name != exclude)


def t_line_item(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    year = _pick(f.model.years, variant)
    keys = ["revenue", "ebitda", "net_income"] + ([] if f.ctx.difficulty == "starter" else ["fcf"])
    gold = {k: round(f.model.value(k, year), 4) for k in keys}
    names = {"revenue": "Revenue", "ebitda": "EBITDA", "net_income": "Net income",
             "fcf": "Free cash flow"}
    return TaskSpec(
        template="banking.model_line_item",
        kind="fact",
        title=f"{f.target} {year} financials from the model",
        question=(
            f"From the current three-statement model of {f.target}{_where(f, f.model_file)}, "
            f"what are {year} revenue, EBITDA and net income"
            + (" and free cash flow? Older model versions do not count." if "fcf" in keys else "?")
        ),
        answer_keys={k: f"number, {names[k]} for {year} in $m" for k in keys},
        criteria=[numeric(k, v, f"States {year} {names[k]}") for k, v in gold.items()],
        gold=gold,
        oracle={"year": year, "keys": keys},
        signature=f"line:{year}",
    )


def t_dcf(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    delta = _pick([0.0, -0.5, 0.5, -1.0, 1.0], variant)
    m = f.model
    wacc = m.wacc + delta
    fcf = [m.value("fcf", y) for y in m.years if y.endswith("E")]
    w, g = wacc / 100, m.tg / 100
    pv = sum(x / (1 + w) ** t for t, x in enumerate(fcf, start=1))
    pv_tv = fcf[-1] * (1 + g) / (w - g) / (1 + w) ** len(fcf)
    how = "at the model's WACC" if delta == 0 else f"at the model's WACC {delta:+.1f} points"
    gold = {"wacc_pct": wacc, "pv_fcf": pv, "pv_terminal": pv_tv, "enterprise_value": pv + pv_tv}
    return TaskSpec(
        template="banking.dcf_valuation",
        kind="compute",
        title=f"DCF of {f.target} {how}",
        question=(
            f"Run a quick DCF of {f.target} off the current three-statement model {how}. Use "
            "the model's named ranges WACC and TerminalGrowth and the free cash flow of each "
            "projected year (columns ending in E), discounted at the end of each year (the first "
            "projected year is year 1). The terminal value is the last projected free cash flow "
            "grown one year at the terminal growth rate and capitalised at (WACC - growth), "
            "discounted with the last projected year's factor."
        ),
        answer_keys={
            "wacc_pct": "number, the discount rate used, in percent (e.g. 8.75)",
            "pv_fcf": "number, sum of the present values of projected free cash flow, $m",
            "pv_terminal": "number, present value of the terminal value, $m",
            "enterprise_value": "number, the DCF enterprise value, $m",
        },
        criteria=[
            numeric("wacc_pct", wacc, "Uses the model's WACC with the stated change", abs_tol=0.006),
            numeric("pv_fcf", pv, "Discounts the projected free cash flows"),
            numeric("pv_terminal", pv_tv, "Values the terminal year"),
            numeric("enterprise_value", pv + pv_tv, "Adds up the enterprise value"),
        ],
        gold=gold,
        oracle={"delta": delta},
        signature=f"dcf:{delta}",
    )


def t_comps_stats(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    tab = _pick(list(TABS), variant)
    peers = f.comps[tab]
    drop = f.outliers[tab] if variant < 2 else _pick(peers, variant // 2 + rng.randint(0, 5)).name
    kept = [p.ev_ebitda for p in peers if p.name != drop]
    med, mean = statistics.median(kept), statistics.fmean(kept)
    return TaskSpec(
        template="banking.comps_stats",
        kind="compute",
        title=f"EV/EBITDA of the {tab} excluding {drop}",
        question=(
            f"Using the {tab} tab of the latest trading comps workbook"
            f"{_where(f, f.comps_file)}, compute each peer's EV/EBITDA from its enterprise value "
            f"and EBITDA, leave out {drop}, and give the median and mean multiple of the rest, "
            "each rounded to 2 decimals. The workbook's own summary rows include every peer."
        ),
        answer_keys={
            "peer_count": "number of peers used",
            "median_ev_ebitda": "number, median EV/EBITDA, 2 decimals",
            "mean_ev_ebitda": "number, mean EV/EBITDA, 2 decimals",
        },
        criteria=[
            numeric("peer_count", len(kept), "Counts the peers used"),
            numeric("median_ev_ebitda", med, "Median multiple", abs_tol=0.006),
            numeric("mean_ev_ebitda", mean, "Mean multiple", abs_tol=0.006),
        ],
        gold={"peer_count": len(kept), "median_ev_ebitda": med, "mean_ev_ebitda": mean},
        oracle={"tab": tab, "exclude": drop},
        signature=f"comps:{tab}:{drop}",
    )


def _implied(f: BankFacts, tab: str, year: str) -> dict[str, float]:
    med = _median(f, tab, f.outliers[tab])
    ebitda = f.model.value("ebitda", year)
    ev = med * ebitda
    return {"median_ev_ebitda": med, "ebitda": ebitda, "implied_ev": ev,
            "implied_equity_value": ev - f.net_debt, "per_share": (ev - f.net_debt) / f.shares}


def t_implied(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    tab = _pick(list(TABS), variant)
    year = _pick([y for y in f.model.years if y.endswith("E")], variant // 2)
    gold = _implied(f, tab, year)
    return TaskSpec(
        template="banking.implied_value",
        kind="compute",
        title=f"Implied value of {f.target} at the {tab} median",
        question=(
            f"Value {f.target} on trading comps: take the median EV/EBITDA of the {tab} tab of "
            f"the latest comps workbook, leaving out {f.outliers[tab]}, and apply it (unrounded) "
            f"to {year} EBITDA from the current three-statement model. Subtract net debt at "
            "FY2024A from the model's balance sheet to get equity value, and divide by the "
            "target's diluted shares in the merger model."
        ),
        answer_keys={
            "median_ev_ebitda": "number, the median multiple, 2 decimals",
            "ebitda": f"number, {year} EBITDA, $m",
            "implied_ev": "number, implied enterprise value, $m",
            "implied_equity_value": "number, implied equity value, $m",
            "per_share": "number, implied value per share, $",
        },
        criteria=[
            numeric("median_ev_ebitda", gold["median_ev_ebitda"], "Median multiple", abs_tol=0.006),
            numeric("ebitda", gold["ebitda"], f"Uses {year} EBITDA of the current model"),
            numeric("implied_ev", gold["implied_ev"], "Implied enterprise value"),
            numeric("implied_equity_value", gold["implied_equity_value"], "Bridges to equity",
                    rel_tol=2e-3),
            numeric("per_share", gold["per_share"], "Value per share", rel_tol=2e-3),
        ],
        gold=gold,
        oracle={"tab": tab, "exclude": f.outliers[tab], "year": year},
        signature=f"implied:{tab}:{year}",
    )


def t_guidance(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    who, when, purpose, tab = _pick(f.guidance, variant)
    year = _pick([y for y in f.model.years if y.endswith("E")], variant // 2)
    gold = _implied(f, tab, year)
    return TaskSpec(
        template="banking.peer_guidance",
        kind="multi_hop",
        title=f"Comps valuation for {purpose}",
        question=(
            f"On {long_date(when)}, {who.name} emailed the team which peer tab of the trading "
            f"comps to use for {purpose}. Using that tab of the latest comps workbook, without "
            "the peer that #deal-team flagged as the outlier on that tab, what is the median "
            f"EV/EBITDA, and what enterprise value does it imply for {f.target} on {year} EBITDA "
            "from the current three-statement model (apply the unrounded median)?"
        ),
        answer_keys={
            "peer_tab": "string, the name of the tab used",
            "excluded_peer": "string, the peer left out",
            "median_ev_ebitda": "number, median EV/EBITDA, 2 decimals",
            "implied_ev": "number, implied enterprise value, $m",
        },
        criteria=[
            text("peer_tab", tab, "Follows the email's peer tab"),
            text("excluded_peer", f.outliers[tab], "Leaves out the flagged outlier"),
            numeric("median_ev_ebitda", gold["median_ev_ebitda"], "Median multiple", abs_tol=0.006),
            numeric("implied_ev", gold["implied_ev"], "Implied enterprise value"),
        ],
        gold={**gold, "peer_tab": tab, "excluded_peer": f.outliers[tab]},
        oracle={"sender": who.name, "date": when.isoformat(), "year": year},
        signature=f"guidance:{tab}:{year}",
    )


def _offer_terms(f: BankFacts, offer: Offer) -> dict[str, float]:
    equity = offer.price * f.shares
    return {"offer_price": offer.price, "equity_value": equity,
            "premium_pct": (offer.price / f.unaffected - 1) * 100,
            "enterprise_value": equity + f.net_debt}


def t_revised_offer(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    starter = f.ctx.difficulty == "starter"
    as_of = f.latest.since if starter or variant % 2 == 0 else day(f.offers[1].since, 5)
    offer = f.offer_on(as_of)
    terms = _offer_terms(f, offer)
    ask = _pick([["equity_value", "premium_pct"], ["equity_value", "enterprise_value"],
                 ["premium_pct", "enterprise_value"]], variant // 2)
    if starter:
        ask = ask[:1]
    desc = {
        "equity_value": ("number, offer price times the target's diluted shares, $m",
                         "Implied equity value at that offer"),
        "premium_pct": ("number, premium to the unaffected share price, %, 1 decimal",
                        "Premium to the unaffected price"),
        "enterprise_value": ("number, equity value plus FY2024A net debt from the current "
                             "three-statement model, $m", "Implied enterprise value"),
    }
    when = "now stands" if as_of == f.latest.since else f"stood on {long_date(as_of)}"
    where = f" The revision is in `{f.offers[1].mail}`." if starter else ""
    criteria = [numeric("offer_price", offer.price, "Uses the offer price in force")]
    for key in ask:
        tol = {"abs_tol": 0.06} if key == "premium_pct" else {}
        criteria.append(numeric(key, terms[key], desc[key][1], **tol))  # type: ignore[arg-type]
    return TaskSpec(
        template="banking.revised_offer",
        kind="reconcile",
        title=f"Project {f.code} offer as it {when}",
        question=(
            f"The board presentation for Project {f.code}{_where(f, f.deck_file)} shows an "
            f"offer price for {f.target}, but the offer has moved since.{where} What is the "
            f"offer price per share as it {when}? Take the unaffected share price and the "
            "target's diluted share count from the board presentation's transaction overview."
        ),
        answer_keys={"offer_price": "number, offer price per share in $",
                     **{k: desc[k][0] for k in ask}},
        criteria=criteria,
        gold={k: terms[k] for k in ["offer_price", *ask]},
        oracle={"as_of": as_of.isoformat()},
        signature=f"offer:{as_of}:{'+'.join(ask)}",
    )


def t_revised_accretion(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    k = variant % 3
    offer = f.latest
    ad = f.merger.run(offer.price, offer.synergies, f.shares, k)
    return TaskSpec(
        template="banking.revised_accretion",
        kind="reconcile",
        title=f"Year {k + 1} accretion / dilution at the latest terms",
        question=(
            f"The merger model for Project {f.code} still runs at the board presentation's offer "
            "price and synergies. Rerun year "
            f"{k + 1} at the latest offer price and run-rate synergies from the deal emails, "
            "keeping every other merger-model input (consideration mix, cost of debt, tax rate, "
            "phase-in, net incomes, share counts). Report new shares issued, pro-forma EPS "
            "rounded to 2 decimals and accretion / (dilution) in percent to 1 decimal, computed "
            "from unrounded EPS (negative for dilution)."
        ),
        answer_keys={
            "offer_price": "number, the latest offer price per share, $",
            "synergies": "number, the latest run-rate synergies, $m",
            "new_shares": "number, new acquirer shares issued, millions",
            "pro_forma_eps": "number, pro-forma EPS, $, 2 decimals",
            "accretion_pct": "number, accretion (dilution negative), %, 1 decimal",
        },
        criteria=[
            numeric("offer_price", offer.price, "Uses the latest offer price"),
            numeric("synergies", offer.synergies, "Uses the latest synergies"),
            numeric("new_shares", ad["new_shares"], "New shares at the latest price"),
            numeric("pro_forma_eps", ad["pf_eps"], "Pro-forma EPS", abs_tol=0.006),
            numeric("accretion_pct", ad["accretion"], "Accretion / dilution", abs_tol=0.06),
        ],
        gold={"offer_price": offer.price, "synergies": offer.synergies, **ad},
        oracle={"year": k + 1},
        signature=f"reaccretion:{k}",
    )


def t_merger(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    k = variant % 3
    ad = f.merger.run(f.offers[0].price, f.offers[0].synergies, f.shares, k)
    return TaskSpec(
        template="banking.merger_accretion",
        kind="fact",
        title=f"Merger model: year {k + 1} accretion / dilution",
        question=(
            f"What does the Project {f.code} merger model show for year {k + 1}: the offer price "
            "it runs at, the acquirer's standalone EPS, pro-forma EPS and accretion / (dilution)?"
        ),
        answer_keys={
            "offer_price": "number, the model's offer price per share, $",
            "standalone_eps": "number, standalone EPS, $, 2 decimals",
            "pro_forma_eps": "number, pro-forma EPS, $, 2 decimals",
            "accretion_pct": "number, accretion (dilution negative), %, 1 decimal",
        },
        criteria=[
            numeric("offer_price", f.offers[0].price, "Reads the model's offer price"),
            numeric("standalone_eps", ad["sa_eps"], "Standalone EPS", abs_tol=0.006),
            numeric("pro_forma_eps", ad["pf_eps"], "Pro-forma EPS", abs_tol=0.006),
            numeric("accretion_pct", ad["accretion"], "Accretion / dilution", abs_tol=0.06),
        ],
        gold={"offer_price": f.offers[0].price, **ad},
        oracle={"year": k + 1},
        signature=f"accretion:{k}",
    )


def t_range(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    method, low, high = _pick(f.methods, variant)
    top = max(f.methods, key=lambda m: m[2])[0]
    return TaskSpec(
        template="banking.valuation_range",
        kind="fact",
        title=f"Football field: {method}",
        question=(
            f"In the final board presentation for Project {f.code} (not the draft), what range "
            f"of value per share does the football field give for {method}, and what is its "
            "midpoint? Which methodology reaches the highest value per share?"
        ),
        answer_keys={
            "low": "number, low end, $ per share",
            "high": "number, high end, $ per share",
            "midpoint": "number, midpoint of the range, $ per share",
            "highest_method": "string, methodology with the highest high end",
        },
        criteria=[
            numeric("low", low, "Low end of the range"),
            numeric("high", high, "High end of the range"),
            numeric("midpoint", (low + high) / 2, "Midpoint"),
            text("highest_method", top, "Names the methodology with the highest value"),
        ],
        gold={"low": low, "high": high, "midpoint": (low + high) / 2, "highest_method": top},
        oracle={"method": method},
        signature=f"range:{method}",
    )


def t_segment(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    names = sorted(f.segments)
    seg = _pick(names, variant)
    j = 1 + (variant // len(names) + rng.randint(0, 1)) % 2
    year = HIST_YEARS[j]
    value = f.segments[seg][j]
    total = sum(v[j] for v in f.segments.values())
    share = value / total * 100
    growth = (value / f.segments[seg][j - 1] - 1) * 100
    starter = f.ctx.difficulty == "starter"
    criteria = [numeric("revenue", value, f"{seg} revenue in {year}"),
                numeric("share_pct", share, "Share of total revenue", abs_tol=0.06)]
    keys = {"revenue": f"number, {seg} revenue in {year}, $m",
            "share_pct": "number, its share of total revenue that year, %, 1 decimal"}
    if not starter:
        criteria.append(numeric("growth_pct", growth, "Growth on the prior year", abs_tol=0.06))
        keys["growth_pct"] = f"number, growth on {HIST_YEARS[j - 1]}, %, 1 decimal"
    return TaskSpec(
        template="banking.cim_segment",
        kind="fact",
        title=f"CIM: {seg} revenue in {year}",
        question=(
            f"According to the historical financials by segment in the Project {f.code} CIM"
            f"{_where(f, f.cim_file)}, what was {seg} revenue in {year}, and what share of total "
            "revenue was it" + ("?" if starter else f", and how much did it grow on {HIST_YEARS[j - 1]}?")
        ),
        answer_keys=keys,
        criteria=criteria,
        gold={"revenue": value, "share_pct": share, "growth_pct": growth},
        oracle={"segment": seg, "year": year},
        signature=f"segment:{seg}:{year}",
        pdf_probe=PdfProbe(f.cim_file, seg, value, "table"),
    )


def t_profile(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    keys = sorted(rng.sample(sorted(FIGURES), 3), key=list(FIGURES).index)
    first = keys[variant % 3]
    return TaskSpec(
        template="banking.cim_profile",
        kind="fact",
        title=f"{f.target} profile from the CIM",
        question=(
            f"From the business description in the Project {f.code} CIM, give "
            + "; ".join(f"the {FIGURES[k][1]}" for k in keys)
            + f" for {f.target}."
        ),
        answer_keys={k: f"number, the {FIGURES[k][1]}" for k in keys},
        criteria=[numeric(k, f.figures[k], f"States the {FIGURES[k][1]}") for k in keys],
        gold={k: f.figures[k] for k in keys},
        oracle={"keys": keys},
        signature=f"profile:{'+'.join(keys)}",
        pdf_probe=PdfProbe(f.cim_file, FIGURES[first][0], f.figures[first], "two_column"),
    )


def t_comps_output(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    tab = _pick(list(TABS), variant)
    exclude = f.outliers[tab] if variant % 4 < 2 else None
    peers = [p for p in f.comps[tab] if p.name != exclude]
    path = f"output/comps_{slug(tab).replace('-', '_')}.xlsx"
    med = _median(f, tab, exclude)
    med_rev = _median(f, tab, exclude, "ev_revenue")
    criteria = [file_exists(path, "Produces the comps workbook")]
    criteria += [
        xlsx_cell(path, "Comps", round(p.ev_ebitda, 2), f"EV/EBITDA of {p.name}",
                  row_label=p.name, column="EV/EBITDA")
        for p in rng.sample(peers, 3)
    ]
    criteria += [
        xlsx_cell(path, "Comps", med, "Median EV/EBITDA row", row_label="Median",
                  column="EV/EBITDA"),
        xlsx_cell(path, "Comps", med_rev, "Median EV/Revenue row", row_label="Median",
                  column="EV/Revenue"),
        numeric("peer_count", len(peers), "Counts the peers in the output"),
    ]
    left = f", leaving out {exclude}" if exclude else ", every peer on the tab"
    return TaskSpec(
        template="banking.comps_output",
        kind="deliverable",
        title=f"Comps output: {tab}",
        question=(
            f"Prepare a clean comps output for the {tab} tab of the latest trading comps "
            f"workbook{left}: each peer's EV/EBITDA and EV/Revenue computed from enterprise "
            "value, EBITDA and revenue, and the median of each multiple."
        ),
        answer_keys={"peer_count": "number of peers in the output"},
        deliverables={
            path: (
                'a workbook with a sheet named "Comps". Row 1 holds the headers "Company", '
                '"EV/EBITDA", "EV/Revenue"; one row per peer follows (company name in column A, '
                'multiples as numbers rounded to 2 decimals); then a row with "Median" in column '
                "A and the median of each multiple."
            )
        },
        criteria=criteria,
        gold={"peer_count": len(peers), "median_ev_ebitda": med, "median_ev_revenue": med_rev},
        oracle={"tab": tab, "exclude": exclude, "path": path},
        signature=f"comps_out:{tab}:{exclude}",
    )


def t_memo(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    kind = variant % 3
    path = "output/deal_update_memo.docx"
    offer = f.latest
    terms = _offer_terms(f, offer)
    if kind == 0:
        heading = f"Project {f.code}: revised offer terms"
        lines = [f"offer price per share: {offer.price:.2f}",
                 f"implied equity value ($m): {terms['equity_value']:.1f}",
                 f"premium to unaffected price: {terms['premium_pct']:.1f}%"]
        ask = "the latest offer price per share (2 decimals), the implied equity value (offer price times the diluted shares in the board presentation, $m, 1 decimal) and the premium to the unaffected share price (%, 1 decimal)"
        if _tie(terms["premium_pct"], 1):
            return None
    elif kind == 1:
        tab = _pick([g[3] for g in f.guidance], variant // 3)
        med = _median(f, tab, f.outliers[tab])
        heading = f"Project {f.code}: trading comparables"
        lines = [f"peer set: {tab}", f"excluded peer: {f.outliers[tab]}",
                 f"median EV/EBITDA: {med:.2f}x"]
        ask = (f"the peer tab to use for {f.guidance[[g[3] for g in f.guidance].index(tab)][2]} "
               "(from the team's email guidance), the outlier #deal-team flagged on that tab, "
               "and the median EV/EBITDA of the remaining peers in the latest comps (2 decimals)")
        if _tie(med, 2):
            return None
    else:
        heading = f"Project {f.code}: synergy case update"
        lines = [f"run-rate synergies in the board presentation ($m): {f.offers[0].synergies}",
                 f"latest run-rate synergies ($m): {offer.synergies}",
                 f"offer price per share: {offer.price:.2f}"]
        ask = ("the run-rate synergies shown in the board presentation, the latest run-rate "
               "synergies from the deal emails (both $m, whole numbers) and the latest offer "
               "price per share (2 decimals)")
    statements = "; ".join(f'"{line.split(":")[0]}: ..."' for line in lines)
    return TaskSpec(
        template="banking.deal_memo",
        kind="deliverable",
        title=heading,
        question=(
            f"{f.md.name} wants a one-page deal update memo for {f.cfo.name} ({f.cfo.title}) "
            f"covering {ask}."
        ),
        answer_keys={"offer_price": "number, the latest offer price per share, $"},
        deliverables={
            path: (
                f'a Word document whose first heading (style "Heading 1") reads "{heading}", '
                f"with one paragraph per statement, each written as label, colon, value: "
                f"{statements} (numbers without currency signs or thousands separators)."
            )
        },
        criteria=[
            file_exists(path, "Produces the memo"),
            docx_has(path, heading, "Has the required heading", style="Heading 1"),
            *[docx_has(path, line, f"States {line.split(':')[0]}") for line in lines],
            numeric("offer_price", offer.price, "Answers with the latest offer price"),
        ],
        gold={"offer_price": offer.price, "lines": lines},
        oracle={"heading": heading, "kind": kind, "purpose": lines[0] if kind == 1 else ""},
        signature=f"memo:{kind}:{lines[0]}",
    )


def t_named(f: BankFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    pairs = [("WACC", "TaxRate"), ("WACC", "TerminalGrowth"), ("TaxRate", "TerminalGrowth")]
    names = _pick(pairs, variant)
    value = {"WACC": f.model.wacc, "TaxRate": f.model.tax, "TerminalGrowth": f.model.tg}
    return TaskSpec(
        template="banking.starter_named_range",
        kind="fact",
        title=f"Named ranges {' and '.join(names)}",
        question=(
            f"Open `{f.model_file}`. What values do the named ranges {names[0]} and {names[1]} "
            "hold? Give them in percent (0.0875 is 8.75)."
        ),
        answer_keys={n.lower(): f"number, {n} in percent" for n in names},
        criteria=[numeric(n.lower(), value[n], f"Reads {n}", abs_tol=0.006) for n in names],
        gold={n.lower(): value[n] for n in names},
        oracle={"names": list(names)},
        signature=f"named:{'+'.join(names)}",
    )


TEMPLATES = [
    Template("banking.model_line_item", "fact", t_line_item, ("standard", "starter")),
    Template("banking.dcf_valuation", "compute", t_dcf),
    Template("banking.comps_stats", "compute", t_comps_stats, ("standard", "starter")),
    Template("banking.implied_value", "compute", t_implied),
    Template("banking.peer_guidance", "multi_hop", t_guidance),
    Template("banking.revised_offer", "reconcile", t_revised_offer, ("standard", "starter")),
    Template("banking.revised_accretion", "reconcile", t_revised_accretion),
    Template("banking.merger_accretion", "fact", t_merger),
    Template("banking.valuation_range", "fact", t_range),
    Template("banking.cim_segment", "fact", t_segment, ("standard", "starter")),
    Template("banking.cim_profile", "fact", t_profile),
    Template("banking.comps_output", "deliverable", t_comps_output),
    Template("banking.deal_memo", "deliverable", t_memo),
    Template("banking.starter_named_range", "fact", t_named, ("starter",)),
]
