"""Calendars as iCalendar files (RFC 5545), the way a calendar app exports one person's.

An event is written in its own IANA time zone (`DTSTART;TZID=Europe/London`). A recurring
meeting is one `RRULE` with its skipped dates (`EXDATE`); an occurrence that was moved or
cancelled is an override (`RECURRENCE-ID`, the original time, with the new time or
`STATUS:CANCELLED`), as calendar apps write them. `SEQUENCE` counts reschedules.

No `VTIMEZONE` blocks are written: they would copy the host's tzdata into the file, so the same
world would differ between machines. Readers resolve IANA `TZID`s themselves (`icalendar` and
the apps that import such files do). Everything else derives from the event: the same world,
the same bytes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import icalendar

STAMP = datetime(2025, 1, 1, tzinfo=ZoneInfo("UTC"))
"""DTSTAMP of every generated event (a fixed time, for deterministic files)."""


@dataclass(frozen=True)
class Attendee:
    name: str
    email: str
    answer: str = "ACCEPTED"
    """PARTSTAT: ACCEPTED, DECLINED, TENTATIVE or NEEDS-ACTION."""


@dataclass(frozen=True)
class Moved:
    """One occurrence of a recurring meeting, moved (`start`/`end`) or cancelled (None)."""

    original: datetime
    start: datetime | None = None
    end: datetime | None = None
    note: str = ""


@dataclass
class CalendarEvent:
    uid: str
    summary: str
    start: datetime | date
    """Naive local time in `zone` (or a date, for an all-day event)."""
    end: datetime | date
    zone: str = "UTC"
    organizer: Attendee | None = None
    attendees: list[Attendee] = field(default_factory=list)
    location: str = ""
    description: str = ""
    repeat: dict[str, object] | None = None
    """An RRULE as icalendar takes it, e.g. {"freq": "weekly", "count": 8}."""
    skipped: list[datetime] = field(default_factory=list)
    overrides: list[Moved] = field(default_factory=list)
    status: str = "CONFIRMED"
    sequence: int = 0


def _local(value: datetime | date, zone: ZoneInfo) -> datetime | date:
    if isinstance(value, datetime):
        return value.replace(tzinfo=zone) if value.tzinfo is None else value
    return value


def _address(person: Attendee) -> icalendar.vCalAddress:
    address = icalendar.vCalAddress(f"mailto:{person.email}")
    address.params["CN"] = person.name
    return address


def _component(event: CalendarEvent, zone: ZoneInfo) -> icalendar.Event:
    out = icalendar.Event()
    out.add("UID", event.uid)
    out.add("DTSTAMP", STAMP)
    out.add("SEQUENCE", event.sequence)
    out.add("SUMMARY", event.summary)
    out.add("DTSTART", _local(event.start, zone))
    out.add("DTEND", _local(event.end, zone))
    out.add("STATUS", event.status)
    if event.organizer is not None:
        out.add("ORGANIZER", _address(event.organizer), encode=False)
    for person in event.attendees:
        address = _address(person)
        address.params["PARTSTAT"] = person.answer
        address.params["ROLE"] = "REQ-PARTICIPANT"
        out.add("ATTENDEE", address, encode=False)
    if event.location:
        out.add("LOCATION", event.location)
    if event.description:
        out.add("DESCRIPTION", event.description)
    return out


def write_ics(path: Path, name: str, zone: str, events: list[CalendarEvent]) -> None:
    """Write one calendar (`X-WR-CALNAME` `name`, default time zone `zone`)."""
    cal = icalendar.Calendar()
    cal.add("PRODID", "-//bureau//worlds//EN")
    cal.add("VERSION", "2.0")
    cal.add("CALSCALE", "GREGORIAN")
    cal.add("X-WR-CALNAME", name)
    cal.add("X-WR-TIMEZONE", zone)
    for event in events:
        tz = ZoneInfo(event.zone)
        master = _component(event, tz)
        if event.repeat:
            master.add("RRULE", event.repeat)
            for day in event.skipped:
                master.add("EXDATE", _local(day, tz))
        cal.add_component(master)
        for moved in event.overrides:
            if moved.start is None:  # cancelled: the occurrence where it was
                assert isinstance(moved.original, datetime) and isinstance(event.start, datetime)
                length = event.end - event.start
                start, end, status = moved.original, moved.original + length, "CANCELLED"
            else:
                assert moved.end is not None
                start, end, status = moved.start, moved.end, event.status
            occurrence = dataclasses.replace(
                event,
                start=start,
                end=end,
                status=status,
                sequence=event.sequence + 1,
                description=moved.note or event.description,
            )
            override = _component(occurrence, tz)
            override.add("RECURRENCE-ID", _local(moved.original, tz))
            cal.add_component(override)
    path.write_bytes(cal.to_ical())
