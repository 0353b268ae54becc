"""Unrelated files that make a world look like a real shared drive.

Domain generators write the files their tasks need (and their own distractors: drafts, older
versions). This module tops a world up to its file count with everyday company material in every
format, full of numbers and dates that look relevant but answer no task.
"""

from __future__ import annotations

import random
from datetime import date

from .clutter import add_clutter
from .fabric import FIRST, LAST, at, day, long_date, split_part
from .render.documents import DocSpec
from .render.messages import ChatMessage, Email
from .render.sheets import Formula, WorkbookSpec
from .render.slides import DeckSpec
from .spec import WorldContext

POLICIES = (
    "Travel",
    "Expenses",
    "Information Security",
    "Remote Work",
    "Data Retention",
    "Procurement",
    "Gifts and Hospitality",
    "Parental Leave",
)
TEAMS = ("Marketing", "Finance", "People", "Operations", "IT", "Facilities", "Sales", "Legal Ops")
ITEMS = ("Venue", "Catering", "Travel", "Speakers", "Materials", "Contingency", "Transport", "AV")


def _name(ctx: WorldContext) -> str:
    return f"{ctx.rng.choice(FIRST)} {ctx.rng.choice(split_part(LAST, ctx.split))}"


def _policy_pdf(ctx: WorldContext, i: int) -> None:
    topic = POLICIES[i % len(POLICIES)]
    year = 2022 + ctx.rng.randint(0, 3)
    doc = ctx.pdf(
        f"admin/policies/{topic.lower().replace(' ', '_')}_policy_{year}_{i}.pdf",
        f"{ctx.company} {topic} Policy ({year})",
        footer=f"{ctx.company} internal",
    )
    doc.para(
        f"This policy applies to all employees and contractors of {ctx.company}. It was approved "
        f"by the Operations Committee and replaces every earlier version."
    )
    doc.heading("Limits and approvals")
    rows = [
        [f"Level {k}", f"{ctx.rng.randint(2, 40) * 250:,}", f"{ctx.rng.randint(1, 5)} days"]
        for k in range(1, ctx.rng.randint(4, 7))
    ]
    doc.table(["Approval level", "Limit (USD)", "Turnaround"], rows, column_major=False)
    for k in range(ctx.rng.randint(2, 4)):
        doc.para(
            f"{k + 1}. Requests above the limit need written approval from a director. Records "
            f"are kept for {ctx.rng.randint(3, 10)} years and reviewed every "
            f"{ctx.rng.choice(['quarter', 'half-year', 'year'])}."
        )
    doc.save()


def _budget_xlsx(ctx: WorldContext, i: int) -> None:
    team = TEAMS[i % len(TEAMS)]
    wb = WorkbookSpec(title=f"{team} offsite budget")
    sheet = wb.sheet("Budget")
    sheet.append(["Item", "Budget (USD)", "Actual (USD)", "Variance (USD)"])
    total_b = total_a = 0
    items = ctx.rng.sample(ITEMS, ctx.rng.randint(4, 7))
    for r, item in enumerate(items, start=2):
        budget = ctx.rng.randint(4, 80) * 100
        actual = budget + ctx.rng.randint(-15, 15) * 50
        total_b += budget
        total_a += actual
        sheet.append([item, budget, actual, Formula(f"=C{r}-B{r}", actual - budget)])
    n = len(items) + 1
    sheet.append(
        [
            "Total",
            Formula(f"=SUM(B2:B{n})", total_b),
            Formula(f"=SUM(C2:C{n})", total_a),
            Formula(f"=C{n + 1}-B{n + 1}", total_a - total_b),
        ]
    )
    sheet.col_widths = {1: 18, 2: 14, 3: 14, 4: 16}
    ctx.xlsx(f"admin/budgets/{team.lower().replace(' ', '_')}_offsite_budget_{i}.xlsx", wb)


