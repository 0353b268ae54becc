"""Corporate law: a legal department and its outside counsel.

Files: executed commercial contracts as two-column PDFs with a ruled fee schedule, DRAFT
versions with stale terms, a contract register workbook, NDAs and litigation memos (docx), board
minutes (docx and PDF), mail with letter amendments and rescheduled hearings, and a #legal-ops
chat channel where contracts get flagged by id. The facts are modelled in `law_model`, and
the templates that ask about them live in `law_tasks`.
"""

from __future__ import annotations

import random
from datetime import date, timedelta

from ..calendars import deadline_calendar
from ..fabric import (
    CITIES,
    LAST,
    LAW_FIRMS,
    at,
    day,
    in_split,
    long_date,
    money,
    people,
    slug,
    split_part,
)
from ..render.calendar import Attendee
from ..render.documents import DocSpec
from ..render.messages import ChatMessage, Email
from ..render.sheets import Formula, WorkbookSpec
from ..spec import WorldContext
from .law_model import (
    CP_SUFFIX,
    DEADLINES,
    KINDS,
    LAWS,
    REGISTER,
    RESOLUTIONS,
    ROLES,
    Contract,
    LawFacts,
    Matter,
    Meeting,
    Nda,
    Resolution,
)
from .law_tasks import TEMPLATES

__all__ = ["TEMPLATES", "build"]


def build(ctx: WorldContext) -> LawFacts:
    rng = ctx.rng
    starter = ctx.difficulty == "starter"
    firm = rng.choice(LAW_FIRMS)
    staff = people(
        rng,
        12,
        ["General Counsel", "Senior Counsel", "Paralegal", "CFO"],
        ctx.email_domain,
        ctx.split,
    )
    firm_domain = slug(firm.split()[0]) + ".example.com"
    outside = people(rng, 2, ["Partner", "Associate"], firm_domain, ctx.split)
    facts = LawFacts(
        ctx=ctx,
        gc=staff[0],
        partner=outside[0],
        team=staff[1:4],
        directors=[p.name for p in staff[4:11]],
        contracts=_contracts(rng, 4 if starter else rng.randint(6, 8), ctx.split),
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
    _deadlines(ctx, facts, executed)
    return facts


def _contracts(rng: random.Random, n: int, split: str) -> list[Contract]:
    """`n` contracts with the split's counterparties and laws; ids from C-100 to C-999 in every
    split, each id in one split only (`fabric.in_split`): ascending from anywhere in the range,
    skipping the ids of other splits."""
    surnames = split_part(LAST, split)
    names = rng.sample([f"{last} {suf}" for last in surnames for suf in CP_SUFFIX], n)
    laws = split_part(LAWS, split)
    out = []
    number = 100 + rng.randint(0, 840)
    for name in names:
        number += rng.randint(1, 4)
        while not in_split(f"C-{number}", split):
            number += 1
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
                governing_law=rng.choice(laws),
                notice_days=rng.choice([30, 45, 60, 90]),
                liability_cap=rng.randint(4, 60) * 50_000,
                payment_days=rng.choice([30, 45, 60]),
                fees=[(r, rng.randint(12, 60) * 5) for r in rng.sample(ROLES, rng.randint(4, 6))],
            )
        )
    return out


def _law_phrase(law: str) -> str:
    if law in ("England and Wales", "Scotland", "Singapore", "Ireland", "Hong Kong"):
        return f"the laws of {law}"
    if law in ("Ontario", "Quebec"):
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
    titles = rng.sample(split_part(RESOLUTIONS, ctx.split), n * 4)
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
    lawyer = rng.choice(split_part(LAST, ctx.split))
    counsel = f"{lawyer} Counsel <legal@{slug(c.counterparty)}.example.com>"
    letter = f"contracts/amendments/{c.cid}_letter_amendment.pdf"
    doc = ctx.pdf(letter, f"Letter Amendment No. 1 to {c.kind} {c.cid}")
    doc.para(
        f"{ctx.company} and {c.counterparty} agree, with effect from {long_date(signed)}, that in "
        f'clause 4 (Termination) the words "{c.notice_days} days" are replaced by '
        f'"{c.amended_notice_days} days". All other terms of the Agreement remain in force.'
    )
    doc.kv([("For Customer", facts.gc.name), ("For Supplier", "Authorised signatory")])
    doc.save()
    c.amendment_mail = f"mail/inbox/{signed.isoformat()}_{c.cid}_amendment.eml"
    ctx.email(
        c.amendment_mail,
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
    surnames = split_part(LAST, ctx.split)
    claimants = rng.sample([f"{last} {s}" for last in surnames for s in ("Inc.", "Ltd", "LLC")], n)
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


def serve_summary(c: Contract) -> str:
    return f"Serve termination notice: {c.cid} ({c.counterparty})"


def _deadlines(ctx: WorldContext, facts: LawFacts, executed: list[Contract]) -> None:
    """The legal team's deadlines calendar: when a termination notice is to be served on each
    executed contract (the amended ones always moved since), and, for each amended one, an
    older reminder that still gives the planned day and the agreement's original notice."""
    rng = ctx.rng
    entries: list[tuple[str, date, bool | date]] = [
        (
            serve_summary(c),
            c.expiry - timedelta(days=rng.randint(20, 200)),
            c.amended_notice_days is not None or rng.random() < 0.5,
        )
        for c in executed
    ]
    gc = Attendee(facts.gc.name, facts.gc.email)
    plan = deadline_calendar(ctx, rng, DEADLINES, "Legal deadlines", gc, entries)
    for c in executed:
        entry = plan[serve_summary(c)]
        facts.serve_on[c.cid] = entry.current
        if c.amended_notice_days is None:
            continue
        sender = facts.team[rng.randrange(len(facts.team))]
        sent = entry.planned - timedelta(days=rng.randint(40, 90))
        ends = entry.planned + timedelta(days=c.notice_days)
        ctx.email(
            f"mail/inbox/{sent.isoformat()}_{c.cid}_termination_reminder.eml",
            Email(
                sender=sender.address,
                to=[facts.gc.address],
                subject=f"Reminder: notice on {c.cid}",
                body=(
                    f"Hi {facts.gc.first},\n\nA reminder that we serve the termination notice "
                    f"on the {c.counterparty} {c.kind} on {long_date(entry.planned)}. From my "
                    f"notes the agreement gives {c.notice_days} days' notice, so it would end "
                    f"on {long_date(ends)}.\n\n{sender.name}"
                ),
                sent=at(sent, 9, rng.randint(0, 59)),
            ),
        )
