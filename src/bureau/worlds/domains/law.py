"""Corporate law: a legal department and its outside counsel.

Files: executed commercial contracts as two-column PDFs with a ruled fee schedule, DRAFT
versions with stale terms, a contract register workbook, NDAs and litigation memos (docx), board
minutes (docx and PDF), mail with letter amendments and rescheduled hearings, and a #legal-ops
chat channel where contracts get flagged by id.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from ..fabric import CITIES, LAST, LAW_FIRMS, Person, at, day, long_date, money, people, slug
from ..render.documents import DocSpec
from ..render.messages import ChatMessage, Email
from ..render.sheets import Formula, WorkbookSpec
from ..spec import (
    PdfProbe,
    TaskSpec,
    Template,
    WorldContext,
    docx_content,
    entities,
    file_exists,
    numeric,
    text,
    xlsx_cell,
)

KINDS = {
    "Master Services Agreement": "msa",
    "Supply Agreement": "supply",
    "Software License Agreement": "license",
    "Distribution Agreement": "distribution",
}
LAWS = ("Delaware", "New York", "California", "England and Wales", "Ontario")
ROLES = (
    "Project Manager",
    "Solution Architect",
    "Senior Engineer",
    "Engineer",
    "Data Analyst",
    "Support Specialist",
    "Trainer",
)
CP_SUFFIX = ("Systems", "Partners", "Supply Co", "Analytics", "Logistics", "Labs", "Components")
RESOLUTIONS = (
    "Approval of the annual budget",
    "Appointment of the external auditor",
    "Renewal of the revolving credit facility",
    "Adoption of the revised code of conduct",
    "Approval of the share buyback programme",
    "Acquisition of a minority stake in a supplier",
    "Opening of a subsidiary in {city}",
    "Executive bonus pool for the year",
)
REGISTER = "contracts/contract_register.xlsx"


@dataclass
class Contract:
    cid: str
    counterparty: str
    kind: str
    effective: date
    expiry: date
    annual_value: int
    governing_law: str
    notice_days: int
    liability_cap: int
    payment_days: int
    fees: list[tuple[str, int]]
    executed_pdf: str | None = None
    amended_notice_days: int | None = None

    @property
    def current_notice_days(self) -> int:
        return self.amended_notice_days or self.notice_days


@dataclass
class Nda:
    counterparty: str
    effective: date
    survival_years: int
    file: str

    @property
    def confidentiality_end(self) -> date:
        return self.effective.replace(year=self.effective.year + self.survival_years)


@dataclass
class Resolution:
    number: int
    title: str
    votes_for: list[str]
    against: list[str]
    abstain: list[str]

    @property
    def passed(self) -> bool:
        return len(self.votes_for) > len(self.against)


@dataclass
class Meeting:
    held: date
    file: str
    resolutions: list[Resolution]


@dataclass
class Matter:
    name: str
    court: str
    claimed: int
    hearing: date
    file: str
    rescheduled: date | None = None

    @property
    def next_hearing(self) -> date:
        return self.rescheduled or self.hearing


@dataclass
class LawFacts:
    ctx: WorldContext
    gc: Person
    partner: Person
    team: list[Person]
    directors: list[str]
    contracts: list[Contract]
    ndas: list[Nda] = field(default_factory=list)
    meetings: list[Meeting] = field(default_factory=list)
    matters: list[Matter] = field(default_factory=list)
    flags: list[tuple[str, date, str]] = field(default_factory=list)  # person, day, contract id
    hearing_mail: str = ""


# -- world -----------------------------------------------------------------------------------
def build(ctx: WorldContext) -> LawFacts:
    rng = ctx.rng
    starter = ctx.difficulty == "starter"
    firm = rng.choice(LAW_FIRMS)
    staff = people(
        rng, 12, ["General Counsel", "Senior Counsel", "Paralegal", "CFO"], ctx.email_domain
    )
    outside = people(rng, 2, ["Partner", "Associate"], slug(firm.split()[0]) + ".example.com")
    facts = LawFacts(
        ctx=ctx,
        gc=staff[0],
        partner=outside[0],
        team=staff[1:4],
        directors=[p.name for p in staff[4:11]],
        contracts=_contracts(rng, 4 if starter else rng.randint(6, 8)),
    )
    executed = facts.contracts[:1] if starter else facts.contracts[: rng.randint(4, 5)]
    for c in executed:
        c.executed_pdf = f"contracts/executed/{c.cid}_{slug(c.counterparty)}_{KINDS[c.kind]}.pdf"
        _contract_pdf(ctx, c, facts, c.executed_pdf)
    _register(ctx, facts.contracts)
    _minutes(ctx, facts, 1 if starter else 2)
    if starter:
        _matters(ctx, facts, 1)
        return facts
    for c in executed[2:4]:  # drafts with stale terms next to two executed contracts
        draft = Contract(**{**c.__dict__})
        draft.liability_cap = c.liability_cap + rng.choice([-1, 1]) * rng.randint(2, 8) * 50_000
        draft.notice_days = c.notice_days + 30
        _contract_pdf(
            ctx, draft, facts, f"contracts/drafts/{c.cid}_{slug(c.counterparty)}_draft_v2.pdf"
        )
    for c in executed[:2]:
        _amendment_mail(ctx, facts, c)
    for c in facts.contracts[1:4]:
        _nda(ctx, facts, c)
    _matters(ctx, facts, rng.randint(2, 3))
    _chat(ctx, facts)
    return facts


def _contracts(rng: random.Random, n: int) -> list[Contract]:
    names = rng.sample([f"{last} {suf}" for last in LAST for suf in CP_SUFFIX], n)
    out = []
    number = 100
    for name in names:
        number += rng.randint(1, 4)
        effective = date(2022 + rng.randint(0, 2), rng.randint(1, 12), rng.randint(1, 28))
        months = rng.choice([24, 36, 48, 60])
        expiry = effective.replace(
            year=effective.year + (effective.month - 1 + months) // 12,
            month=(effective.month - 1 + months) % 12 + 1,
        ) - timedelta(days=1)
        out.append(
            Contract(
                cid=f"C-{number}",
                counterparty=name,
                kind=rng.choice(list(KINDS)),
                effective=effective,
                expiry=expiry,
                annual_value=rng.randint(12, 480) * 5_000,
                governing_law=rng.choice(LAWS),
                notice_days=rng.choice([30, 45, 60, 90]),
                liability_cap=rng.randint(4, 60) * 50_000,
                payment_days=rng.choice([30, 45, 60]),
                fees=[(r, rng.randint(12, 60) * 5) for r in rng.sample(ROLES, rng.randint(4, 6))],
            )
        )
    return out


def _law_phrase(law: str) -> str:
    if law == "England and Wales":
        return f"the laws of {law}"
    if law == "Ontario":
        return f"the laws of the Province of {law}"
    return f"the laws of the State of {law}"


def _contract_pdf(ctx: WorldContext, c: Contract, facts: LawFacts, rel: str) -> None:
    draft = "/drafts/" in "/" + rel
    doc = ctx.pdf(
        rel,
        f"{c.kind}{' (DRAFT v2)' if draft else ''}",
        footer=f"{c.cid} | {ctx.company} / {c.counterparty}",
        watermark="DRAFT" if draft else "",
    )
    doc.para(
        f'This {c.kind} (the "Agreement") is entered into as of {long_date(c.effective)} between '
        f'{ctx.company} ("Customer") and {c.counterparty} ("Supplier"). Contract reference {c.cid}.'
    )
    clauses = [
        "1. Definitions|Capitalised terms have the meanings given in this clause. "
        '"Services" means the services described in each statement of work.',
        f"2. Term|This Agreement starts on the date above and ends on {long_date(c.expiry)} "
        "unless terminated earlier under clause 4.",
        f"3. Fees and Payment|Customer pays the fees in Schedule A. Invoices are payable within "
        f"{c.payment_days} days of receipt. Late amounts accrue interest at 1.5% per month.",
        f"4. Termination|Either party may terminate this Agreement for convenience by giving not "
        f"less than {c.notice_days} days' written notice to the other party. Either party may "
        "terminate at once for a material breach not cured within 30 days.",
        "5. Confidentiality|Each party keeps the other party's confidential information secret "
        "and uses it only to perform this Agreement.",
        "6. Limitation of Liability|Except for breach of confidentiality or fraud, the aggregate "
        f"liability of each party under this Agreement shall not exceed {money(c.liability_cap)}.",
        "7. Insurance|Supplier maintains professional indemnity insurance of at least "
        f"{money(c.liability_cap * 2)} for the term.",
        f"8. Governing Law|This Agreement is governed by {_law_phrase(c.governing_law)}.",
        "9. Notices|Notices are given in writing to the addresses on the signature page and are "
        "effective on receipt.",
        "10. Miscellaneous|This Agreement is the entire agreement between the parties about its "
        "subject matter. Amendments must be in writing and signed by both parties.",
    ]
    doc.two_columns(clauses)
    doc.heading("Schedule A - Fee Schedule")
    doc.table(
        ["Role", "Hourly rate (USD)", "Annual cap (hours)"],
        [[role, f"{rate:,}", f"{(i + 2) * 120:,}"] for i, (role, rate) in enumerate(c.fees)],
    )
    signer = facts.gc.name if not draft else "[signature]"
    doc.kv([("For Customer", signer), ("For Supplier", "Authorised signatory")])
    doc.save()


def _register(ctx: WorldContext, contracts: list[Contract]) -> None:
    wb = WorkbookSpec(title="Contract register")
    sheet = wb.sheet("Register")
    sheet.append(
        [
            "Contract ID",
            "Counterparty",
            "Type",
            "Effective",
            "Expiry",
            "Annual Value (USD)",
            "Governing Law",
        ]
    )
    for c in contracts:
        sheet.append(
            [
                c.cid,
                c.counterparty,
                c.kind,
                c.effective.isoformat(),
                c.expiry.isoformat(),
                c.annual_value,
                c.governing_law,
            ]
        )
    n = len(contracts) + 1
    sheet.number_formats = {6: "#,##0"}
    sheet.col_widths = {1: 12, 2: 24, 3: 28, 4: 12, 5: 12, 6: 18, 7: 18}
    summary = wb.sheet("Summary")
    summary.append(["Measure", "Value"])
    summary.append(["Contracts", Formula(f"=COUNTA(Register!A2:A{n})", len(contracts))])
    total = sum(c.annual_value for c in contracts)
    summary.append(["Total annual value (USD)", Formula(f"=SUM(Register!F2:F{n})", total)])
    wb.names["TotalAnnualValue"] = "Summary!$B$3"
    ctx.xlsx(REGISTER, wb)


def _nda(ctx: WorldContext, facts: LawFacts, c: Contract) -> None:
    rng = ctx.rng
    nda = Nda(
        counterparty=c.counterparty,
        effective=date(c.effective.year - 1, rng.randint(1, 12), rng.randint(1, 28)),
        survival_years=rng.randint(2, 7),
        file=f"legal/ndas/nda_{slug(c.counterparty)}.docx",
    )
    spec = DocSpec("Mutual Non-Disclosure Agreement")
    spec.p(
        f"This Mutual Non-Disclosure Agreement is made on {long_date(nda.effective)} (the "
        f'"Effective Date") between {ctx.company} and {c.counterparty}.'
    )
    spec.h1("1. Purpose")
    spec.p(f"The parties wish to evaluate a possible {c.kind.lower()} (the Purpose).")
    spec.h1("2. Confidential Information")
    spec.p("Confidential Information means any information disclosed for the Purpose.")
    spec.h1("3. Duration")
    spec.p(
        "This Agreement may be terminated by either party on 30 days' notice. The obligations of "
        "confidentiality under clause 2 continue until the "
        f"{_ordinal(nda.survival_years)} anniversary of the Effective Date."
    )
    spec.h1("4. Governing Law")
    spec.p(f"This Agreement is governed by {_law_phrase(c.governing_law)}.")
    ctx.docx(nda.file, spec)
    facts.ndas.append(nda)


def _ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth"}.get(
        n, f"{n}th"
    )


def _minutes(ctx: WorldContext, facts: LawFacts, n: int) -> None:
    rng = ctx.rng
    titles = rng.sample(RESOLUTIONS, n * 4)
    for m in range(n):
        held = date(2025, 2 + m * 5, rng.randint(3, 26))
        present = sorted(rng.sample(facts.directors, rng.randint(5, len(facts.directors))))
        resolutions = []
        for k in range(rng.randint(3, 4)):
            voters = list(present)
            rng.shuffle(voters)
            n_against = rng.choice([0, 1, 1, 2, 3]) if k else rng.choice([1, 2])
            n_abstain = rng.choice([0, 0, 1])
            against = sorted(voters[:n_against])
            abstain = sorted(voters[n_against : n_against + n_abstain])
            votes_for = sorted(voters[n_against + n_abstain :])
            title = titles[m * 4 + k].format(city=rng.choice(CITIES))
            resolutions.append(Resolution(k + 1, title, votes_for, against, abstain))
        ext = "docx" if m == 0 else "pdf"
        meeting = Meeting(held, f"board/minutes_{held.isoformat()}.{ext}", resolutions)
        _write_minutes(ctx, meeting, present)
        facts.meetings.append(meeting)


def _write_minutes(ctx: WorldContext, meeting: Meeting, present: list[str]) -> None:
    title = f"Minutes of the Board of Directors of {ctx.company} - {long_date(meeting.held)}"
    lines: list[tuple[str, str]] = []
    for r in meeting.resolutions:
        lines.append(("h", f"Resolution {r.number}: {r.title}"))
        lines.append(("p", f"Votes for: {', '.join(r.votes_for) or 'none'}."))
        lines.append(("p", f"Votes against: {', '.join(r.against) or 'none'}."))
        lines.append(("p", f"Abstained: {', '.join(r.abstain) or 'none'}."))
    if meeting.file.endswith(".docx"):
        spec = DocSpec(title)
        spec.p(f"Present: {', '.join(present)}.")
        for kind, line in lines:
            spec.h2(line) if kind == "h" else spec.p(line)
        ctx.docx(meeting.file, spec)
    else:
        doc = ctx.pdf(meeting.file, title, footer=f"{ctx.company} board minutes")
        doc.para(f"Present: {', '.join(present)}.")
        for kind, line in lines:
            doc.heading(line, level=2) if kind == "h" else doc.para(line)
        doc.save()


def _amendment_mail(ctx: WorldContext, facts: LawFacts, c: Contract) -> None:
    rng = ctx.rng
    c.amended_notice_days = c.notice_days + rng.choice([15, 30, 60])
    signed = c.effective + timedelta(days=rng.randint(120, 400))
    counsel = f"{rng.choice(LAST)} Counsel <legal@{slug(c.counterparty)}.example.com>"
    letter = f"contracts/amendments/{c.cid}_letter_amendment.pdf"
    doc = ctx.pdf(letter, f"Letter Amendment No. 1 to {c.kind} {c.cid}")
    doc.para(
        f"{ctx.company} and {c.counterparty} agree, with effect from {long_date(signed)}, that in "
        f'clause 4 (Termination) the words "{c.notice_days} days" are replaced by '
        f'"{c.amended_notice_days} days". All other terms of the Agreement remain in force.'
    )
    doc.kv([("For Customer", facts.gc.name), ("For Supplier", "Authorised signatory")])
    doc.save()
    ctx.email(
        f"mail/inbox/{signed.isoformat()}_{c.cid}_amendment.eml",
        Email(
            sender=counsel,
            to=[facts.gc.address],
            cc=[facts.team[0].address],
            subject=f"{c.cid} - letter amendment signed (termination notice)",
            body=(
                f"Dear {facts.gc.first},\n\nI confirm that {ctx.company} and {c.counterparty} "
                f"signed the letter amendment to the {c.kind} ({c.cid}) on {long_date(signed)}. "
                f"From that date the notice period for termination for convenience in clause 4 "
                f"changes from {c.notice_days} days to {c.amended_notice_days} days. All other "
                "terms are unchanged.\n\nKind regards,\nLegal department"
            ),
            sent=at(signed, 16, rng.randint(0, 59)),
            attachments=[ctx.workspace / letter],
        ),
    )


def _matters(ctx: WorldContext, facts: LawFacts, n: int) -> None:
    rng = ctx.rng
    claimants = rng.sample([f"{last} {s}" for last in LAST for s in ("Inc.", "Ltd", "LLC")], n)
    for claimant in claimants:
        matter = Matter(
            name=f"{claimant} v. {ctx.company}",
            court=f"{rng.choice(['Superior Court', 'District Court', 'High Court'])}, "
            f"{rng.choice(CITIES)}",
            claimed=rng.randint(20, 900) * 10_000,
            hearing=date(2026, rng.randint(1, 6), rng.randint(1, 28)),
            file=f"litigation/{slug(claimant)}_case_memo.docx",
        )
        spec = DocSpec(f"Case memo: {matter.name}")
        spec.table(
            ["Field", "Detail"],
            [
                ["Court", matter.court],
                ["Amount claimed", money(matter.claimed)],
                ["Reserve recommended", money(matter.claimed * rng.randint(2, 6) // 10)],
                ["Next hearing", matter.hearing.isoformat()],
                ["Responsible partner", facts.partner.name],
            ],
        )
        spec.h1("Assessment")
        spec.p(
            f"The claimant alleges breach of contract and seeks {money(matter.claimed)} in "
            "damages. Our view is that the claim is defensible on the merits."
        )
        ctx.docx(matter.file, spec)
        facts.matters.append(matter)
    moved = facts.matters[0]
    moved.rescheduled = moved.hearing + timedelta(days=rng.randint(14, 60))
    sent = moved.hearing - timedelta(days=rng.randint(5, 20))
    facts.hearing_mail = f"mail/inbox/{sent.isoformat()}_hearing_rescheduled.eml"
    ctx.email(
        facts.hearing_mail,
        Email(
            sender=facts.partner.address,
            to=[facts.gc.address],
            subject=f"{moved.name}: hearing moved",
            body=(
                f"Dear {facts.gc.first},\n\nThe court has vacated the hearing in {moved.name} "
                f"set for {long_date(moved.hearing)}. The hearing is now listed for "
                f"{long_date(moved.rescheduled)}. Nothing else changes.\n\n{facts.partner.name}"
            ),
            sent=at(sent, 11, rng.randint(0, 59)),
        ),
    )


def _chat(ctx: WorldContext, facts: LawFacts) -> None:
    rng = ctx.rng
    members = [p.name for p in [facts.gc, *facts.team]]
    msgs: list[ChatMessage] = []
    start = date(2025, 9, 1)
    for k, nda in enumerate(facts.ndas):
        cid = next(c.cid for c in facts.contracts if c.counterparty == nda.counterparty)
        who = facts.team[k % len(facts.team)].name
        when = day(start, k * rng.randint(3, 9) + 1)
        facts.flags.append((who, when, cid))
        msgs.append(
            ChatMessage(
                who,
                f"Finance flagged {cid} for the renewal review. Before we talk to them, can "
                "someone check how long our confidentiality obligations under the NDA with that "
                "counterparty last?",
                at(when, 10 + k),
            )
        )
        msgs.append(
            ChatMessage(facts.gc.name, "On it after lunch.", at(when, 12 + k), len(msgs) - 1)
        )
    msgs.append(ChatMessage(facts.team[0].name, "Register updated for Q3.", at(start, 9)))
    ctx.chat("chat/legal-ops.json", "#legal-ops", members, msgs)


# -- templates ----------------------------------------------------------------------------------
def _executed(f: LawFacts) -> list[Contract]:
    return [c for c in f.contracts if c.executed_pdf]


def _pick(items: list[Any], variant: int) -> Any:
    return items[variant % len(items)] if items else None


def t_liability_cap(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    c = _pick(_executed(f), variant)
    starter = f.ctx.difficulty == "starter"
    where = f" (`{c.executed_pdf}`)" if starter else ""
    return TaskSpec(
        template="law.liability_cap",
        kind="fact",
        title=f"Liability cap and governing law: {c.counterparty}",
        question=(
            f"{f.gc.name} ({f.gc.title}) needs two terms of the executed {c.kind} between "
            f"{f.ctx.company} and {c.counterparty}{where}: the cap on each party's aggregate "
            "liability, and the law that governs the agreement. Drafts do not count."
        ),
        answer_keys={
            "liability_cap": "number, the aggregate liability cap in USD",
            "governing_law": 'string, the jurisdiction whose law governs (e.g. "New York")',
        },
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
    return TaskSpec(
        template="law.fee_schedule",
        kind="compute",
        title=f"Cost of a work order under the {c.counterparty} agreement",
        question=(
            f"Finance wants to check a work order under the executed {c.kind} with "
            f"{c.counterparty}: {h1} hours of {r1} and {h2} hours of {r2}, billed at the hourly "
            "rates in the agreement's fee schedule. What is the hourly rate of each role, and "
            "what does the work order cost in total?"
        ),
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
    return TaskSpec(
        template="law.notice_current",
        kind="reconcile",
        title=f"Termination notice for the {c.counterparty} agreement",
        question=(
            f"{f.ctx.company} may let its {c.kind} with {c.counterparty} end at its expiry date "
            "and terminate it for convenience. How many days of written notice does the "
            "agreement currently require, taking into account any amendment, and what is the "
            "latest date on which notice can be served so that it ends on its expiry date? "
            "Count the notice period back in calendar days from the expiry date."
        ),
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


def t_register_total(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    law = _pick(sorted({c.governing_law for c in f.contracts}), variant)
    year = rng.choice(sorted({c.expiry.year for c in f.contracts}))
    chosen = [c for c in f.contracts if c.governing_law == law or c.expiry.year == year]
    total = sum(c.annual_value for c in chosen)
    return TaskSpec(
        template="law.register_total",
        kind="compute",
        title=f"Contract value: {law} law or expiring in {year}",
        question=(
            f"For a risk review, the CFO needs the contracts in the contract register that are "
            f"governed by {law} law or expire in {year} (or both). How many such contracts are "
            "there, and what is their combined annual value? List their contract ids."
        ),
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
    return TaskSpec(
        template="law.board_votes",
        kind="fact",
        title=f"Board vote on resolution {r.number} ({long_date(meeting.held)})",
        question=(
            f"At the board meeting of {long_date(meeting.held)}{where}, resolution {r.number} "
            f'("{r.title}") was put to a vote. Which directors voted against it, who abstained, '
            "and did it pass? A resolution passes when more directors vote for it than against."
        ),
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
    return TaskSpec(
        template="law.nda_confidentiality",
        kind="multi_hop",
        title="Confidentiality obligations for a flagged contract",
        question=(
            f"On {long_date(when)}, {who} asked in the #legal-ops channel how long our "
            "confidentiality obligations last towards the counterparty of the contract that "
            "Finance flagged. Who is that counterparty, and on what date do the confidentiality "
            "obligations under our NDA with them end?"
        ),
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
    return TaskSpec(
        template="law.litigation_exposure",
        kind="reconcile",
        title="Litigation exposure and next hearing",
        question=(
            f"For the board pack, {f.gc.name} needs the total amount claimed against "
            f"{f.ctx.company} across all matters in the litigation folder, and the date of the "
            f"next hearing in {matter.name}, as it stands after any rescheduling."
        ),
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
    return TaskSpec(
        template="law.expiring_schedule",
        kind="deliverable",
        title=f"Schedule of contracts expiring {lo.isoformat()} to {hi.isoformat()}",
        question=(
            f"Prepare a schedule of every contract in the contract register that expires between "
            f"{lo.isoformat()} and {hi.isoformat()} inclusive, sorted by expiry date."
        ),
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
    return TaskSpec(
        template="law.termination_memo",
        kind="deliverable",
        title=f"Termination memo: {c.counterparty}",
        question=(
            f"{f.gc.name} wants a short internal memo on terminating the {c.kind} with "
            f"{c.counterparty} at its expiry date. The memo must state the notice period in force "
            "(after any amendment) and the latest date to serve notice, counting the notice "
            "period back in calendar days from the expiry date."
        ),
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
            docx_content(path, heading, "Has the required heading", style="Heading 1"),
            docx_content(
                path, f"notice period: {c.current_notice_days} days", "States the notice period"
            ),
            docx_content(path, f"serve notice by: {deadline}", "States the deadline"),
            text("notice_deadline", deadline, "Answers with the deadline"),
        ],
        gold={"notice_days": c.current_notice_days, "notice_deadline": deadline},
        oracle={"counterparty": c.counterparty, "heading": heading},
        signature=f"memo:{c.cid}",
    )


def t_starter_register(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    c = _pick(f.contracts, variant)
    return TaskSpec(
        template="law.starter_register_value",
        kind="fact",
        title=f"Register lookup: {c.cid}",
        question=(
            f"Look up contract {c.cid} in `{REGISTER}`. Who is the counterparty, and what is "
            "the contract's annual value?"
        ),
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
        signature=f"starter_register:{c.cid}",
    )


def t_starter_hearing(f: LawFacts, rng: random.Random, variant: int) -> TaskSpec | None:
    m = f.matters[0]
    return TaskSpec(
        template="law.starter_hearing_email",
        kind="reconcile",
        title=f"Hearing date: {m.name}",
        question=(
            f"The case memo for {m.name} lists a hearing date, but read the email "
            f"`{f.hearing_mail}` too. On what date is the hearing now listed?"
        ),
        answer_keys={"next_hearing": "date of the hearing as now listed"},
        criteria=[text("next_hearing", m.next_hearing.isoformat(), "Uses the rescheduled date")],
        gold={"next_hearing": m.next_hearing.isoformat()},
        oracle={"matter": m.name},
        signature=f"starter_hearing:{m.name}",
    )


TEMPLATES = [
    Template("law.liability_cap", "fact", t_liability_cap, ("standard", "starter")),
    Template("law.fee_schedule", "compute", t_fee_schedule),
    Template("law.notice_current", "reconcile", t_notice),
    Template("law.register_total", "compute", t_register_total),
    Template("law.board_votes", "fact", t_board_votes, ("standard", "starter")),
    Template("law.nda_confidentiality", "multi_hop", t_nda),
    Template("law.litigation_exposure", "reconcile", t_litigation),
    Template("law.expiring_schedule", "deliverable", t_expiring),
    Template("law.termination_memo", "deliverable", t_memo),
    Template("law.starter_register_value", "fact", t_starter_register, ("starter",)),
    Template("law.starter_hearing_email", "reconcile", t_starter_hearing, ("starter",)),
]
