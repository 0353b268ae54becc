"""Investment banking: a bank advises the world's company on an acquisition.

The deal team's drive holds the target's three-statement model (current v4 next to a superseded
v3), two dated trading-comps workbooks with two peer tabs each, a merger model with accretion /
dilution, the final board deck and an earlier draft (valuation table, football-field chart,
transaction overview), a CIM with a two-column business description and a ruled segment table,
a teaser, a term sheet and an IC memo. Mail carries peer-set guidance, a comps refresh and two
offer revisions that postdate the deck; #deal-team flags the outlier peer on each comps tab.

This module builds the world; `banking_files` holds the facts and document writers and
`banking_tasks` the task templates.
"""

from __future__ import annotations

import random
import statistics
from datetime import date
from typing import Any

from ..calendars import deadline_calendar
from ..fabric import (
    BANKS,
    LAST,
    Person,
    at,
    company_name,
    day,
    long_date,
    people,
    slug,
    split_part,
)
from ..render.calendar import Attendee
from ..render.messages import ChatMessage, Email
from ..spec import WorldContext
from . import banking_files as files
from .banking_files import (
    CODENAMES,
    METHODS,
    PEER_SUFFIX,
    PURPOSES,
    SEGMENTS,
    STATEMENTS,
    TABS,
    BankFacts,
    Merger,
    Model,
    Offer,
    Peer,
)
from .banking_tasks import TEMPLATES

__all__ = ["TEMPLATES", "BankFacts", "build"]


# -- world -----------------------------------------------------------------------------------
def build(ctx: WorldContext) -> BankFacts:
    rng = ctx.rng
    other = company_name(rng, ctx.split, "banking", {ctx.company})
    target, acquirer = (ctx.company, other) if rng.random() < 0.5 else (other, ctx.company)
    bank = rng.choice(BANKS)
    code = rng.choice(split_part(CODENAMES, ctx.split))
    bank_domain = slug(bank.split()[0]) + ".example.com"
    md, vp, assoc = people(
        rng, 3, ["Managing Director", "Vice President", "Associate"], bank_domain, ctx.split
    )
    cfo = people(rng, 1, ["CFO"], ctx.email_domain, ctx.split)[0]
    segments = _segments(rng, ctx.split)
    model, stale = _models(rng, segments, n_actual=rng.choice([1, 2]))
    base = day(date(2025, 9, 1), rng.randint(0, 20))
    old_comps, new_comps, outliers = _comps(rng, {target, acquirer}, ctx.split)
    core = [p.ev_ebitda for p in new_comps[TABS[0]] if p.name != outliers[TABS[0]]]
    equity = max(statistics.median(core) * model.value("ebitda", "FY2024A") - model.net_debt, 500)
    shares = round(round(equity / (rng.randint(60, 360) * 0.25) / 0.4) * 0.4, 1)
    unaffected = round(equity / shares * 4) / 4
    prices = [round(unaffected * (1 + rng.randint(18, 30) / 100) * 4) / 4]
    prices += [prices[0] + rng.randint(2, 8) * 0.25]
    prices += [prices[1] + rng.randint(1, 6) * 0.25]
    lc = code.lower()
    merger = Merger(
        acq_price=rng.randint(160, 600) * 0.25,
        acq_shares=rng.randint(300, 1500) * 0.5,
        stock_pct=rng.choice([30, 40, 50, 60, 70]),
        kd=rng.randint(20, 30) * 0.25,
        tax=rng.choice([21, 24, 25, 26]),
        acq_ni=[],
        tgt_ni=[model.value("net_income", y) for y in model.years if y.endswith("E")],
    )
    acq_ni0 = merger.acq_price * merger.acq_shares / rng.randint(12, 20)
    merger.acq_ni = [round(acq_ni0 * 1.05**k, 1) for k in range(3)]
    f = BankFacts(
        ctx=ctx,
        bank=bank,
        code=code,
        target=target,
        acquirer=acquirer,
        md=md,
        vp=vp,
        cfo=cfo,
        model=model,
        model_file=f"models/{slug(target)}_three_statement_model_v4.xlsx",
        comps=new_comps,
        comps_file=f"comps/trading_comps_{day(base, 24).isoformat()}.xlsx",
        outliers=outliers,
        merger=merger,
        unaffected=unaffected,
        shares=shares,
        offers=[Offer(day(base, 20), prices[0], rng.randint(8, 30) * 5)],
        deck_file=f"decks/project_{lc}_board_presentation.pptx",
        methods=_methods(rng, unaffected),
        cim_file=f"cim/project_{lc}_cim.pdf",
        segments=segments,
        figures=_figures(rng),
    )
    files.model_xlsx(ctx, f.model_file, model)
    files.comps_xlsx(ctx, f.comps_file, new_comps, day(base, 24))
    files.deck(ctx, f, f.deck_file, prices[0], f.methods, old_comps[TABS[0]], f.offers[0].since)
    files.cim(ctx, f)
    _revision(ctx, f, day(base, 30), prices[1], None)
    if ctx.difficulty == "starter":
        return f
    files.model_xlsx(ctx, f.model_file.replace("_v4.", "_v3."), stale)
    old_day = day(base, -1)
    files.comps_xlsx(ctx, f"comps/trading_comps_{old_day.isoformat()}.xlsx", old_comps, old_day)
    files.merger_xlsx(ctx, f"merger/project_{lc}_merger_model.xlsx", f)
    draft = f"decks/drafts/project_{lc}_board_presentation_DRAFT.pptx"
    draft_methods = [(m, lo - 0.75, hi + rng.randint(1, 4) * 0.5) for m, lo, hi in f.methods]
    draft_price = prices[0] - rng.randint(2, 6) * 0.25
    files.deck(ctx, f, draft, draft_price, draft_methods, old_comps[TABS[0]], day(base, 10))
    files.teaser(ctx, f)
    _mails(ctx, f, assoc, base, draft)
    later = f.offers[0].synergies + rng.choice([-1, 1]) * rng.randint(1, 5) * 5
    _revision(ctx, f, day(base, 30 + rng.randint(14, 20)), prices[2], later)
    _chat(ctx, f, assoc, base)
    _timetable(ctx, f, assoc, base)
    return f


