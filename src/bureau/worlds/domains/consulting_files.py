"""Consulting worlds, part 2: the engagement's files.

Market-sizing decks (tables, a regional pie chart, growth assumptions), the survey workbook with
formula summaries and named ranges, interview notes, an industry outlook PDF (two-column text and
a ruled table), the signed statement of work (ruled milestone table), drafts and superseded
versions, change requests, client mail and the #engagement channel. Each writer records in the
facts what the tasks later ask about, e.g. which growth rate the client's latest email set.
"""

from __future__ import annotations

import random
from datetime import date
from pathlib import Path

from ..calendars import deadline_calendar
from ..fabric import LAST, at, day, long_date, round_to, slug, split_part
from ..render.calendar import Attendee
from ..render.documents import DocSpec
from ..render.messages import ChatMessage, Email
from ..render.sheets import Formula, WorkbookSpec
from ..render.slides import DeckSpec
from ..spec import WorldContext
from .consulting_model import (
    DECK_V1,
    DECK_V2,
    DRIVERS,
    IV_SUFFIX,
    MILESTONE_CALENDAR,
    PAINS,
    PROPOSED_MILESTONES,
    PUBLISHERS,
    ROLES,
    SOW,
    TAM_SLIDE,
    YEARS,
    ConsultingFacts,
    Interviewee,
    Milestone,
    Respondent,
    SlideRequest,
)


def write_interviews(
    ctx: WorldContext, facts: ConsultingFacts, names: list[str], n_files: int
) -> None:
    rng = ctx.rng
    roles = rng.sample(ROLES, 4 * n_files)
    surnames = split_part(LAST, ctx.split)
    companies = rng.sample([f"{la} {s}" for la in surnames for s in IV_SUFFIX], 4 * n_files)
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
            held = day(facts.milestones[1].due, rng.randint(-20, 5))
            budget = rng.randint(10, 180) * 5000
            iv = Interviewee(names[k], roles[k], companies[k], segs[k], budget, rel, held)
            k += 1
            spec.h1(f"Interview {k}: {iv.name}")
            spec.p(f"Role: {iv.role}")
            spec.p(f"Company: {iv.company} ({iv.segment} segment)")
            spec.p(f"Date: {long_date(iv.held)}")
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


def write_deck(
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


def write_survey(ctx: WorldContext, rel: str, rows: list[Respondent], segments: list[str]) -> None:
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


def _mean(values: list[int]) -> float | str:
    """What Excel caches for AVERAGE/AVERAGEIF, including its error for an empty range."""
    return round(sum(values) / len(values), 10) if values else "#DIV/0!"


def write_industry(ctx: WorldContext, facts: ConsultingFacts) -> None:
    rng = ctx.rng
    publisher = rng.choice(PUBLISHERS)
    facts.cagr = {s: float(round_to(rng, 2.0, 16.0, 0.1)) for s in facts.segments}
    draft = {s: round(c + rng.choice([-1.2, -0.8, 0.6, 1.1]), 1) for s, c in facts.cagr.items()}
    regions = [(r, rng.randint(20, 400) / 10) for r in facts.regions]
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


def write_sow_pdf(ctx: WorldContext, facts: ConsultingFacts) -> None:
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
            ("Partner", facts.partner.name),
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


def write_sow_draft(ctx: WorldContext, facts: ConsultingFacts) -> None:
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


def write_draft_report(
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
    """Write one message; its Message-ID derives from the path so the world stays reproducible."""
    rel = f"mail/{folder}/{when.isoformat()}_{slug(subject)[:48]}.eml"
    mail.message_id = mail.message_id or f"<{folder}.{Path(rel).stem}@{ctx.email_domain}>"
    ctx.email(rel, mail)
    return rel


def write_deck_mails(ctx: WorldContext, facts: ConsultingFacts) -> None:
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


def write_revisions(ctx: WorldContext, facts: ConsultingFacts, n: int) -> None:
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
            f"Hi {facts.manager.first},\n\n"
            + (
                "One more change after the board pre-read: "
                if k
                else "Following our steering committee review, "
            )
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


def write_change_requests(ctx: WorldContext, facts: ConsultingFacts) -> None:
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
        m.change_request, m.cr_file = cr, rel
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
    for k, (m, ok) in enumerate(zip(chosen, approve, strict=True), start=1):
        cr, when = f"CR-{k:02d}", day(when, rng.randint(1, 4))
        verdict = (
            f"I confirm that we approve change request {cr} as proposed."
            if ok
            else f"After review we will not approve change request {cr}; please continue "
            "under the original fee."
        )
        subject = f"Re: {cr} decision"
        m.decision_mail = _mail(
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


def write_interview_mails(ctx: WorldContext, facts: ConsultingFacts) -> None:
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


def write_chat(ctx: WorldContext, facts: ConsultingFacts) -> None:
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


def acceptance_summary(m: Milestone) -> str:
    return f"Acceptance meeting: milestone {m.number} ({m.name})"


def write_milestone_calendar(ctx: WorldContext, facts: ConsultingFacts) -> None:
    """The engagement calendar: each milestone's acceptance meeting (the ones with a change
    request always moved since), and an older note that still gives the planned day and the
    signed fee for each of those."""
    rng = ctx.rng
    entries: list[tuple[str, date, bool | date]] = [
        (
            acceptance_summary(m),
            day(m.due, rng.randint(3, 10)),
            m.change_request is not None or rng.random() < 0.5,
        )
        for m in facts.milestones
    ]
    facts.proposed = rng.choice(split_part(PROPOSED_MILESTONES, ctx.split))
    when = day(facts.milestones[-1].due, -rng.randint(5, 15))
    subject = f"Proposal: an added milestone ({facts.proposed})"
    _mail(
        ctx,
        "sent",
        when,
        subject,
        Email(
            facts.partner.address,
            [facts.sponsor.address],
            subject,
            f"Dear {facts.sponsor.first},\n\nFollowing the steering committee, we propose adding "
            f'a milestone "{facts.proposed}" after "{facts.milestones[-1].name}". Once you '
            "confirm you want it, we will send a change request with its fee and due date.\n\n"
            f"Best regards,\n{facts.partner.name}",
            at(when, 17),
        ),
    )
    owner = Attendee(facts.manager.name, facts.manager.email)
    plan = deadline_calendar(ctx, rng, MILESTONE_CALENDAR, "Engagement milestones", owner, entries)
    for m in facts.milestones:
        entry = plan[acceptance_summary(m)]
        m.accepted_on = entry.current
        if m.change_request is None:
            continue
        who = facts.analysts[rng.randrange(len(facts.analysts))]
        sent = day(entry.planned, -rng.randint(10, 20))
        subject = f"Invoice plan: {m.name}"
        _mail(
            ctx,
            "inbox",
            sent,
            subject,
            Email(
                who.address,
                [facts.manager.address],
                subject,
                f"Hi {facts.manager.first},\n\nFor the billing plan: {m.name} is accepted on "
                f"{long_date(entry.planned)} and we invoice the USD {m.fee:,} in the statement "
                f"of work that day.\n\n{who.name}",
                at(sent, 9),
            ),
        )
