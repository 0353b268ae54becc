"""Consulting worlds, part 3: task templates.

Each template turns the world's facts into a question whose answer the oracle
(`oracles/consulting.py`) finds in the files: facts read from decks, PDFs and notes,
computations over the survey, multi-hop requests that point to a slide or an interview,
reconciliations where later client mail overrides a document, and deliverables.
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from ..briefs import brief_templates
from ..fabric import long_date
from ..spec import (
    Difficulty,
    Kind,
    PdfProbe,
    TaskSpec,
    Template,
    docx_content,
    entities,
    file_exists,
    judge,
    mentions,
    numeric,
    phrasing,
    pptx_content,
    text,
    unsupported,
    xlsx_cell,
)
from .consulting_model import (
    DECK_V2,
    MILESTONE_CALENDAR,
    SOW,
    SURVEY,
    YEARS,
    ConsultingFacts,
    Milestone,
    Respondent,
)

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
    gold = {
        c["field"]: c.get("expected") for c in criteria if c["type"] != "mentions" and "field" in c
    }
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
    who, deck = f"{f.sponsor.name} ({f.sponsor.title})", _where(f, DECK_V2)
    return _spec(
        "deck_tam",
        "fact",
        phrasing(
            rng,
            [
                f"Market size of the {seg} segment in {year}",
                f"{seg} segment: {year} TAM and SAM",
            ],
        ),
        phrasing(
            rng,
            [
                f"{who} needs the {year} total addressable market (TAM) and serviceable "
                f"addressable market (SAM) of the {seg} segment, as shown in the latest version "
                f"of the market-sizing deck{deck}, and the SAM as a percentage of the TAM.",
                f"What are the {year} total addressable market (TAM) and serviceable addressable "
                f"market (SAM) of the {seg} segment in the latest version of the market-sizing "
                f"deck{deck}, and what is the SAM as a percentage of the TAM? {who} is asking.",
                f"{who} has asked how big the {seg} segment is in {year}: its total addressable "
                f"market (TAM) and serviceable addressable market (SAM), as shown in the latest "
                f"version of the market-sizing deck{deck}, plus the SAM expressed as a "
                "percentage of the TAM.",
            ],
        ),
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
    nth, first, client = ORDINAL[rank], YEARS[0], f.ctx.company
    return _spec(
        "regional_leader",
        "fact",
        phrasing(
            rng,
            [
                f"The {nth} region by share of TAM",
                f"Region with the {nth} share of the {first} TAM",
            ],
        ),
        phrasing(
            rng,
            [
                f"The latest market-sizing deck for {client} charts each region's share of the "
                f"{first} TAM. Which region has the {nth} share, what is that share, and by how "
                "many percentage points does it exceed the share of the next region down?",
                f"In the latest market-sizing deck for {client} there is a chart of each "
                f"region's share of the {first} TAM. Find the region with the {nth} share, and "
                "give that share and the number of percentage points by which it exceeds the "
                "share of the next region down.",
                f"Looking at each region's share of the {first} TAM as charted in the latest "
                f"market-sizing deck for {client}: which region holds the {nth} share, how "
                "large is that share, and how many percentage points above the share of the "
                "next region down is it?",
            ],
        ),
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
    region = None if variant < len(f.segments) else rng.choice(f.regions)
    rows = [r for r in f.survey if r.segment == seg and region in (None, r.region)]
    hits = sum(1 for r in rows if r.satisfaction >= threshold)
    scope = f"{seg} respondents" + (f" in {region}" if region else "")
    rated = "4 or 5" if threshold == 4 else "5"
    return _spec(
        "survey_satisfaction",
        "compute",
        phrasing(rng, [f"Satisfaction of {scope}", f"Survey satisfaction: {scope}"]),
        phrasing(
            rng,
            [
                f"Using the final customer survey results, how many {scope} are there, how many "
                f"of them gave a satisfaction score of {rated}, what share of them is that, and "
                "what is their average satisfaction score?",
                f"From the final customer survey results, count the {scope} and how many of them "
                f"gave a satisfaction score of {rated}. What share of them is that, and what is "
                "their average satisfaction score?",
                f"I need a satisfaction read-out on the {scope} in the final customer survey "
                f"results: how many of them there are, how many gave a satisfaction score of "
                f"{rated}, what share of them that is, and their average satisfaction score.",
            ],
        ),
        {
            "respondents": "number of respondents in scope",
            "satisfied": f"number of them scoring {rated}",
            "share_pct": "number, the share in percent, rounded to 1 decimal",
            "avg_satisfaction": "number, their average score, rounded to 2 decimals",
        },
        [
            numeric("respondents", len(rows), "Counts the respondents"),
            numeric("satisfied", hits, "Counts the satisfied respondents"),
            numeric(
                "share_pct", round(100 * hits / len(rows), 4), "Computes the share", abs_tol=0.06
            ),
            numeric(
                "avg_satisfaction",
                round(sum(r.satisfaction for r in rows) / len(rows), 6),
                "Averages the scores",
                rel_tol=0,
                abs_tol=0.006,
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
        ((_avg([r for r in rows if r.region == g]), g) for g in f.regions), reverse=True
    )
    if by_region[0][0] - by_region[1][0] < 1:
        return None
    return _spec(
        "survey_wtp",
        "compute",
        phrasing(
            rng,
            [
                f"Willingness to pay in the {seg} segment",
                f"{seg} segment: average willingness to pay by region",
            ],
        ),
        phrasing(
            rng,
            [
                f"From the final customer survey: what is the average willingness to pay of "
                f"{seg} respondents, which region's {seg} respondents have the highest average, "
                "and what is that average? Round averages to 2 decimals.",
                f"What is the average willingness to pay of {seg} respondents in the final "
                f"customer survey? Also, in which region do the {seg} respondents have the "
                "highest average, and what is that average? Round averages to 2 decimals.",
                f"Using the final customer survey, work out the average willingness to pay of "
                f"the {seg} respondents, then find the region whose {seg} respondents have the "
                "highest average and give that average too. Round the averages to 2 decimals.",
            ],
        ),
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
    sent = long_date(when)
    return _spec(
        "interviewee_budget",
        "multi_hop",
        phrasing(
            rng,
            [
                "Budget quoted in a customer interview",
                "Customer interview: interviewee, segment and quoted budget",
            ],
        ),
        phrasing(
            rng,
            [
                f"On {sent}, {sender} emailed the engagement team a question about one of the "
                "customer interviews. Answer it: who was the interviewee, which customer segment "
                "is their company in, what annual budget did they quote, and when was the "
                "interview held?",
                f"{sender} emailed the engagement team on {sent} with a question about one of the "
                "customer interviews. Please answer it by giving the interviewee's name, the "
                "customer segment their company is in, the annual budget they quoted and the "
                "date the interview was held.",
                f"There is an email from {sender} to the engagement team, sent on {sent}, asking "
                "about one of the customer interviews. Who was the interviewee, which customer "
                "segment is their company in, what annual budget did they quote, and on what "
                "date was the interview held?",
            ],
        ),
        {
            "interview_date": "date of the interview",
            "interviewee": "string, the person's full name",
            "segment": "string, the segment",
            "budget": "number, the quoted annual budget in USD",
        },
        [
            text("interviewee", iv.name, "Identifies the interviewee"),
            text("segment", iv.segment, "Names the segment"),
            numeric("budget", iv.budget, "States the quoted budget"),
            text("interview_date", iv.held.isoformat(), "Dates the interview"),
        ],
        {"sender": sender, "date": when.isoformat()},
        iv.name,
    )


def t_slide_request(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    if not f.requests:
        return None
    r = _pick(f.requests, variant)
    how = "by email" if r.channel == "email" else "in the #engagement chat channel"
    asked = long_date(r.when)
    return _spec(
        "slide_request",
        "multi_hop",
        phrasing(
            rng, [f"Figure requested by {r.who}", f"{r.who}'s request for a market-sizing figure"]
        ),
        phrasing(
            rng,
            [
                f"On {asked}, {r.who} asked {how} for a figure from a slide of the market-sizing "
                "deck. Which segment and which measure (TAM or SAM) is it, and what is the "
                "figure?",
                f"{r.who} asked {how} on {asked} for a figure from a slide of the market-sizing "
                "deck. Work out which segment and which measure (TAM or SAM) they meant, and "
                "give the figure.",
                f"Please answer the request {r.who} made {how} on {asked}: they want a figure "
                "from a slide of the market-sizing deck. Which segment and which measure (TAM or "
                "SAM) is it, and what is the figure?",
            ],
        ),
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
    first = YEARS[0]
    return _spec(
        "growth_revision",
        "reconcile",
        phrasing(
            rng,
            [
                f"Agreed growth and {year} TAM for {seg}",
                f"{seg}: agreed growth rate and implied {year} TAM",
            ],
        ),
        phrasing(
            rng,
            [
                f"The client has been revising the growth assumptions behind the market sizing. "
                f"What annual growth rate does the latest market-sizing deck show for the {seg} "
                f"segment, which rate is agreed now, and what {year} TAM does the agreed rate "
                f"imply when compounded annually from the deck's {first} TAM for {seg}?",
                f"The growth assumptions behind the market sizing have been revised by the "
                f"client. For the {seg} segment, give the annual growth rate shown in the latest "
                f"market-sizing deck, the rate agreed now, and the {year} TAM implied by "
                f"compounding the deck's {first} TAM for {seg} annually at the agreed rate.",
                f"Where do we stand on growth for the {seg} segment? The client has been "
                "revising the growth assumptions behind the market sizing. I need the annual "
                f"growth rate the latest market-sizing deck shows for {seg}, the rate that is "
                f"agreed now, and the {year} TAM the agreed rate implies, compounded annually "
                f"from the deck's {first} TAM for {seg}.",
            ],
        ),
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
        phrasing(
            rng,
            [
                f"Industry CAGR vs agreed growth: {seg}",
                f"{seg}: industry outlook CAGR against the agreed growth rate",
            ],
        ),
        phrasing(
            rng,
            [
                f"What CAGR does the published industry outlook report give for the {seg} "
                "segment, what annual growth rate is currently agreed with the client for that "
                "segment, and what is the difference (report minus agreed, in percentage "
                "points)?",
                f"Compare the published industry outlook report with what we have agreed with "
                f"the client for the {seg} segment: give the report's CAGR for the segment, the "
                "annual growth rate currently agreed with the client for it, and the difference "
                "in percentage points (report minus agreed).",
                f"For the {seg} segment, how does the CAGR in the published industry outlook "
                "report compare with the annual growth rate currently agreed with the client? "
                "Give both rates and the difference between them, report minus agreed, in "
                "percentage points.",
            ],
        ),
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
    return _sow(f, rng, m.name, m)


def t_sow_unsupported(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """The same request about the milestone only proposed by email: the signed statement of
    work sets no number, fee or due date for it (its total fees are still there)."""
    return _sow(f, rng, f.proposed, None) if f.proposed else None


def _sow(f: ConsultingFacts, rng: random.Random, name: str, m: Milestone | None) -> TaskSpec:
    sow = _where(f, SOW)
    total = sum(x.fee for x in f.milestones)
    keys = {
        "fee": "number, USD",
        "milestone_number": "number",
        "due_date": "date",
        "total_fees": "number, USD",
    }
    title = phrasing(rng, [f"SOW milestone: {name}", f"Statement of work milestone: {name}"])
    question = phrasing(
        rng,
        [
            f"According to the signed statement of work{sow}, what fee is set for the "
            f'milestone "{name}", what is its milestone number, when is it due, and what '
            "are the total fees in the SOW?",
            f'In the signed statement of work{sow}, look up the milestone "{name}": what '
            "is its milestone number, what fee is set for it, and when is it due? Also give "
            "the total fees in the SOW.",
            f'For the milestone "{name}" in the signed statement of work{sow}, what are '
            "its milestone number, its fee and its due date, and what do the fees in the SOW "
            "come to in total?",
        ],
    )
    if m is None:
        return _spec(
            "sow_milestone_unsupported",
            "fact",
            title,
            question,
            keys,
            [
                unsupported("fee", "Gives no fee: the SOW sets none"),
                unsupported("milestone_number", "Gives no milestone number"),
                unsupported("due_date", "Gives no due date"),
                numeric("total_fees", total, "States the total fees"),
                mentions([[name]], "Says the SOW does not hold the milestone"),
            ],
            {"milestone": name},
            name,
            evidence=[SOW],
            infeasible=True,
        )
    return _spec(
        "sow_milestone",
        "fact",
        title,
        question,
        keys,
        [
            numeric("milestone_number", m.number, "Reads the milestone number"),
            numeric("fee", m.fee, "Reads the milestone fee"),
            text("due_date", m.due.isoformat(), "Reads the due date"),
            numeric("total_fees", total, "States the total fees"),
        ],
        {"milestone": m.name},
        m.name,
        pdf_probe=PdfProbe(SOW, m.name, m.fee, "table"),
    )


BILLING = "output/billing_plan.xlsx"


def t_billing_plan(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """Two steps in one sandbox: the fees in force in a workbook, then an invoice schedule
    added to that workbook for the milestones it lists (the second step reads the first
    step's sheet; the acceptance days come from the engagement calendar)."""
    asked = [m for m in f.milestones if m.change_request and m.accepted_on]
    if variant > 0 or len(asked) < 2 or any(m.accepted_on is None for m in f.milestones):
        return None
    client, cfo, firm = f.ctx.company, f"{f.cfo.name} ({f.cfo.title})", f.firm
    last = max(f.milestones, key=lambda m: (m.accepted_on, m.number))
    assert last.accepted_on is not None
    rules = (
        "Fees are those of the signed statement of work, changed only by change requests the "
        "client sponsor approved in writing; drafts, notes and chat do not count."
    )
    first = phrasing(
        rng,
        [
            f"{cfo} at {client} wants a billing plan for the engagement with {firm}. Start with "
            "the fee of every milestone as it stands now. " + rules,
            f"For {cfo} at {client}: begin a billing plan for the {firm} engagement with each "
            "milestone's fee in force today. " + rules,
        ],
    )
    second = phrasing(
        rng,
        [
            f"Now add the invoice schedule to the billing plan in `{BILLING}`: for each "
            "milestone of its Fees sheet, the day it is invoiced (the day its acceptance "
            "meeting now takes place in the engagement milestones calendar) and the day "
            "payment falls due under the statement of work. Keep the Fees sheet as it is.",
            f"Next, extend your billing plan `{BILLING}` with the invoice schedule: every "
            "milestone of the Fees sheet is invoiced on the day of its acceptance meeting as "
            "the engagement milestones calendar now shows it, and payment is due as the "
            "statement of work says. Leave the Fees sheet unchanged.",
        ],
    )
    approved = [m for m in asked if m.revised_fee is not None]
    rejected = [m for m in asked if m.revised_fee is None]
    checked = [*approved[:1], *rejected[:1]] or asked[:2]
    fees = _spec(
        "billing_plan",
        "deliverable",
        "Billing plan: fees in force",
        first,
        {
            "total_fees": "number, USD, all milestones at the fees in force",
            "approved_change_requests": 'list of change request ids, e.g. ["CR-01"]',
        },
        [
            file_exists(BILLING, "Produces the billing plan"),
            *(
                xlsx_cell(
                    BILLING,
                    "Fees",
                    m.current_fee,
                    f"States the fee in force for {m.name}",
                    row_label=m.name,
                    column="Fee",
                )
                for m in checked
            ),
            numeric("total_fees", sum(m.current_fee for m in f.milestones), "Totals the fees"),
            entities("approved_change_requests", f.approved_crs, "Lists the approved requests"),
        ],
        {},
        "",
        deliverables={
            BILLING: 'a workbook with a sheet named "Fees". Row 1 holds the headers "Milestone", '
            '"No.", "Fee"; one row per milestone follows (its name in column A, the fee in USD '
            "as a number)."
        },
        evidence=[SOW, *(m.cr_file for m in checked), *(m.decision_mail for m in checked)],
    )
    due = last.accepted_on + timedelta(days=30)
    invoices = _spec(
        "billing_plan",
        "deliverable",
        "Billing plan: invoice schedule",
        second,
        {
            "last_invoice_date": "date, the last invoice of the plan",
            "last_payment_due": "date, when that invoice must be paid",
        },
        [
            xlsx_cell(
                BILLING,
                "Fees",
                checked[0].current_fee,
                "Keeps the Fees sheet",
                row_label=checked[0].name,
                column="Fee",
            ),
            *(
                xlsx_cell(
                    BILLING,
                    "Invoices",
                    m.accepted_on.isoformat(),
                    f"Invoices {m.name} on its acceptance day",
                    row_label=m.name,
                    column="Invoice Date",
                )
                for m in checked
                if m.accepted_on is not None
            ),
            text("last_invoice_date", last.accepted_on.isoformat(), "Finds the last invoice"),
            text("last_payment_due", due.isoformat(), "Applies the payment terms"),
        ],
        {},
        "",
        deliverables={
            BILLING: 'the same workbook with a second sheet named "Invoices". Row 1 holds the '
            'headers "Milestone", "Invoice Date", "Payment Due"; one row per milestone of the '
            "Fees sheet follows (its name in column A, dates as YYYY-MM-DD)."
        },
        evidence=[BILLING, MILESTONE_CALENDAR, SOW],
    )
    return _spec(
        "billing_plan",
        "deliverable",
        "Billing plan: fees in force, then the invoice schedule",
        first + "\n\n" + second,
        {},
        [],
        {},
        "plan",
        deliverables={BILLING: "the billing plan workbook"},
        evidence=[SOW, MILESTONE_CALENDAR],
        steps=[("fees", fees), ("invoices", invoices)],
    )


def t_fee_change(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    if not f.approved_crs:
        return None
    order = sorted(f.milestones, key=lambda m: (m.revised_fee is None, m.number))
    m = _pick(order, variant)
    return _spec(
        "fee_change",
        "reconcile",
        phrasing(rng, [f"Current fee for {m.name}", f"Fee for {m.name} after change requests"]),
        phrasing(
            rng,
            [
                f"What fee did the signed statement of work set for the milestone "
                f'"{m.name}", what is its fee now, taking change requests into account, what do '
                "all milestones now cost in total, and which change requests did the client "
                "approve?",
                f'The signed statement of work set a fee for the milestone "{m.name}". What was '
                "that fee, what is the fee now once change requests are taken into account, "
                "what do all milestones now cost in total, and which change requests did the "
                "client approve?",
                "Taking change requests into account, where do the fees stand? For the milestone "
                f'"{m.name}", give the fee the signed statement of work set and its fee now; '
                "also give what all milestones now cost in total, and list the change requests "
                "the client approved.",
            ],
        ),
        {
            "original_fee": "number, USD, as signed",
            "fee": "number, USD",
            "total_fees": "number, USD",
            "approved_change_requests": 'list of change request ids, e.g. ["CR-01"]',
        },
        [
            numeric("original_fee", m.fee, "Reads the signed fee"),
            numeric("fee", m.current_fee, "Uses the approved fee"),
            numeric("total_fees", sum(x.current_fee for x in f.milestones), "Totals current fees"),
            entities("approved_change_requests", f.approved_crs, "Lists the approved requests"),
        ],
        {"milestone": m.name},
        m.name,
    )


def t_milestone_invoice(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """Four files of four kinds: the signed statement of work (fee, payment terms), the change
    request (the proposed fee), the sponsor's decision email (whether it applies) and the
    engagement calendar (the acceptance day, moved since a note gave it with the signed fee)."""
    asked = [m for m in f.milestones if m.change_request and m.accepted_on]
    m = _pick(asked, variant)
    if m is None or m.accepted_on is None:
        return None
    applied = m.change_request if m.revised_fee is not None else "none"
    due = m.accepted_on + timedelta(days=30)
    rules = (
        "The signed statement of work sets fees and payment terms; a change request changes a "
        "fee only once the client sponsor has approved it in writing; drafts, notes and chat "
        "do not count; the engagement milestones calendar shows when each acceptance meeting "
        "now takes place, and a milestone is invoiced on the day it is accepted."
    )
    name, client = m.name, f.ctx.company
    return _spec(
        "milestone_invoice",
        "reconcile",
        phrasing(rng, [f"Invoice for {name}", f"Billing {name}: amount and dates"]),
        phrasing(
            rng,
            [
                f"{f.cfo.name} ({f.cfo.title}) at {client} wants to know what {f.firm} will "
                f'invoice for the milestone "{name}": the amount, the change request (if '
                "any) behind it, the invoice date and the date payment falls due. " + rules,
                f'For the milestone "{name}", how much will {f.firm} invoice {client}, which '
                "change request (if any) set that amount, on what day is the invoice issued and "
                f"when is payment due? {f.cfo.name} ({f.cfo.title}) needs it for the cash "
                "plan. " + rules,
                f"{f.cfo.name} ({f.cfo.title}) is planning cash: what will the invoice for "
                f'"{name}" from {f.firm} say (amount, and the approved change request it '
                "reflects, if any), on which day is it issued, and by which day must it be "
                "paid? " + rules,
            ],
        ),
        {
            "invoice_amount": "number, USD",
            "change_request": "string, the approved change request id that set the fee (e.g. "
            '"CR-01"), or "none"',
            "invoice_date": "date",
            "payment_due": "date",
        },
        [
            numeric("invoice_amount", m.current_fee, "Invoices the fee in force"),
            text("change_request", applied, "Applies only an approved change request"),
            text("invoice_date", m.accepted_on.isoformat(), "Uses the current acceptance day"),
            text("payment_due", due.isoformat(), "Applies the payment terms"),
        ],
        {"milestone": name},
        name,
        evidence=[SOW, m.cr_file, m.decision_mail, MILESTONE_CALENDAR],
    )


FEE_MEMO = "output/fee_update_memo.docx"


def t_fee_memo(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """A client-facing memo in prose: each change request's outcome (approved or not, the fee
    of its milestone now), then the facts a rubric can check (total, approved ids). With
    `--judge-criteria`, a judge reads the prose against the reference."""
    asked = [m for m in f.milestones if m.change_request]
    if not asked or not f.approved_crs:
        return None
    total = sum(m.current_fee for m in f.milestones)
    approved = ", ".join(sorted(f.approved_crs))
    heading = f"Fee update for {f.ctx.company}"
    cfo = f"{f.cfo.name} ({f.cfo.title})"
    question = phrasing(
        rng,
        [
            f"Draft a short memo from {f.firm} to {cfo} at {f.ctx.company} on where the "
            "engagement's fees stand: for each change request, say whether the client sponsor "
            "approved it and what its milestone's fee is now, then give the total of all "
            "milestone fees in force and the approved change requests. Only a change request "
            "the sponsor approved in writing changes a fee.",
            f"{cfo} at {f.ctx.company} has asked {f.firm} for a short memo on the fees: explain "
            "each change request's outcome (approved by the client sponsor or not, and the fee "
            "of its milestone now), and state what all milestones now cost in total and which "
            "change requests were approved. A fee changes only once the sponsor approves the "
            "change request in writing.",
        ],
    )
    reference = "; ".join(
        f"{m.change_request} ({m.name}): "
        + (
            f"approved, fee now USD {m.current_fee:,}"
            if m.revised_fee is not None
            else f"not approved, fee stays USD {m.fee:,}"
        )
        for m in asked
    )
    return _spec(
        "fee_update_memo",
        "deliverable",
        phrasing(rng, [f"Fee update memo for {f.ctx.company}", "Memo: where the fees stand"]),
        question,
        {
            "total_fees": "number, USD, all milestones at the fees in force",
            "approved_change_requests": 'list of change request ids, e.g. ["CR-01"]',
        },
        [
            file_exists(FEE_MEMO, "Produces the memo"),
            docx_content(
                FEE_MEMO, heading, "Has the required heading", style="Heading 1", first=True
            ),
            docx_content(
                FEE_MEMO, f"total fees: USD {total:,}", "States the total", label="total fees:"
            ),
            docx_content(
                FEE_MEMO,
                f"approved change requests: {approved}",
                "States the approved requests",
                label="approved change requests:",
            ),
            numeric("total_fees", total, "Answers with the total"),
            entities("approved_change_requests", f.approved_crs, "Answers with the approved ids"),
        ],
        {"heading": heading},
        "memo",
        deliverables={
            FEE_MEMO: f'a Word document whose first heading (style "Heading 1") reads "{heading}", '
            "with a paragraph per change request in prose, a paragraph that says "
            '"total fees: USD N" (N in whole dollars with thousands separators, e.g. USD '
            '1,250,000) and a paragraph that says "approved change requests: " followed by '
            "their ids in order, comma-separated (e.g. CR-01, CR-03)."
        },
        evidence=[SOW, *(m.cr_file for m in asked), *(m.decision_mail for m in asked)],
        judged=[
            judge(
                FEE_MEMO,
                "Does the memo give, for every change request, the outcome and the milestone's "
                "fee now that the reference gives, without presenting a request the sponsor did "
                "not approve as changing a fee?",
                reference,
                "A reader learns each change request's outcome and the fees in force",
            )
        ],
    )


def t_interview_budgets(f: ConsultingFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    seg = _pick(f.segments, variant)
    ivs = [iv for iv in f.interviewees if iv.segment == seg]
    if not ivs:
        return None
    return _spec(
        "interview_budgets",
        "compute",
        phrasing(
            rng,
            [
                f"Interview budgets in the {seg} segment",
                f"{seg} segment: budgets quoted in customer interviews",
            ],
        ),
        phrasing(
            rng,
            [
                f"Across all customer interview notes, which interviewees work at companies in "
                f"the {seg} segment, what is the sum of the annual budgets they quoted, and what "
                "is the largest single budget among them?",
                f"Go through all the customer interview notes and find the interviewees who work "
                f"at companies in the {seg} segment. Who are they, what do the annual budgets "
                "they quoted sum to, and what is the largest single budget among them?",
                f"Which interviewees, across all customer interview notes, work at companies in "
                f"the {seg} segment? Give their names, the sum of the annual budgets they quoted "
                "and the largest single budget any of them quoted.",
            ],
        ),
        {
            "interviewees": "list of full names",
            "total_budget": "number, USD",
            "largest_budget": "number, USD",
        },
        [
            entities("interviewees", [iv.name for iv in ivs], "Lists the interviewees"),
            numeric("total_budget", sum(iv.budget for iv in ivs), "Sums their budgets"),
            numeric("largest_budget", max(iv.budget for iv in ivs), "Finds the largest budget"),
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
    partner = f.partner.name
    return _spec(
        "segment_deck",
        "deliverable",
        phrasing(
            rng,
            [
                f"Slide: TAM and SAM by segment, {year}",
                f"One-slide summary of {year} TAM and SAM by segment",
            ],
        ),
        phrasing(
            rng,
            [
                f"{partner} wants a one-slide summary of the {year} market size by segment, "
                "using the figures in the latest market-sizing deck.",
                f"Please build {partner} a one-slide summary of the {year} market size by "
                "segment, taking the figures from the latest market-sizing deck.",
                f"Using the figures in the latest market-sizing deck, put together a one-slide "
                f"summary of the {year} market size by segment; {partner} asked for it.",
            ],
        ),
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
    region = _pick(f.regions, variant)
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
        phrasing(
            rng, [f"Survey averages for {region}", f"{region}: customer survey averages by segment"]
        ),
        phrasing(
            rng,
            [
                f"Build a workbook of customer survey averages per segment for respondents in "
                f"{region}, from the final survey results.",
                f"From the final survey results, prepare a workbook with the customer survey "
                f"averages per segment for respondents in {region}.",
                f"Could you put the customer survey averages per segment for respondents in "
                f"{region} into a workbook? Use the final survey results.",
            ],
        ),
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
    client = f.ctx.company
    return _spec(
        "starter_named_range",
        "fact",
        phrasing(rng, [f"Named range {name}", f"Survey workbook: named range {name}"]),
        phrasing(
            rng,
            [
                f"The survey workbook `{SURVEY}` of the {client} engagement defines the named "
                f"range `{name}`. What value does it hold, and on which sheet is it?",
                f"For the {client} engagement: in the survey workbook `{SURVEY}`, what value "
                f"does the named range `{name}` hold, and which sheet is it on?",
                f"Find the named range `{name}` in the survey workbook `{SURVEY}` of the "
                f"{client} engagement and give the value it holds and the sheet it is on.",
            ],
        ),
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
    mail = f.revision_mails[0]
    # The client is named: the mail's path is a date, and dates are not split.
    client = f.ctx.company
    return _spec(
        "starter_growth_email",
        "reconcile",
        phrasing(rng, ["Revised growth assumption", "Client email revising a growth assumption"]),
        phrasing(
            rng,
            [
                f"Read {client}'s email `{mail}`. Which segment's growth assumption does it "
                f"revise, what rate does {client} want now, and what rate did the deck use?",
                f"{client}'s email `{mail}` revises a growth assumption. Which segment's is "
                "it, what rate does the client want now, and what rate did the deck use?",
                f"Which segment's growth assumption does {client}'s email `{mail}` revise? "
                "Give the rate the client wants now and the rate the deck used.",
            ],
        ),
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
        phrasing(rng, [f"Interview with {iv.name}", f"{iv.name}: quoted budget and company"]),
        phrasing(
            rng,
            [
                f"In `{iv.file}`, what annual budget did {iv.name} quote, and which company do "
                "they work for?",
                f"Which company does {iv.name} work for, and what annual budget did they quote "
                f"in `{iv.file}`?",
                f"Read `{iv.file}` and give the annual budget {iv.name} quoted and the company "
                "they work for.",
            ],
        ),
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
    Template("consulting.sow_milestone_unsupported", "fact", t_sow_unsupported),
    Template("consulting.fee_change", "reconcile", t_fee_change, held_out=True),
    Template("consulting.fee_update_memo", "deliverable", t_fee_memo, held_out=True),
    Template("consulting.milestone_invoice", "reconcile", t_milestone_invoice),
    Template("consulting.billing_plan", "deliverable", t_billing_plan),
    Template("consulting.interview_budgets", "compute", t_interview_budgets, held_out=True),
    Template("consulting.segment_deck", "deliverable", t_deck_pptx),
    Template("consulting.survey_averages", "deliverable", t_survey_xlsx, held_out=True),
    Template("consulting.starter_named_range", "fact", t_starter_named, ("starter",)),
    Template("consulting.starter_growth_email", "reconcile", t_starter_revision, ("starter",)),
    Template("consulting.starter_interview", "fact", t_starter_interview, ("starter",)),
]
TEMPLATES += brief_templates("consulting", TEMPLATES, lambda f: f.partner.name)