def _segments(rng: random.Random, split: str) -> dict[str, list[float]]:
    """Segment revenue for FY2022-FY2024; the totals are the model's historical revenue."""
    out: dict[str, list[float]] = {}
    for name in sorted(rng.sample(split_part(SEGMENTS, split), rng.randint(3, 4))):
        start = rng.randint(1200, 9000) / 10
        out[name] = [round(start * (1 + rng.randint(-4, 14) / 100) ** k, 1) for k in range(3)]
    return out


def _models(
    rng: random.Random, segments: dict[str, list[float]], n_actual: int
) -> tuple[Model, Model]:
    """The current model and a superseded one with other projections and WACC."""
    totals = [round(sum(v[j] for v in segments.values()), 1) for j in range(3)]
    years = [f"FY{2025 - n_actual + i}{'A' if i < n_actual else 'E'}" for i in range(n_actual + 3)]
    d: dict[str, Any] = {
        "growth": [rng.randint(30, 120) / 1000 for _ in range(3)],
        "cogs": rng.randint(450, 600) / 1000,
        "opex": rng.randint(140, 220) / 1000,
        "da": rng.randint(30, 60) / 1000,
        "capex": rng.randint(35, 70) / 1000,
        "wc": rng.randint(8, 20) / 100,
        "wacc": rng.randint(150, 220) * 5 / 100,
        "tax": float(rng.choice([21, 24, 25, 26, 27])),
        "tg": rng.choice([2.0, 2.5, 3.0]),
        "kd": rng.randint(20, 32) * 25 / 100,
        "debt": round(totals[-1] * rng.randint(20, 60) / 100, 1),
        "cash": round(totals[-1] * rng.randint(5, 15) / 100, 1),
        "ppe": round(totals[-1] * rng.randint(25, 50) / 100, 1),
    }
    stale = dict(d, wacc=d["wacc"] + rng.choice([-1, 1]) * rng.randint(5, 15) * 5 / 100)
    stale["growth"] = [g + rng.choice([-1, 1]) * rng.randint(10, 30) / 1000 for g in d["growth"]]
    stale["cogs_proj"] = d["cogs"] + rng.randint(5, 25) / 1000
    return _run(years, totals, d), _run(years, totals, stale)


