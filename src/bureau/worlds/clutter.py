"""The everyday work product of a standard world: what a professional must look through.

A domain writes the files its tasks need (and their own decoys). This module adds, around them,
the rest of a real shared drive, so that a standard world holds 150-250 files:

- calendars for three people (`calendars`);
- mail threads with replies that quote, forwards that carry attachments, and newsletters;
- chat channels with hundreds to a few thousand messages and threads;
- meeting notes that follow the team meeting's calendar, and weekly status reports;
- policies in three versions each (near-duplicates whose limits change);
- budget workbooks with one sheet per quarter and a summary of cross-sheet formulas, and drafts;
- CSV exports (timesheets, expenses, a contact list);
- scanned PDFs (receipts, signed forms), image-only or with an OCR text layer, said per file;
- invoices as PDF tables, review decks with charts (and an older version), plain-text notes.

None of it answers a task: names come from the split's part of the pools (`fabric.split_part`),
like every name in a world, and figures are drawn fresh. The random draws come from their own
generator (seeded from the world's), so the tasks a world gets do not depend on its clutter,
and planning a split (`render=False`) skips it.
"""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Callable
from datetime import date, datetime, timedelta
from functools import partial

from .calendars import START, WEEKS, world_calendars
from .fabric import FIRST, LAST, long_date, slug, split_part
from .render.calendar import Attendee
from .render.documents import DocSpec
from .render.messages import ChatMessage, Email
from .render.scan import write_scan
from .render.sheets import Formula, WorkbookSpec
from .render.slides import DeckSpec
from .spec import WorldContext

TEAMS = ("Finance", "Operations", "People", "IT", "Sales", "Legal Ops", "Facilities", "Marketing")
POLICIES = (
    "Travel",
    "Expenses",
    "Information Security",
    "Remote Work",
    "Procurement",
    "Data Retention",
    "Gifts and Hospitality",
)
PROJECTS = (
    "Atlas",
    "Beacon",
    "Cobalt",
    "Delta",
    "Ember",
    "Falcon",
    "Granite",
    "Harbor",
    "Iris",
    "Juniper",
    "Keystone",
    "Lumen",
)
TOPICS = (
    "printer access",
    "the Q2 forecast",
    "the travel booking tool",
    "laptop refresh",
    "the office move",
    "vendor onboarding",
    "expense approvals",
    "the intranet update",
    "the holiday rota",
    "conference tickets",
    "the new CRM fields",
    "badge access",
    "the budget template",
    "the data export",
    "client gift rules",
    "room bookings",
)
CHATTER = (
    "Can someone check {topic} before Friday?",
    "Update on {topic}: about {pct}% done, the rest next week.",
    "I've put the notes on {topic} in the shared drive.",
    "Reminder: {topic} is on the agenda for {day}.",
    "Who owns {topic} now that {name} has moved teams?",
    "Numbers for {topic}: {amount} so far against {amount2} planned.",
    "Thanks {name}, that fixed it.",
    "Following up on {topic} - any news?",
    "Moving {topic} to next sprint, blocked on {name}.",
    "FYI {name} is out {day}; ping me about {topic} instead.",
    "Can we push {topic} to {day}? Clash with the client call.",
    "Draft for {topic} is ready for review.",
)
REPLIES = (
    "On it.",
    "Done, see the updated file.",
    "Will do by {day}.",
    "+1",
    "Not yet, sorry.",
    "Asked {name}, waiting to hear back.",
    "Yes, the figure is {amount}.",
)