def _all_hands_pptx(ctx: WorldContext, i: int) -> None:
    quarter = f"Q{i % 4 + 1} {2024 + i % 3}"
    deck = DeckSpec(f"{ctx.company} All-Hands", quarter)
    deck.add(
        "Highlights",
        [
            f"Welcomed {ctx.rng.randint(3, 40)} new colleagues",
            f"Employee survey participation at {ctx.rng.randint(60, 95)}%",
            "Office move on track",
        ],
    )
    teams = list(TEAMS[:4])
    deck.add(
        "Headcount by team",
        chart=("bar", teams, {"Headcount": [float(ctx.rng.randint(5, 80)) for _ in teams]}),
    )
    ctx.pptx(f"admin/all_hands/all_hands_{quarter.replace(' ', '_').lower()}_{i}.pptx", deck)


def _notes_docx(ctx: WorldContext, i: int) -> None:
    team = TEAMS[(i + 3) % len(TEAMS)]
    when = day(date(2025, 1, 6), ctx.rng.randint(0, 500))
    spec = DocSpec(f"{team} weekly sync — {long_date(when)}")
    spec.p(f"Attendees: {', '.join(_name(ctx) for _ in range(ctx.rng.randint(3, 6)))}")
    spec.h1("Actions")
    for _ in range(ctx.rng.randint(2, 5)):
        spec.bullet(
            f"{_name(ctx)} to follow up on item #{ctx.rng.randint(100, 999)} by "
            f"{long_date(day(when, ctx.rng.randint(3, 30)))}"
        )
    ctx.docx(f"admin/notes/{team.lower().replace(' ', '_')}_sync_{when.isoformat()}_{i}.docx", spec)


def _newsletter_eml(ctx: WorldContext, i: int) -> None:
    when = day(date(2025, 2, 1), ctx.rng.randint(0, 400))
    ctx.email(
        f"mail/newsletters/newsletter_{when.isoformat()}_{i}.eml",
        Email(
            sender=f"Internal Comms <comms@{ctx.email_domain}>",
            to=[f"all-staff@{ctx.email_domain}"],
            subject=f"{ctx.company} weekly: office news #{ctx.rng.randint(10, 99)}",
            body=(
                f"Hello all,\n\nThe cafeteria will close early on {long_date(day(when, 4))}. "
                f"The charity run raised USD {ctx.rng.randint(2, 30) * 500:,}. Parking level "
                f"{ctx.rng.randint(1, 4)} is closed for maintenance.\n\nInternal Comms"
            ),
            sent=at(when, 9, ctx.rng.randint(0, 59)),
        ),
    )


def _random_chat(ctx: WorldContext, i: int) -> None:
    when = day(date(2025, 3, 3), ctx.rng.randint(0, 300))
    users = [_name(ctx) for _ in range(4)]
    lines = [
        "anyone up for lunch?",
        "the printer on 3 is jammed again",
        f"reminder: town hall at {ctx.rng.randint(9, 16)}:00",
        "who took the blue stapler",
        f"coffee machine fixed, ticket #{ctx.rng.randint(1000, 9999)}",
    ]
    msgs = [
        ChatMessage(users[k % 4], text, at(when, 9 + k, ctx.rng.randint(0, 59)))
        for k, text in enumerate(ctx.rng.sample(lines, 4))
    ]
    ctx.chat(f"chat/random_{i}.json", "#random", users, msgs)


FILLERS = (_policy_pdf, _budget_xlsx, _notes_docx, _newsletter_eml, _all_hands_pptx, _random_chat)


def fill_world(ctx: WorldContext) -> None:
    """Top the world up to `ctx.n_files`: a standard world with its clutter (`clutter`, from a
    generator of its own, and not at all when the world is only planned), a starter world with
    a few everyday files."""
    if ctx.difficulty != "starter":
        seed = ctx.rng.getrandbits(64)  # one draw, whatever the clutter holds
        if ctx.render:
            ctx.file_notes.update(add_clutter(ctx, random.Random(seed)))
        return
    i = 0
    while len(ctx.files) < ctx.n_files:
        FILLERS[i % len(FILLERS)](ctx, i)
        i += 1