def _run(years: list[str], totals: list[float], d: dict[str, Any]) -> Model:
    n_act = sum(y.endswith("A") for y in years)
    prev = totals[2 - n_act]
    debt, cash, ppe = d["debt"], d["cash"], d["ppe"]
    v: dict[str, list[float]] = {key: [] for lines in STATEMENTS.values() for key, _, _ in lines}
    for i, y in enumerate(years):
        proj = y.endswith("E")
        rev = round(prev * (1 + d["growth"][i - n_act]), 1) if proj else totals[3 - n_act + i]
        cogs = round(rev * (d.get("cogs_proj", d["cogs"]) if proj else d["cogs"]), 1)
        opex, da = round(rev * d["opex"], 1), round(rev * d["da"], 1)
        interest = round(debt * d["kd"] / 100, 1)
        ebt = rev - cogs - opex - da - interest
        tax = ebt * d["tax"] / 100
        dwc, capex = -round((rev - prev) * d["wc"], 1), -round(rev * d["capex"], 1)
        fcf = ebt - tax + da + dwc + capex
        repay = -round(min(debt * 0.15, max(fcf, 0) * 0.5), 1)
        ppe = round(ppe - capex - da, 1)
        row = {
            "revenue": rev,
            "cogs": cogs,
            "gp": rev - cogs,
            "opex": opex,
            "ebitda": rev - cogs - opex,
            "da": da,
            "ebit": rev - cogs - opex - da,
            "interest": interest,
            "ebt": ebt,
            "tax": tax,
            "net_income": ebt - tax,
            "cf_ni": ebt - tax,
            "cf_da": da,
            "dwc": dwc,
            "cfo": ebt - tax + da + dwc,
            "capex": capex,
            "fcf": fcf,
            "repay": repay,
            "beg": cash,
            "end": cash + fcf + repay,
            "cash": cash + fcf + repay,
            "ar": round(rev * 0.16, 1),
            "inv": round(rev * 0.11, 1),
            "ppe": ppe,
            "ap": round(rev * 0.09, 1),
            "debt": round(debt + repay, 1),
        }
        row["ta"] = row["cash"] + row["ar"] + row["inv"] + ppe
        row["equity"] = row["ta"] - row["ap"] - row["debt"]
        row["tle"] = row["ta"]
        row["net_debt"] = row["debt"] - row["cash"]
        for key, value in row.items():
            v[key].append(round(value, 6))
        prev, debt, cash = rev, row["debt"], row["cash"]
    return Model(years, v, round(d["wacc"], 2), d["tax"], d["tg"], d["kd"])


def _comps(
    rng: random.Random, taken: set[str], split: str
) -> tuple[dict[str, list[Peer]], dict[str, list[Peer]], dict[str, str]]:
    """Peers (with the split's surnames) as of the first comps file and after the refresh (new
    prices), and each tab's outlier."""
    peers = {f"{last} {s}" for last in split_part(LAST, split) for s in PEER_SUFFIX}
    names = rng.sample(sorted(peers - taken), 13)
    old: dict[str, list[Peer]] = {tab: [] for tab in TABS}
    new: dict[str, list[Peer]] = {tab: [] for tab in TABS}
    outliers: dict[str, str] = {}
    for t, tab in enumerate(TABS):
        chosen = names[:6] if t == 0 else names[6 : 6 + rng.randint(6, 7)]
        odd = rng.randrange(len(chosen))
        outliers[tab] = chosen[odd]
        for i, name in enumerate(chosen):
            ebitda = rng.randint(1500, 25000) / 10
            mult = rng.randint(220, 340) / 10 if i == odd else rng.randint(650, 1450) / 100
            revenue = round(ebitda / (rng.randint(12, 35) / 100), 1)
            ev = round(ebitda * mult, 1)
            net_debt = round(ev * rng.randint(5, 35) / 100, 1)
            old[tab].append(Peer(name, ev, ebitda, revenue, net_debt))
            new_ev = round(ev * (1 + rng.randint(-80, 80) / 1000), 1)
            new[tab].append(Peer(name, new_ev, ebitda, revenue, net_debt))
    return old, new, outliers


