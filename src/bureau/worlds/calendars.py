"""A world's calendars: the team's meetings from March to June 2025, one .ics per person.

A meeting appears (with the same uid) in the calendar of everyone it involves, as a calendar
server would export them. The mix is what a professional's calendar holds: a weekly team
meeting with holidays skipped and one occurrence moved, fortnightly one-to-ones, a monthly
steering committee with someone abroad, client and counterparty calls in other time zones, some
rescheduled (a higher `SEQUENCE` and a note saying why), some cancelled or tentative,
invitations declined, and all-day offsites and trainings. Every draw comes from the generator
passed in, so the same seed writes the same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from .fabric import slug
from .render.calendar import Attendee, CalendarEvent, Moved
from .spec import WorldContext

START = date(2025, 3, 3)
"""A Monday: the first week the calendars cover."""
WEEKS = 17

HOME_ZONES = ("America/New_York", "America/Chicago", "Europe/London", "Europe/Berlin")
AWAY_ZONES = (
    "Asia/Singapore",
    "Asia/Tokyo",
    "Europe/Paris",
    "America/Los_Angeles",
    "Australia/Sydney",
    "America/Sao_Paulo",
    "Asia/Kolkata",
)
TOPICS = (
    "pipeline review",
    "budget check-in",
    "hiring sync",
    "risk review",
    "client debrief",
    "pricing workshop",
    "vendor call",
    "quarterly planning",
    "data room walkthrough",
    "model review",
    "board pack review",
    "onboarding session",
)
ALL_DAY = ("Team offsite", "Compliance training", "Public holiday", "Client workshop day")
ROOMS = ("Room 2.14", "Room 3.02", "Boardroom", "Video call", "Client site")
REASONS = (
    "at the client's request",
    "to avoid the board meeting",
    "after a travel change",
    "because the data was not ready",
)


def _weekday(week: int, weekday: int) -> date:
    return START + timedelta(weeks=week, days=weekday)


def _answered(rng: random.Random, people: list[Attendee]) -> list[Attendee]:
    """Most accept; some decline or have not answered."""
    answers = ["ACCEPTED"] * 6 + ["DECLINED", "TENTATIVE", "NEEDS-ACTION"]
    return [Attendee(p.name, p.email, rng.choice(answers)) for p in people]


def world_calendars(
    ctx: WorldContext, rng: random.Random, roster: list[Attendee], owners: int = 3
) -> list[str]:
    """Write the calendars of the first `owners` of a team drawn from `roster` (at least
    `owners + 4` people) under calendar/; returns their paths."""
    team = rng.sample(roster, owners + 4)
    lead, outside = team[0], team.pop()
    outside = Attendee(outside.name, outside.email.replace(ctx.email_domain, "partner.example.org"))
    home = rng.choice(HOME_ZONES)
    uid = iter(f"{ctx.world_id}-{k}@{ctx.email_domain}" for k in range(10_000))
    events: list[CalendarEvent] = []

    # The weekly team meeting: holidays skipped, one occurrence moved.
    weekday, hour = rng.randint(0, 1), rng.choice([9, 10])
    first = datetime.combine(_weekday(0, weekday), datetime.min.time()).replace(hour=hour)
    skipped = [first + timedelta(weeks=w) for w in sorted(rng.sample(range(2, WEEKS - 1), 2))]
    free = [w for w in range(1, WEEKS - 1) if first + timedelta(weeks=w) not in skipped]
    moved_week = rng.choice(free)
    was = first + timedelta(weeks=moved_week)
    now = was + timedelta(days=1, hours=rng.choice([2, 4, 5]))
    events.append(
        CalendarEvent(
            next(uid),
            f"{ctx.company} weekly team meeting",
            first,
            first + timedelta(minutes=45),
            home,
            lead,
            _answered(rng, team[1:]),
            rng.choice(ROOMS[:3]),
            f"Standing agenda: priorities, blockers, staffing. Owner: {lead.name}.",
            repeat={"freq": "weekly", "count": WEEKS},
            skipped=skipped,
            overrides=[
                Moved(was, now, now + timedelta(minutes=45), f"Moved {rng.choice(REASONS)}.")
            ],
        )
    )
    # Fortnightly one-to-ones between the lead and each owner.
    for k, person in enumerate(team[1 : owners + 1]):
        start = datetime.combine(_weekday(0, 2 + k % 3), datetime.min.time()).replace(
            hour=14 + k, minute=30
        )
        cancelled = start + timedelta(weeks=2 * rng.randint(1, 6))
        events.append(
            CalendarEvent(
                next(uid),
                f"1:1 {lead.name.split()[0]} / {person.name.split()[0]}",
                start,
                start + timedelta(minutes=30),
                home,
                lead,
                [person],
                "Video call",
                repeat={"freq": "weekly", "interval": 2, "count": 8},
                overrides=[Moved(cancelled)],
            )
        )
    # The monthly steering committee, first Thursday, with someone abroad.
    away = rng.choice(AWAY_ZONES)
    steer = datetime(2025, 3, 6, rng.choice([8, 16]), 0)
    events.append(
        CalendarEvent(
            next(uid),
            "Steering committee",
            steer,
            steer + timedelta(hours=1),
            home,
            lead,
            _answered(rng, [*team[1:3], outside]),
            "Boardroom",
            f"Monthly steering committee. {outside.name} dials in from {away.split('/')[1]}.",
            repeat={"freq": "monthly", "byday": "1TH", "count": 4},
        )
    )
    # One-off meetings: calls in other zones, reschedules, cancellations, tentative holds.
    for _ in range(rng.randint(18, 26)):
        zone = rng.choice([home] * 3 + list(AWAY_ZONES))
        day = _weekday(rng.randrange(WEEKS), rng.randint(0, 4))
        start = datetime.combine(day, datetime.min.time()).replace(
            hour=rng.randint(8, 17), minute=rng.choice([0, 0, 30])
        )
        length = timedelta(minutes=rng.choice([30, 45, 60, 90]))
        organizer = rng.choice(team[: owners + 1])
        guests = rng.sample([p for p in team if p != organizer], rng.randint(1, 3))
        if zone != home:
            guests.append(outside)
        topic = rng.choice(TOPICS)
        event = CalendarEvent(
            next(uid),
            topic[0].upper() + topic[1:],
            start,
            start + length,
            zone,
            organizer,
            _answered(rng, guests),
            rng.choice(ROOMS),
        )
        roll = rng.random()
        if roll < 0.2:  # rescheduled: the file holds the latest time, the note says from when
            shifted = start + timedelta(days=rng.randint(1, 6), hours=rng.choice([-2, 0, 3]))
            event.description = (
                f"Rescheduled {rng.choice(REASONS)}; originally {start:%A %d %B %H:%M} ({zone})."
            )
            event.start, event.end, event.sequence = shifted, shifted + length, rng.randint(1, 3)
        elif roll < 0.3:
            event.status, event.sequence = "CANCELLED", 1
        elif roll < 0.4:
            event.status = "TENTATIVE"
        events.append(event)
    for title in rng.sample(ALL_DAY, 2):
        day = _weekday(rng.randrange(WEEKS), rng.randint(0, 3))
        span = timedelta(days=rng.choice([1, 1, 2]))
        events.append(CalendarEvent(next(uid), title, day, day + span, home, lead, team[1:]))

    paths = []
    for owner in team[:owners]:
        mine = [
            e
            for e in events
            if e.organizer == owner or any(a.name == owner.name for a in e.attendees)
        ]
        rel = f"calendar/{slug(owner.name)}.ics"
        ctx.calendar(rel, owner.name, home, mine)
        paths.append(rel)
    return paths


@dataclass(frozen=True)
class Deadline:
    """One all-day entry of a shared deadlines calendar, where it now stands."""

    summary: str
    planned: date
    current: date

    @property
    def moved(self) -> bool:
        return self.current != self.planned


def deadline_calendar(
    ctx: WorldContext,
    rng: random.Random,
    rel: str,
    name: str,
    owner: Attendee,
    entries: list[tuple[str, date, bool | date]],
) -> dict[str, Deadline]:
    """Write a shared calendar of all-day deadlines (`summary`, planned day, moved or not or
    the day it moved to) to
    `rel`, in one home zone. A moved entry keeps its uid, is written at its new day with
    `SEQUENCE:1`, and says in its description from which day it moved (as calendar servers
    export a reschedule). Returns each summary's `Deadline`."""
    zone = rng.choice(HOME_ZONES)
    out: dict[str, Deadline] = {}
    events = []
    for k, (summary, planned, moved) in enumerate(entries):
        if isinstance(moved, date):
            current = moved
        else:
            current = planned + timedelta(days=rng.randint(7, 35)) if moved else planned
        note = f"Owner: {owner.name}."
        if current != planned:
            note = f"Moved {rng.choice(REASONS)}; originally {planned:%A %d %B %Y}. " + note
        events.append(
            CalendarEvent(
                f"{ctx.world_id}-{slug(name)}-{k}@{ctx.email_domain}",
                summary,
                current,
                current + timedelta(days=1),
                zone,
                owner,
                [],
                description=note,
                sequence=1 if current != planned else 0,
            )
        )
        out[summary] = Deadline(summary, planned, current)
    ctx.calendar(rel, name, zone, events)
    return out
