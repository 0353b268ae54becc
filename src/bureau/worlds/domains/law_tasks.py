"""Corporate-law task templates: questions about a world, with criteria and oracle params."""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

from ..briefs import brief_templates
from ..fabric import long_date
from ..spec import (
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
    text,
    unsupported,
    xlsx_cell,
)
from .law_model import DEADLINES, REGISTER, Contract, LawFacts


def _executed(f: LawFacts) -> list[Contract]:
    return [c for c in f.contracts if c.executed_pdf]


def _pick(items: list[Any], variant: int) -> Any:
    return items[variant % len(items)] if items else None


def t_liability_cap(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    return _liability_cap(f, rng, _pick(_executed(f), variant))


def t_liability_cap_unsupported(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """The same request about a contract the register lists but nobody executed: no executed
    agreement is in the files, so there is no cap to give."""
    unsigned = [c for c in f.contracts if not c.executed_pdf]
    return _liability_cap(f, rng, _pick(unsigned, variant)) if unsigned else None


def _liability_cap(f: LawFacts, rng: random.Random, c: Contract) -> TaskSpec:
    starter = f.ctx.difficulty == "starter"
    where = f" (`{c.executed_pdf}`)" if starter else ""
    gc, company, party = f.gc, f.ctx.company, c.counterparty
    question = phrasing(
        rng,
        [
            f"{gc.name} ({gc.title}) needs two terms of the executed {c.kind} between "
            f"{company} and {party}{where}: the cap on each party's aggregate liability, and "
            "the law that governs the agreement. Drafts do not count.",
            f"What does the executed {c.kind} between {company} and {party}{where} say on "
            f"liability and governing law? {gc.name} ({gc.title}) needs the cap on each "
            "party's aggregate liability and the law that governs the agreement. Use the "
            "executed agreement only: drafts do not count.",
            f"{gc.name} ({gc.title}) is asking about the {c.kind} that {company} executed with "
            f"{party}{where}. Please find the cap on each party's aggregate liability and the "
            "law that governs the agreement. Only the executed version counts, not drafts.",
        ],
    )
    title = phrasing(
        rng,
        [
            f"Liability cap and governing law: {party}",
            f"{party} agreement: liability cap and governing law",
        ],
    )
    keys = {
        "liability_cap": "number, the aggregate liability cap in USD",
        "governing_law": 'string, the jurisdiction whose law governs (e.g. "New York")',
    }
    if not c.executed_pdf:
        return TaskSpec(
            template="law.liability_cap_unsupported",
            kind="fact",
            title=title,
            question=question,
            answer_keys=keys,
            criteria=[
                unsupported("liability_cap", "Gives no cap: no executed agreement exists"),
                mentions(
                    [[party], ["executed", "signed"]],
                    "Says that no executed agreement with the counterparty is in the files",
                ),
            ],
            gold={"liability_cap": None, "governing_law": None},
            oracle={"counterparty": c.counterparty},
            signature=f"cap:{c.cid}",
            evidence=[REGISTER],
            infeasible=True,
        )
    return TaskSpec(
        template="law.liability_cap",
        kind="fact",
        title=title,
        question=question,
        answer_keys=keys,
        criteria=[
            numeric("liability_cap", c.liability_cap, "States the executed liability cap"),
            text("governing_law", c.governing_law, "Names the governing law"),
        ],
        gold={"liability_cap": c.liability_cap, "governing_law": c.governing_law},
        oracle={"counterparty": c.counterparty},
        signature=f"cap:{c.cid}",
        pdf_probe=PdfProbe(
            c.executed_pdf, "Limitation of Liability", c.liability_cap, "two_column"
        ),
    )


def t_fee_schedule(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    c = _pick(_executed(f), variant + 1)
    (r1, rate1), (r2, rate2) = rng.sample(c.fees, 2)
    h1, h2 = rng.randint(2, 40) * 5, rng.randint(2, 40) * 5
    total = h1 * rate1 + h2 * rate2
    party = c.counterparty
    question = phrasing(
        rng,
        [
            f"Finance wants to check a work order under the executed {c.kind} with "
            f"{party}: {h1} hours of {r1} and {h2} hours of {r2}, billed at the hourly "
            "rates in the agreement's fee schedule. What is the hourly rate of each role, and "
            "what does the work order cost in total?",
            f"A work order under the executed {c.kind} with {party} covers {h1} hours of {r1} "
            f"and {h2} hours of {r2}, billed at the hourly rates in the agreement's fee "
            "schedule. Finance wants to check it: give the hourly rate of each role and the "
            "total cost of the work order.",
            f"Can you price a work order for Finance? It falls under the executed {c.kind} with "
            f"{party} and is for {h1} hours of {r1} plus {h2} hours of {r2}, billed at the "
            "hourly rates set out in the agreement's fee schedule. What is each role's hourly "
            "rate, and what is the total cost of the work order?",
        ],
    )
    title = phrasing(
        rng,
        [
            f"Cost of a work order under the {party} agreement",
            f"{party} fee schedule: pricing a work order",
        ],
    )
    return TaskSpec(
        template="law.fee_schedule",
        kind="compute",
        title=title,
        question=question,
        answer_keys={
            "rate_1": f"number, the hourly rate of {r1} in USD",
            "rate_2": f"number, the hourly rate of {r2} in USD",
            "total_cost": "number, the total cost of the work order in USD",
        },
        criteria=[
            numeric("rate_1", rate1, f"Hourly rate of {r1}"),
            numeric("rate_2", rate2, f"Hourly rate of {r2}"),
            numeric("total_cost", total, "Total cost of the work order"),
        ],
        gold={"rate_1": rate1, "rate_2": rate2, "total_cost": total},
        oracle={"counterparty": c.counterparty, "roles": [r1, r2], "hours": [h1, h2]},
        signature=f"fees:{c.cid}:{r1}:{r2}",
        pdf_probe=PdfProbe(c.executed_pdf, r1, rate1, "table"),
    )


def _deadline(c: Contract) -> date:
    return c.expiry - timedelta(days=c.current_notice_days)


def t_notice(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    c = _pick(_executed(f), variant)
    company, party = f.ctx.company, c.counterparty
    question = phrasing(
        rng,
        [
            f"{company} may let its {c.kind} with {party} end at its expiry date "
            "and terminate it for convenience. How many days of written notice does the "
            "agreement currently require, taking into account any amendment, and what is the "
            "latest date on which notice can be served so that it ends on its expiry date? "
            "Count the notice period back in calendar days from the expiry date.",
            f"{company} is considering terminating its {c.kind} with {party} for convenience, "
            "letting it end at its expiry date. Taking any amendment into account, how many "
            "days of written notice does the agreement require now, and by what date at the "
            "latest must notice be served for the agreement to end on its expiry date? Count "
            "the notice period back from the expiry date in calendar days.",
            f"If {company} terminates its {c.kind} with {party} for convenience so that it ends "
            "at its expiry date, what written notice period, in days, does the agreement "
            "currently require (after any amendment), and what is the last date on which "
            "notice can be served for it to end on its expiry date? The notice period counts "
            "back in calendar days from the expiry date.",
        ],
    )
    title = phrasing(
        rng,
        [
            f"Termination notice for the {party} agreement",
            f"{party} agreement: notice period and latest notice date",
        ],
    )
    return TaskSpec(
        template="law.notice_current",
        kind="reconcile",
        title=title,
        question=question,
        answer_keys={
            "notice_days": "number, the notice period currently in force, in days",
            "expiry_date": "date, the agreement's expiry date",
            "notice_deadline": "date, the latest date to serve notice",
        },
        criteria=[
            numeric("notice_days", c.current_notice_days, "Uses the notice period in force"),
            text("expiry_date", c.expiry.isoformat(), "States the expiry date"),
            text("notice_deadline", _deadline(c).isoformat(), "Computes the notice deadline"),
        ],
        gold={
            "notice_days": c.current_notice_days,
            "expiry_date": c.expiry.isoformat(),
            "notice_deadline": _deadline(c).isoformat(),
        },
        oracle={"counterparty": c.counterparty},
        signature=f"notice:{c.cid}",
    )


def t_termination_plan(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """Four files of four kinds: the register (id, value, expiry), the executed agreement
    (notice), the signed amendment's email (the notice in force) and the deadlines calendar
    (the serve day, moved since an older reminder gave it with the original notice)."""
    amended = [c for c in _executed(f) if c.amendment_mail and c.cid in f.serve_on]
    c = _pick(amended, variant)
    if c is None or c.amendment_mail is None:
        return None
    serve = f.serve_on[c.cid]
    end = min(serve + timedelta(days=c.current_notice_days), c.expiry)
    company, party, gc = f.ctx.company, c.counterparty, f.gc.name
    rules = (
        "Signed documents prevail over emails and chat, a signed amendment prevails over the "
        "agreement it amends, drafts do not count, and the legal deadlines calendar shows the "
        "current plan. The agreement ends when the notice period (calendar days counted from "
        "the day notice is served) runs out, or at its expiry date if that comes first."
    )
    question = phrasing(
        rng,
        [
            f"{gc} plans to serve notice terminating the {c.kind} between {company} and "
            f"{party} for convenience on the day the legal deadlines calendar gives for it. "
            "Work out the contract ID, the notice period in force, the day notice is served, "
            "the day the agreement then ends, and its annual value from the contract register. "
            + rules,
            f"{company} will terminate its {c.kind} with {party} for convenience, serving "
            "notice on the day the legal deadlines calendar now shows. For "
            f"{gc}: the contract ID, the notice period that applies, the serve date, the date "
            "the agreement ends as a result, and the annual value the contract register "
            "gives for it. " + rules,
            f"On the day the legal deadlines calendar sets for it, {gc} will serve notice to "
            f"terminate the {c.kind} with {party} for convenience. What are the contract ID, "
            "the notice period now in force, the serve date, the date the agreement ends, and "
            "the annual value in the contract register? " + rules,
        ],
    )
    title = phrasing(
        rng,
        [f"Termination plan: {party}", f"{party} agreement: when termination takes effect"],
    )
    gold = {
        "contract_id": c.cid,
        "notice_days": c.current_notice_days,
        "serve_date": serve.isoformat(),
        "end_date": end.isoformat(),
        "annual_value": c.annual_value,
    }
    return TaskSpec(
        template="law.termination_plan",
        kind="reconcile",
        title=title,
        question=question,
        answer_keys={
            "contract_id": 'string, the register\'s contract ID (e.g. "C-123")',
            "notice_days": "number, the notice period in force, in days",
            "serve_date": "date, the day notice is served",
            "end_date": "date, the day the agreement ends",
            "annual_value": "number, the annual value in USD",
        },
        criteria=[
            text("contract_id", c.cid, "Names the contract"),
            numeric("notice_days", c.current_notice_days, "Uses the amended notice period"),
            text("serve_date", gold["serve_date"], "Uses the calendar's current serve date"),
            text("end_date", gold["end_date"], "Computes the end date"),
            numeric("annual_value", c.annual_value, "States the register's annual value"),
        ],
        gold=gold,
        oracle={"counterparty": party},
        signature=f"termination:{c.cid}",
        evidence=[REGISTER, c.executed_pdf or "", c.amendment_mail, DEADLINES],
    )


PIPELINE = "output/renewal_pipeline.xlsx"


def t_renewal_pipeline(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """Two steps in one sandbox: a pipeline workbook from the register, then a sheet added to
    that same workbook, summing the pipeline by governing law (the second step reads the
    first step's deliverable, and a wrong pipeline carries into it)."""
    values = sorted((c.annual_value for c in f.contracts), reverse=True)
    cut = values[min(len(values) - 1, 2 + variant % 3)]
    chosen = sorted(
        (c for c in f.contracts if c.annual_value >= cut), key=lambda c: (-c.annual_value, c.cid)
    )
    if len(chosen) < 3 or len({c.annual_value for c in chosen}) < len(chosen):
        return None
    company, gc = f.ctx.company, f.gc.name
    total = sum(c.annual_value for c in chosen)
    by_law: dict[str, list[Contract]] = {}
    for c in chosen:
        by_law.setdefault(c.governing_law, []).append(c)
    sums = {law: sum(c.annual_value for c in cs) for law, cs in by_law.items()}
    largest = max(sums, key=lambda law: (sums[law], law))
    if sorted(sums.values())[-2:].count(sums[largest]) > 1:
        return None  # a tie: no single largest law
    first = phrasing(
        rng,
        [
            f"{gc} is planning the renewal round at {company}. Build the renewal pipeline: "
            f"every contract in the contract register with an annual value of at least USD "
            f"{cut:,}, largest first.",
            f"For the renewal round at {company}, {gc} wants a pipeline of every contract in "
            f"the contract register whose annual value is USD {cut:,} or more, sorted from the "
            "largest annual value down.",
        ],
    )
    second = phrasing(
        rng,
        [
            f"Now {gc} wants the pipeline you built in `{PIPELINE}` broken down by the law that "
            "governs each contract (as the contract register gives it). Add the breakdown to "
            "that workbook; keep its Pipeline sheet as it is.",
            f"Next, take the pipeline in your workbook `{PIPELINE}` and break it down by "
            f"governing law (from the contract register) for {gc}. Add the breakdown to the "
            "same workbook and leave its Pipeline sheet unchanged.",
        ],
    )
    schedule = TaskSpec(
        template="law.renewal_pipeline",
        kind="deliverable",
        title=f"Renewal pipeline over USD {cut:,}",
        question=first,
        answer_keys={
            "count": "number of contracts in the pipeline",
            "total_value": "number, their total annual value in USD",
        },
        deliverables={
            PIPELINE: 'a workbook with a sheet named "Pipeline". Row 1 holds the headers '
            '"Contract ID", "Counterparty", "Annual Value", "Expiry"; one row per contract '
            "follows, largest annual value first (Contract ID in column A, annual value in "
            "USD as a number, expiry as YYYY-MM-DD)."
        },
        criteria=[
            file_exists(PIPELINE, "Produces the pipeline workbook"),
            *(
                xlsx_cell(
                    PIPELINE,
                    "Pipeline",
                    c.annual_value,
                    f"Lists {c.cid}",
                    row_label=c.cid,
                    column="Annual Value",
                )
                for c in chosen[:3]
            ),
            numeric("count", len(chosen), "Counts the pipeline"),
            numeric("total_value", total, "Totals the pipeline"),
        ],
        gold={"count": len(chosen), "total_value": total},
        oracle={"min_value": cut},
        signature="",
        evidence=[REGISTER],
    )
    laws = sorted(sums, key=lambda law: (-sums[law], law))
    breakdown = TaskSpec(
        template="law.renewal_pipeline",
        kind="deliverable",
        title="Renewal pipeline by governing law",
        question=second,
        answer_keys={
            "largest_law": "string, the governing law with the largest total annual value",
            "largest_law_value": "number, that law's total annual value in USD",
        },
        deliverables={
            PIPELINE: 'the same workbook with a second sheet named "By Law". Row 1 holds the '
            'headers "Governing Law", "Contracts", "Total Value"; one row per governing law of '
            "the pipeline's contracts follows (the law in column A, the number of contracts "
            "and their total annual value in USD as numbers)."
        },
        criteria=[
            xlsx_cell(
                PIPELINE,
                "Pipeline",
                chosen[0].annual_value,
                "Keeps the Pipeline sheet",
                row_label=chosen[0].cid,
                column="Annual Value",
            ),
            *(
                xlsx_cell(
                    PIPELINE,
                    "By Law",
                    sums[law],
                    f"Totals the {law} contracts",
                    row_label=law,
                    column="Total Value",
                )
                for law in laws[:2]
            ),
            text("largest_law", largest, "Names the largest law"),
            numeric("largest_law_value", sums[largest], "States its total"),
        ],
        gold={"largest_law": largest, "largest_law_value": sums[largest]},
        oracle={},
        signature="",
        evidence=[REGISTER, PIPELINE],
    )
    return TaskSpec(
        template="law.renewal_pipeline",
        kind="deliverable",
        title=f"Renewal pipeline over USD {cut:,}, by governing law",
        question=first + "\n\n" + second,
        answer_keys={},
        criteria=[],
        gold={"pipeline": schedule.gold, "by_law": breakdown.gold},
        oracle={"min_value": cut},
        signature=f"pipeline:{cut}",
        deliverables={PIPELINE: "the renewal pipeline workbook"},
        evidence=[REGISTER],
        steps=[("pipeline", schedule), ("by_law", breakdown)],
    )


def t_register_total(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    law = _pick(sorted({c.governing_law for c in f.contracts}), variant)
    year = rng.choice(sorted({c.expiry.year for c in f.contracts}))
    chosen = [c for c in f.contracts if c.governing_law == law or c.expiry.year == year]
    total = sum(c.annual_value for c in chosen)
    question = phrasing(
        rng,
        [
            f"For a risk review, the CFO needs the contracts in the contract register that are "
            f"governed by {law} law or expire in {year} (or both). How many such contracts are "
            "there, and what is their combined annual value? List their contract ids.",
            f"The CFO is doing a risk review. Which contracts in the contract register are "
            f"governed by {law} law, expire in {year}, or both? Give their contract ids, how "
            "many of them there are, and their combined annual value.",
            f"Please pull every contract from the contract register that is governed by {law} "
            f"law or expires in {year} (a contract that meets both counts once). For a risk "
            "review, the CFO needs their number, their combined annual value and a list of "
            "their contract ids.",
        ],
    )
    title = phrasing(
        rng,
        [
            f"Contract value: {law} law or expiring in {year}",
            f"Risk review: contracts under {law} law or expiring in {year}",
        ],
    )
    return TaskSpec(
        template="law.register_total",
        kind="compute",
        title=title,
        question=question,
        answer_keys={
            "count": "number of contracts",
            "total_annual_value": "number, their combined annual value in USD",
            "contract_ids": "list of the contract ids",
        },
        criteria=[
            numeric("count", len(chosen), "Counts the matching contracts"),
            numeric("total_annual_value", total, "Sums their annual value"),
            entities("contract_ids", [c.cid for c in chosen], "Lists exactly the matching ids"),
        ],
        gold={"count": len(chosen), "total_annual_value": total},
        oracle={"law": law, "year": year},
        signature=f"register:{law}:{year}",
    )


def t_board_votes(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    meeting = _pick(f.meetings, variant)
    r = _pick(meeting.resolutions, variant // max(1, len(f.meetings)) + rng.randint(0, 3))
    where = f" (`{meeting.file}`)" if f.ctx.difficulty == "starter" else ""
    held = long_date(meeting.held)
    question = phrasing(
        rng,
        [
            f"At the board meeting of {held}{where}, resolution {r.number} "
            f'("{r.title}") was put to a vote. Which directors voted against it, who abstained, '
            "and did it pass? A resolution passes when more directors vote for it than against.",
            f'Resolution {r.number} ("{r.title}") was voted on at the board meeting of '
            f"{held}{where}. Who voted against it, which directors abstained, and was it "
            "passed? It passes if more directors voted for it than against it.",
            f'Please check the vote on resolution {r.number} ("{r.title}") at the board meeting '
            f"of {held}{where}: list the directors who voted against it and those who "
            "abstained, and say whether it passed. A resolution passes when more directors "
            "vote for it than against.",
        ],
    )
    title = phrasing(
        rng,
        [
            f"Board vote on resolution {r.number} ({held})",
            f"Resolution {r.number}: how the board voted on {held}",
        ],
    )
    return TaskSpec(
        template="law.board_votes",
        kind="fact",
        title=title,
        question=question,
        answer_keys={
            "voted_against": "list of director names",
            "abstained": "list of director names (empty if none)",
            "passed": 'string, "yes" or "no"',
        },
        criteria=[
            entities("voted_against", r.against, "Names exactly the directors against"),
            entities("abstained", r.abstain, "Names exactly the abstaining directors"),
            text("passed", "yes" if r.passed else "no", "Says whether it passed"),
        ],
        gold={"voted_against": r.against, "abstained": r.abstain, "passed": r.passed},
        oracle={"meeting_date": meeting.held.isoformat(), "resolution": r.number},
        signature=f"votes:{meeting.held}:{r.number}",
    )


def t_nda(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    if not f.flags:
        return None
    who, when, cid = _pick(f.flags, variant)
    contract = next(c for c in f.contracts if c.cid == cid)
    nda = next(n for n in f.ndas if n.counterparty == contract.counterparty)
    question = phrasing(
        rng,
        [
            f"On {long_date(when)}, {who} asked in the #legal-ops channel how long our "
            "confidentiality obligations last towards the counterparty of the contract that "
            "Finance flagged. Who is that counterparty, and on what date do the confidentiality "
            "obligations under our NDA with them end?",
            f"{who} asked in the #legal-ops channel on {long_date(when)} how long our "
            "confidentiality obligations last towards the counterparty of the contract Finance "
            "flagged. Identify that counterparty and give the date on which the confidentiality "
            "obligations under our NDA with them end.",
            f"Please answer the question {who} raised in the #legal-ops channel on "
            f"{long_date(when)}: how long do our confidentiality obligations last towards the "
            "counterparty of the contract that Finance flagged? Name that counterparty and the "
            "date on which the confidentiality obligations under our NDA with them end.",
        ],
    )
    title = phrasing(
        rng,
        [
            "Confidentiality obligations for a flagged contract",
            "NDA confidentiality end date for the flagged contract's counterparty",
        ],
    )
    return TaskSpec(
        template="law.nda_confidentiality",
        kind="multi_hop",
        title=title,
        question=question,
        answer_keys={
            "counterparty": "string, the counterparty's name",
            "confidentiality_end": "date the confidentiality obligations end",
        },
        criteria=[
            text("counterparty", contract.counterparty, "Identifies the counterparty"),
            text(
                "confidentiality_end",
                nda.confidentiality_end.isoformat(),
                "Computes the end of the confidentiality obligations",
            ),
        ],
        gold={
            "counterparty": contract.counterparty,
            "confidentiality_end": nda.confidentiality_end.isoformat(),
        },
        oracle={"person": who, "date": when.isoformat()},
        signature=f"nda:{cid}",
    )


def t_litigation(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    matter = _pick(f.matters, variant)
    total = sum(m.claimed for m in f.matters)
    gc, company = f.gc.name, f.ctx.company
    question = phrasing(
        rng,
        [
            f"For the board pack, {gc} needs the total amount claimed against "
            f"{company} across all matters in the litigation folder, and the date of the "
            f"next hearing in {matter.name}, as it stands after any rescheduling.",
            f"{gc} is putting together the board pack. What is the total amount claimed "
            f"against {company} across all matters in the litigation folder, and when is the "
            f"next hearing in {matter.name}, taking any rescheduling into account?",
            f"Across all matters in the litigation folder, how much is claimed against "
            f"{company} in total? And on what date is the next hearing in {matter.name}, as it "
            f"stands after any rescheduling? {gc} needs both for the board pack.",
        ],
    )
    title = phrasing(
        rng,
        ["Litigation exposure and next hearing", "Board pack: litigation claims and next hearing"],
    )
    return TaskSpec(
        template="law.litigation_exposure",
        kind="reconcile",
        title=title,
        question=question,
        answer_keys={
            "total_claimed": "number, total amount claimed in USD",
            "next_hearing": f"date of the next hearing in {matter.name}",
        },
        criteria=[
            numeric("total_claimed", total, "Sums the claims across all matters"),
            text("next_hearing", matter.next_hearing.isoformat(), "Uses the current hearing date"),
        ],
        gold={"total_claimed": total, "next_hearing": matter.next_hearing.isoformat()},
        oracle={"matter": matter.name},
        signature=f"litigation:{matter.name}",
    )


def t_expiring(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    expiries = sorted(c.expiry for c in f.contracts)
    lo = expiries[variant % 2]
    hi = expiries[min(len(expiries) - 1, variant % 2 + rng.randint(2, 4))]
    chosen = sorted((c for c in f.contracts if lo <= c.expiry <= hi), key=lambda c: c.expiry)
    path = "output/expiring_contracts.xlsx"
    total = sum(c.annual_value for c in chosen)
    criteria = [file_exists(path, "Produces the workbook")]
    criteria += [
        xlsx_cell(
            path,
            "Expiring",
            c.annual_value,
            f"Lists {c.cid} with its annual value",
            row_label=c.cid,
            column="Annual Value",
        )
        for c in chosen[:5]
    ]
    criteria.append(
        xlsx_cell(
            path,
            "Expiring",
            total,
            "Total row sums the annual values",
            row_label="Total",
            column="Annual Value",
        )
    )
    criteria.append(numeric("count", len(chosen), "Counts the expiring contracts"))
    start, end, company = lo.isoformat(), hi.isoformat(), f.ctx.company
    question = phrasing(
        rng,
        [
            f"Prepare a schedule of every contract in the {company} contract register that "
            f"expires between {start} and {end} inclusive, sorted by expiry date.",
            f"Using the {company} contract register, put together a schedule of all contracts "
            f"that expire from {start} to {end}, both dates inclusive, sorted by expiry date.",
            f"Which contracts in the {company} contract register expire between {start} and "
            f"{end} (inclusive)? Please list every one of them in a schedule sorted by expiry "
            "date.",
        ],
    )
    title = phrasing(
        rng,
        [
            f"Schedule of contracts expiring {start} to {end}",
            f"Contracts expiring between {start} and {end}",
        ],
    )
    return TaskSpec(
        template="law.expiring_schedule",
        kind="deliverable",
        title=title,
        question=question,
        answer_keys={"count": "number of contracts in the schedule"},
        deliverables={
            path: (
                'a workbook with a sheet named "Expiring". Row 1 holds the headers '
                '"Contract ID", "Counterparty", "Expiry", "Annual Value"; one row per contract '
                "follows (Contract ID in column A, annual value in USD as a number); the last "
                'row has "Total" in column A and the sum of the annual values under '
                '"Annual Value".'
            )
        },
        criteria=criteria,
        gold={"count": len(chosen), "total": total, "contract_ids": [c.cid for c in chosen]},
        oracle={"from": lo.isoformat(), "to": hi.isoformat()},
        signature=f"expiring:{lo}:{hi}",
    )


def t_memo(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    c = _pick(_executed(f), variant + 2)
    path = "output/termination_memo.docx"
    heading = f"Termination of the {c.kind} with {c.counterparty}"
    deadline = _deadline(c).isoformat()
    gc, party = f.gc.name, c.counterparty
    question = phrasing(
        rng,
        [
            f"{gc} wants a short internal memo on terminating the {c.kind} with "
            f"{party} at its expiry date. The memo must state the notice period in force "
            "(after any amendment) and the latest date to serve notice, counting the notice "
            "period back in calendar days from the expiry date.",
            f"Please draft a short internal memo for {gc} on terminating the {c.kind} with "
            f"{party} at its expiry date. It must state the notice period in force, after any "
            "amendment, and the latest date to serve notice, with the notice period counted "
            "back in calendar days from the expiry date.",
            f"{gc} has asked for a short internal memo: we want to terminate the {c.kind} with "
            f"{party} at its expiry date. The memo has to give the notice period in force "
            "(taking any amendment into account) and the latest date to serve notice; count "
            "the notice period back in calendar days from the expiry date.",
        ],
    )
    title = phrasing(
        rng, [f"Termination memo: {party}", f"Memo on terminating the {party} agreement"]
    )
    return TaskSpec(
        template="law.termination_memo",
        kind="deliverable",
        title=title,
        question=question,
        answer_keys={"notice_deadline": "date, the latest date to serve notice"},
        deliverables={
            path: (
                f'a Word document whose first heading (style "Heading 1") reads "{heading}", '
                'with a paragraph that says "notice period: N days" (N the number of days) and '
                'a paragraph that says "serve notice by: YYYY-MM-DD".'
            )
        },
        criteria=[
            file_exists(path, "Produces the memo"),
            docx_content(path, heading, "Has the required heading", style="Heading 1", first=True),
            docx_content(
                path,
                f"notice period: {c.current_notice_days} days",
                "States the notice period",
                label="notice period:",
            ),
            docx_content(
                path,
                f"serve notice by: {deadline}",
                "States the deadline",
                label="serve notice by:",
            ),
            text("notice_deadline", deadline, "Answers with the deadline"),
        ],
        gold={"notice_days": c.current_notice_days, "notice_deadline": deadline},
        oracle={"counterparty": c.counterparty, "heading": heading},
        signature=f"memo:{c.cid}",
        judged=[
            judge(
                path,
                "Does the memo concern terminating this agreement, and are the notice period "
                "and the latest date to serve notice it states the ones in the reference?",
                f"The {c.kind} with {c.counterparty}: notice period "
                f"{c.current_notice_days} days (after any amendment); serve notice by {deadline}.",
                "A reader of the memo gets the right notice period and deadline",
            )
        ],
    )


def t_starter_register(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    c = _pick(f.contracts, variant)
    question = phrasing(
        rng,
        [
            f"Look up contract {c.cid} in `{REGISTER}`. Who is the counterparty, and what is "
            "the contract's annual value?",
            f"Who is the counterparty to contract {c.cid} in `{REGISTER}`, and what is the "
            "contract's annual value?",
            f"In `{REGISTER}`, find contract {c.cid} and give its counterparty and its annual "
            "value.",
        ],
    )
    title = phrasing(
        rng, [f"Register lookup: {c.cid}", f"Contract {c.cid}: counterparty and annual value"]
    )
    return _register_row(c, "register_value", "fact", title, question)


def t_starter_executed(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    """Two tool calls at least: the instruction names a folder, not the contract. The agent
    lists `contracts/executed/` (a starter world files one signed contract there, named by its
    id), then looks that id up in the register: what it copies into the lookup comes from what
    it observed, not from the instruction."""
    executed = _executed(f)
    if len(executed) != 1 or f.ctx.difficulty != "starter":
        return None
    c = executed[0]
    folder, company = "contracts/executed/", f.ctx.company
    question = phrasing(
        rng,
        [
            f"One contract signed by {company} is filed in `{folder}`. Find which contract it "
            f"is, then look it up in `{REGISTER}`: who is the counterparty, and what is its "
            "annual value?",
            f"Which of {company}'s contracts is filed, signed, in `{folder}`? Look it up in "
            f"`{REGISTER}` and give its counterparty and its annual value.",
            f"The folder `{folder}` holds one contract {company} signed. Give that contract's "
            f"counterparty and annual value from `{REGISTER}`.",
        ],
    )
    title = phrasing(
        rng, [f"{company}: the signed contract", f"The contract {company} signed: its value"]
    )
    return _register_row(
        c, "executed_lookup", "multi_hop", title, question, [c.executed_pdf or "", REGISTER]
    )


def _register_row(
    c: Contract,
    name: str,
    kind: Kind,
    title: str,
    question: str,
    evidence: list[str] | None = None,
) -> TaskSpec:
    """A starter task answered by contract `c`'s row of the register: its counterparty and
    annual value."""
    return TaskSpec(
        template=f"law.starter_{name}",
        kind=kind,
        title=title,
        question=question,
        answer_keys={
            "counterparty": "string, the counterparty's name",
            "annual_value": "number, annual value in USD",
        },
        criteria=[
            text("counterparty", c.counterparty, "Names the counterparty"),
            numeric("annual_value", c.annual_value, "States the annual value"),
        ],
        gold={"counterparty": c.counterparty, "annual_value": c.annual_value},
        oracle={"cid": c.cid},
        signature=f"starter_{name.split('_')[0]}:{c.cid}",
        evidence=evidence or [],
    )


def t_starter_hearing(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    m = f.matters[0]
    question = phrasing(
        rng,
        [
            f"The case memo for {m.name} lists a hearing date, but read the email "
            f"`{f.hearing_mail}` too. On what date is the hearing now listed?",
            f"The case memo for {m.name} gives a hearing date, and there is also the email "
            f"`{f.hearing_mail}` to read. What date is the hearing listed for now?",
            f"When is the hearing in {m.name} now listed? The case memo gives a date, but take "
            f"the email `{f.hearing_mail}` into account too.",
        ],
    )
    title = phrasing(rng, [f"Hearing date: {m.name}", f"{m.name}: current hearing date"])
    return TaskSpec(
        template="law.starter_hearing_email",
        kind="reconcile",
        title=title,
        question=question,
        answer_keys={"next_hearing": "date of the hearing as now listed"},
        criteria=[text("next_hearing", m.next_hearing.isoformat(), "Uses the rescheduled date")],
        gold={"next_hearing": m.next_hearing.isoformat()},
        oracle={"matter": m.name},
        signature=f"starter_hearing:{m.name}",
    )


TEMPLATES = [
    Template("law.liability_cap", "fact", t_liability_cap, ("standard", "starter")),
    Template("law.liability_cap_unsupported", "fact", t_liability_cap_unsupported),
    Template("law.fee_schedule", "compute", t_fee_schedule),
    Template("law.notice_current", "reconcile", t_notice),
    Template("law.register_total", "compute", t_register_total),
    Template("law.board_votes", "fact", t_board_votes, ("standard", "starter")),
    Template("law.nda_confidentiality", "multi_hop", t_nda),
    Template("law.litigation_exposure", "reconcile", t_litigation, held_out=True),
    Template("law.expiring_schedule", "deliverable", t_expiring, held_out=True),
    Template("law.termination_memo", "deliverable", t_memo),
    Template("law.termination_plan", "reconcile", t_termination_plan),
    Template("law.renewal_pipeline", "deliverable", t_renewal_pipeline),
    Template("law.starter_register_value", "fact", t_starter_register, ("starter",)),
    Template("law.starter_hearing_email", "reconcile", t_starter_hearing, ("starter",)),
    Template("law.starter_executed_lookup", "multi_hop", t_starter_executed, ("starter",)),
]
TEMPLATES += brief_templates("law", TEMPLATES, lambda f: f.gc.name)