def _methods(rng: random.Random, price: float) -> list[tuple[str, float, float]]:
    """Football-field ranges per share; one methodology alone reaches the highest value."""
    out = []
    for method in METHODS:
        low = round(price * rng.randint(80, 112) / 100 * 4) / 4
        out.append((method, low, low + rng.randint(8, 40) * 0.25))
    top = max(range(len(out)), key=lambda i: out[i][2])
    out[top] = (out[top][0], out[top][1], out[top][2] + 0.25)
    return out


def _figures(rng: random.Random) -> dict[str, float]:
    return {
        "employees": rng.randint(80, 900) * 10,
        "customers": rng.randint(150, 4200),
        "manufacturing_sites": rng.randint(4, 26),
        "countries": rng.randint(11, 64),
        "recurring_revenue_pct": rng.randint(350, 780) / 10,
    }


# -- mail and chat --------------------------------------------------------------------------
def _revision(ctx: WorldContext, f: BankFacts, when: date, price: float, syn: int | None) -> None:
    prev = f.latest
    body = (
        f"{f.cfo.first},\n\nFollowing the call with the {f.acquirer} board, the offer price "
        f"is now ${price:.2f} per share (previously ${prev.price:.2f}). "
    )
    if syn is None:
        body += f"The consideration mix and run-rate synergies of ${prev.synergies}m are unchanged."
    else:
        body += (
            f"Confirmatory diligence moved the synergy case: run-rate synergies are now ${syn}m."
        )
    rel = f"mail/inbox/{when.isoformat()}_project_{f.code.lower()}_offer_update.eml"
    ctx.email(
        rel,
        Email(
            sender=f.md.address,
            to=[f.cfo.address],
            cc=[f.vp.address],
            subject=f"Project {f.code}: revised offer",
            body=body + f"\n\nBest,\n{f.md.name}",
            sent=at(when, 18, ctx.rng.randint(0, 59)),
        ),
    )
    f.offers.append(Offer(when, price, prev.synergies if syn is None else syn, rel))


def _mails(ctx: WorldContext, f: BankFacts, assoc: Person, base: date, draft: str) -> None:
    rng, code = ctx.rng, f.code
    team = [f.md, f.vp, assoc]

    def mail(when: date, who: Person, subject: str, body: str, att: tuple[str, ...] = ()) -> None:
        rel = f"mail/inbox/{when.isoformat()}_{slug(subject)[:48]}.eml"
        ctx.email(
            rel,
            Email(
                sender=who.address,
                to=[p.address for p in team if p != who],
                subject=subject,
                body=body + f"\n\n{who.first}",
                sent=at(when, rng.randint(8, 16), rng.randint(0, 59)),
                attachments=[ctx.workspace / a for a in att],
            ),
        )

    mail(
        base,
        f.md,
        f"Project {code} kickoff",
        f"Team,\n\n{f.bank} is mandated on Project {code}: {f.acquirer}'s proposed acquisition "
        f"of {f.target}. The live model is v4 in models/. Board meeting planned for "
        f"{long_date(f.offers[0].since)}.",
    )
    mail(
        day(base, 10),
        assoc,
        f"Project {code} draft board deck",
        "Attached the first draft of the board deck for comments. Offer and ranges are "
        "placeholders until the model is locked.",
        (draft,),
    )
    tabs = list(TABS)
    rng.shuffle(tabs)
    for k, (who, purpose) in enumerate([(f.vp, PURPOSES[0]), (f.md, PURPOSES[1])]):
        when = day(base, 15 + k * 12)
        f.guidance.append((who, when, purpose, tabs[k]))
        mail(
            when,
            who,
            f"Project {code} comps guidance for {purpose}",
            f"Team,\n\nFor {purpose}, please use the {tabs[k]} tab of the latest trading comps "
            f"workbook when valuing {f.target}, and leave out the outlier flagged in #deal-team.",
        )
    mail(
        day(base, 24),
        assoc,
        f"Project {code} refreshed trading comps",
        "Attached the refreshed trading comps (prices as of today). Please use this version "
        "going forward; the earlier file is superseded.",
        (f.comps_file,),
    )
    term_sheet = f"legal/project_{code.lower()}_term_sheet.docx"
    files.term_sheet(ctx, f, term_sheet, f.latest.price)
    mail(
        day(f.latest.since, 3),
        f.vp,
        f"Project {code} term sheet",
        "Attached the indicative term sheet reflecting the revised offer.",
        (term_sheet,),
    )
    files.ic_memo(ctx, f, f"memos/project_{code.lower()}_ic_memo.docx")
    mail(
        day(base, rng.randint(3, 40)),
        assoc,
        "Printer booking for board books",
        f"The print shop needs {rng.randint(12, 30)} copies by Thursday at 10:00.",
    )