class Clutter:
    """One world's clutter: a roster of people and the generator every draw comes from."""

    def __init__(self, ctx: WorldContext, rng: random.Random) -> None:
        self.ctx = ctx
        self.rng = rng
        pairs = rng.sample([(f, la) for f in FIRST for la in split_part(LAST, ctx.split)], 14)
        self.people = [
            Attendee(f"{f} {la}", f"{f.lower()}.{la.lower()}@{ctx.email_domain}") for f, la in pairs
        ]
        self.scans: dict[str, bool] = {}
        self.attachable: list[str] = []

    # -- helpers ---------------------------------------------------------------------------
    def room(self) -> int:
        """Files the world may still take: a job writing several stops there."""
        return max(1, self.ctx.n_files - len(self.ctx.files))

    def name(self) -> str:
        return self.rng.choice(self.people).name

    def day(self, weeks: int = WEEKS) -> date:
        return START + timedelta(days=self.rng.randrange(weeks * 7))

    def amount(self) -> str:
        return f"USD {self.rng.randint(2, 900) * 250:,}"

    def fill(self, text: str) -> str:
        return text.format(
            topic=self.rng.choice(TOPICS),
            pct=self.rng.randint(10, 95),
            day=self.day().strftime("%A %d %B"),
            name=self.name().split()[0],
            amount=self.amount(),
            amount2=self.amount(),
        )

    # -- mail ------------------------------------------------------------------------------
    def mail_thread(self, k: int) -> None:
        rng = self.rng
        people = rng.sample(self.people, rng.randint(2, 4))
        topic = rng.choice(TOPICS)
        subject = f"{topic[0].upper()}{topic[1:]} ({rng.choice(PROJECTS)})"
        when = datetime.combine(self.day(), datetime.min.time()).replace(hour=rng.randint(8, 17))
        previous_id, quoted = "", ""
        for n in range(min(rng.randint(2, 5), self.room())):
            sender = people[n % len(people)]
            to = [p for p in people if p != sender][:2]
            body = self.fill(rng.choice(CHATTER)) + "\n\n" + self.fill(rng.choice(CHATTER))
            body += f"\n\nBest,\n{sender.name.split()[0]}"
            attachments = []
            if n == 0 and self.attachable and rng.random() < 0.4:
                attachments = [self.ctx.workspace / rng.choice(self.attachable)]
            forward = n > 0 and rng.random() < 0.2
            title = f"Fwd: {subject}" if forward else (f"Re: {subject}" if n else subject)
            text = body + ("\n\n" + quoted if quoted else "")
            message_id = self.ctx.email(
                f"mail/archive/{when:%Y-%m}/{when:%Y-%m-%d_%H%M}_{slug(subject)[:40]}_{k}_{n}.eml",
                Email(
                    f"{sender.name} <{sender.email}>",
                    [f"{p.name} <{p.email}>" for p in to],
                    title,
                    text,
                    when,
                    attachments=attachments,
                    in_reply_to="" if forward else previous_id,
                ),
            )
            previous_id = message_id
            header = f"On {when:%a %d %b %Y %H:%M}, {sender.name} wrote:"
            quoted = "\n".join(["> " + line for line in [header, *text.splitlines()]][:30])
            when += timedelta(hours=rng.randint(1, 30), minutes=rng.randint(0, 59))

    # -- chat ------------------------------------------------------------------------------
    def chat_channel(self, channel: str, n: int) -> None:
        rng = self.rng
        members = [p.name for p in rng.sample(self.people, rng.randint(5, 10))]
        messages: list[ChatMessage] = []
        when = datetime.combine(START, datetime.min.time()).replace(hour=8)
        step = WEEKS * 7 * 24 * 3600 // (n + 1)
        for _ in range(n):
            when += timedelta(seconds=rng.randint(step // 2, step * 3 // 2) or 1)
            if messages and rng.random() < 0.15:
                parent = rng.randrange(max(0, len(messages) - 30), len(messages))
                if messages[parent].thread_of is None:
                    text = self.fill(rng.choice(REPLIES))
                    messages.append(ChatMessage(rng.choice(members), text, when, parent))
                    continue
            messages.append(ChatMessage(rng.choice(members), self.fill(rng.choice(CHATTER)), when))
        self.ctx.chat(f"chat/{channel}.json", f"#{channel}", members, messages)

    # -- documents -------------------------------------------------------------------------
    def meeting_notes(self, week: int) -> None:
        rng = self.rng
        when = START + timedelta(weeks=week)
        doc = DocSpec(f"Team meeting notes - {long_date(when)}")
        doc.p(f"Attendees: {', '.join(p.name for p in rng.sample(self.people, rng.randint(4, 8)))}")
        doc.h1("Discussion")
        for _ in range(rng.randint(2, 4)):
            doc.bullet(self.fill(rng.choice(CHATTER)))
        doc.h1("Actions")
        doc.table(
            ["Owner", "Action", "Due"],
            [
                [self.name(), self.fill("Follow up on {topic}"), f"{self.day():%Y-%m-%d}"]
                for _ in range(rng.randint(2, 5))
            ],
        )
        self.ctx.docx(f"notes/meetings/{when:%Y-%m-%d}_team_meeting.docx", doc)

    def status_report(self, week: int) -> None:
        rng = self.rng
        when = START + timedelta(weeks=week, days=4)
        project = rng.choice(PROJECTS)
        doc = DocSpec(f"Project {project} weekly status - week of {long_date(when)}")
        doc.p(
            f"Prepared by {self.name()}. Overall status: {rng.choice(['green', 'amber', 'red'])}."
        )
        doc.table(
            ["Workstream", "Progress", "Spend to date"],
            [[t, f"{rng.randint(5, 100)}%", self.amount()] for t in rng.sample(TEAMS, 4)],
        )
        doc.h2("Risks")
        doc.bullet(self.fill("Delay on {topic} if {name} is not available by {day}."))
        rel = f"reports/status/{when:%Y-%m-%d}_{slug(project)}_status.docx"
        if rel not in self.ctx.files:
            self.ctx.docx(rel, doc)

    def policy_versions(self, topic: str) -> None:
        rng = self.rng
        limit = rng.randint(4, 40) * 250
        for version, year in list(enumerate((2023, 2024, 2025), start=1))[-self.room() :]:
            doc = self.ctx.pdf(
                f"admin/policies/{slug(topic)}/{slug(topic)}_policy_v{version}_{year}.pdf",
                f"{self.ctx.company} {topic} Policy (version {version}, {year})",
                footer=f"{self.ctx.company} internal - v{version}",
                watermark="SUPERSEDED" if version < 3 else "",
            )
            doc.para(
                f"This version replaces version {version - 1}." if version > 1 else "First issue."
            )
            doc.table(
                ["Approval level", "Limit (USD)", "Approver"],
                [[f"Level {k}", f"{limit * k:,}", self.name()] for k in range(1, 4)],
                column_major=False,
            )
            doc.para(f"Owner: {self.name()}. Review every {rng.choice(['6', '12', '24'])} months.")
            doc.save()
            limit += rng.choice([-2, -1, 1, 2, 4]) * 250

    def budget_workbook(self, team: str, draft: bool) -> None:
        rng = self.rng
        wb = WorkbookSpec(title=f"{team} budget 2025")
        items = rng.sample(
            (
                "Salaries",
                "Travel",
                "Software",
                "Training",
                "Events",
                "Consultants",
                "Equipment",
                "Subscriptions",
            ),
            5,
        )
        totals: dict[str, list[float]] = {}
        for q in range(1, 5):
            sheet = wb.sheet(f"Q{q}")
            sheet.append(["Item", "Month 1", "Month 2", "Month 3", "Quarter"])
            col_total = []
            for r, item in enumerate(items, start=2):
                months = [rng.randint(5, 120) * 100 for _ in range(3)]
                sheet.append([item, *months, Formula(f"=SUM(B{r}:D{r})", sum(months))])
                col_total.append(float(sum(months)))
            last = len(items) + 1
            sheet.append(["Total", None, None, None, Formula(f"=SUM(E2:E{last})", sum(col_total))])
            totals[f"Q{q}"] = col_total
        summary = wb.sheet("Summary")
        summary.append(["Item", "Q1", "Q2", "Q3", "Q4", "Year"])
        for r, item in enumerate(items, start=2):
            quarters = [totals[f"Q{q}"][r - 2] for q in range(1, 5)]
            refs = [Formula(f"='Q{q}'!E{r}", quarters[q - 1]) for q in range(1, 5)]
            summary.append([item, *refs, Formula(f"=SUM(B{r}:E{r})", sum(quarters))])
        suffix = "_DRAFT" if draft else ""
        self.ctx.xlsx(f"finance/budgets/{slug(team)}_budget_2025{suffix}.xlsx", wb)

    def review_deck(self, quarter: int, version: int) -> None:
        rng = self.rng
        deck = DeckSpec(f"{self.ctx.company} quarterly review", f"Q{quarter} 2025, v{version}")
        teams = list(rng.sample(TEAMS, 4))
        deck.add("Highlights", [self.fill(rng.choice(CHATTER)) for _ in range(3)])
        deck.add(
            "Spend by team",
            chart=("bar", teams, {"Spend (USD k)": [float(rng.randint(50, 900)) for _ in teams]}),
        )
        months = ["Month 1", "Month 2", "Month 3"]
        deck.add(
            "Headcount",
            chart=("line", months, {"Headcount": [float(rng.randint(40, 90)) for _ in months]}),
        )
        deck.add(
            "Open items",
            table=(["Item", "Owner"], [[self.fill("{topic}"), self.name()] for _ in range(4)]),
        )
        self.ctx.pptx(f"decks/reviews/q{quarter}_2025_review_v{version}.pptx", deck)

    def invoice(self, k: int) -> None:
        rng = self.rng
        trade = rng.choice(["Supplies", "Services", "Consulting", "Print", "Catering"])
        vendor = f"{rng.choice(split_part(LAST, self.ctx.split))} {trade}"
        when = self.day()
        doc = self.ctx.pdf(
            f"finance/invoices/{when:%Y-%m}/INV-{when:%y%m}-{k:03d}_{slug(vendor)}.pdf",
            f"Invoice INV-{when:%y%m}-{k:03d}",
            footer=vendor,
        )
        doc.kv([("From", vendor), ("To", self.ctx.company), ("Date", long_date(when))])
        rows, total = [], 0
        for _ in range(rng.randint(2, 6)):
            qty, price = rng.randint(1, 20), rng.randint(5, 400) * 5
            total += qty * price
            rows.append(
                [self.fill("{topic}").capitalize(), str(qty), f"{price:,}", f"{qty * price:,}"]
            )
        doc.table(["Description", "Qty", "Unit (USD)", "Amount (USD)"], rows, column_major=False)
        doc.para(f"Total due: USD {total:,} within {rng.choice([15, 30, 45])} days.", bold=True)
        doc.save()

    def scan(self, k: int) -> None:
        rng = self.rng
        kind = rng.choice(["receipt", "signed_form", "delivery_note", "expense_claim"])
        when = self.day()
        number = f"{kind.replace('_', ' ').title()} No. {rng.randint(10000, 99999)}"
        lines = [self.ctx.company.upper(), number, f"Date: {when:%d/%m/%Y}", ""]
        for _ in range(rng.randint(6, 40)):
            lines.append(f"{self.fill('{topic}')[:40]:<42}{self.amount():>16}")
        lines += ["", f"Signed: {self.name()}", f"Approved: {self.name()}"]
        rel = f"scans/{when:%Y-%m}/{kind}_{when:%Y%m%d}_{k:03d}.pdf"
        text_layer = k % 2 == 0  # half with an OCR layer, half image only
        target = self.ctx.path(rel)
        write_scan(target, f"{kind} {k}", lines, text_layer=text_layer, seed=rng.getrandbits(32))
        self.scans[rel] = text_layer

    def export(self, kind: str, month: int) -> None:
        rng = self.rng
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        if kind == "timesheets":
            writer.writerow(["employee", "date", "project", "hours"])
            for _ in range(rng.randint(60, 200)):
                d = date(2025, month, rng.randint(1, 28))
                writer.writerow(
                    [self.name(), d.isoformat(), rng.choice(PROJECTS), rng.choice([1, 2, 4, 6, 8])]
                )
        else:
            writer.writerow(["claim_id", "employee", "date", "category", "amount_usd", "status"])
            for n in range(rng.randint(20, 80)):
                d = date(2025, month, rng.randint(1, 28))
                writer.writerow(
                    [
                        f"EX-{month:02d}{n:04d}",
                        self.name(),
                        d.isoformat(),
                        rng.choice(["travel", "meals", "software", "training"]),
                        f"{rng.randint(5, 2500)}.{rng.randint(0, 99):02d}",
                        rng.choice(["approved", "approved", "pending", "rejected"]),
                    ]
                )
        rel = f"exports/{kind}_2025-{month:02d}.csv"
        self.ctx.path(rel).write_text(out.getvalue(), encoding="utf-8")
        self.attachable.append(rel)

    def contacts(self) -> None:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["name", "email", "team", "phone"])
        for p in self.people:
            phone = f"+1 555 {self.rng.randint(100, 999)} {self.rng.randint(1000, 9999)}"
            writer.writerow([p.name, p.email, self.rng.choice(TEAMS), phone])
        self.ctx.path("exports/contacts.csv").write_text(out.getvalue(), encoding="utf-8")

    def note(self, k: int) -> None:
        rng = self.rng
        topic = rng.choice(TOPICS)
        lines = [
            f"# Notes: {topic}",
            "",
            f"Last edited by {self.name()} on {self.day():%Y-%m-%d}.",
            "",
        ]
        lines += ["- " + self.fill(rng.choice(CHATTER)) for _ in range(rng.randint(3, 9))]
        lines += [
            "",
            "## To do",
            *("- [ ] " + self.fill("Check {topic} with {name}") for _ in range(3)),
        ]
        rel = f"notes/{slug(topic)}_{k}.md" if k % 2 else f"notes/{slug(topic)}_{k}.txt"
        self.ctx.path(rel).write_text("\n".join(lines) + "\n", encoding="utf-8")


def add_clutter(ctx: WorldContext, rng: random.Random) -> dict[str, str]:
    """Fill a standard world up to `ctx.n_files` with clutter; returns what a reader should know
    of some files (the scanned PDFs: with or without a text layer)."""
    c = Clutter(ctx, rng)
    world_calendars(ctx, rng, c.people)
    # Exports first: mail forwards attach them.
    jobs: list[Callable[[], None]] = [c.contacts]
    jobs += [partial(c.export, k, m) for m in (3, 4, 5, 6) for k in ("timesheets", "expenses")]
    # A hard world: four times the files to look through and at least 10,000 chat messages.
    x = 4 if ctx.difficulty == "hard" else 1
    if x == 1:
        sizes = {"general": rng.randint(600, 1500), "random": rng.randint(300, 900)}
        sizes["ops"] = rng.randint(200, 600)
    else:
        sizes = {"general": rng.randint(5000, 8000), "random": rng.randint(2500, 4000)}
        sizes["ops"] = rng.randint(2500, 4000)
    jobs += [partial(c.chat_channel, channel, n) for channel, n in sizes.items()]
    jobs += [partial(c.scan, k) for k in range(4)]  # both kinds in every world
    policies = rng.sample(POLICIES, 4)
    jobs += [partial(c.policy_versions, t) for t in policies[:2]]  # versions in every world
    rest: list[Callable[[], None]] = []
    rest += [partial(c.mail_thread, k) for k in range(30 * x)]
    rest += [partial(c.meeting_notes, w) for w in range(WEEKS)]
    rest += [partial(c.status_report, w) for w in range(WEEKS)]
    rest += [partial(c.policy_versions, t) for t in policies[2:]]
    rest += [partial(c.budget_workbook, t, False) for t in TEAMS]
    rest += [partial(c.budget_workbook, t, True) for t in rng.sample(TEAMS, 3)]
    rest += [partial(c.review_deck, q, v) for q in (1, 2) for v in (1, 2)]
    rest += [partial(c.invoice, k) for k in range(36 * x)]
    rest += [partial(c.scan, k) for k in range(4, 14 * x)]
    rest += [partial(c.note, k) for k in range(30 * x)]
    rng.shuffle(rest)
    for job in jobs + rest:
        if len(ctx.files) >= ctx.n_files:
            break
        job()
    return {
        rel: "scanned pages with an OCR text layer" if layer else "scanned pages, no text layer"
        for rel, layer in c.scans.items()
    }