def _chat(ctx: WorldContext, f: BankFacts, assoc: Person, base: date) -> None:
    core, ext = TABS
    msgs = [
        ChatMessage(
            assoc.name,
            "Model v4 is live in models/; v3 is superseded, please don't pull numbers from it.",
            at(day(base, 1), 9, 12),
        ),
        ChatMessage(
            f.vp.name,
            f"On the {core} tab, leave out {f.outliers[core]}: it trades on "
            "takeover speculation, so its multiple is not meaningful.",
            at(day(base, 12), 11, 5),
        ),
        ChatMessage(f.md.name, "Agreed.", at(day(base, 12), 11, 40), 1),
        ChatMessage(
            assoc.name,
            f"On the {ext} tab, leave out {f.outliers[ext]}: one-off "
            "restructuring costs depress its EBITDA.",
            at(day(base, 13), 10, 2),
        ),
        ChatMessage(
            f.vp.name,
            "The draft deck in decks/drafts is stale; the final one is in decks/.",
            at(day(base, 21), 9, 30),
        ),
        ChatMessage(
            f.md.name,
            f"Board books: {ctx.rng.randint(12, 30)} copies, please.",
            at(day(base, 19), 16, 45),
        ),
    ]
    ctx.chat("chat/deal-team.json", "#deal-team", [f.md.name, f.vp.name, assoc.name], msgs)


def _timetable(ctx: WorldContext, f: BankFacts, assoc: Person, base: date) -> None:
    """The deal timetable calendar. The final bid deadline moved from before the first offer
    revision to between the first and the second, and an older reminder still gives the planned
    day with the board presentation's offer."""
    rng = ctx.rng
    planned = day(base, rng.randint(22, 28))
    now = day(f.offers[1].since, rng.randint(1, (f.offers[2].since - f.offers[1].since).days - 1))
    entries: list[tuple[str, date, bool | date]] = [
        (f"Project {f.code}: management presentation", day(base, rng.randint(3, 8)), False),
        (f"Project {f.code}: final bid deadline", planned, now),
        (f"Project {f.code}: confirmatory diligence ends", day(base, 55), rng.random() < 0.5),
        (f"Project {f.code}: target signing", day(base, 70), True),
    ]
    owner = Attendee(f.vp.name, f.vp.email)
    name = f"Project {f.code} timetable"
    plan = deadline_calendar(ctx, rng, files.timetable_file(f), name, owner, entries)
    f.bid_deadline = plan[entries[1][0]].current
    sent = day(planned, -rng.randint(6, 12))
    subject = f"Project {f.code}: final bids"
    ctx.email(
        f"mail/inbox/{sent.isoformat()}_project_{f.code.lower()}_final_bids.eml",
        Email(
            sender=assoc.address,
            to=[f.md.address, f.vp.address],
            subject=subject,
            body=(
                f"Final bids are due on {long_date(planned)}. At the board presentation's offer "
                f"of ${f.offers[0].price:.2f} per share the equity value is "
                f"${f.offers[0].price * f.shares:,.1f}m.\n\n{assoc.first}"
            ),
            sent=at(sent, 8, rng.randint(0, 59)),
        ),
    )
