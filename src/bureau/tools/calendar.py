"""Calendar tools over the workspace's iCalendar files: `calendar/<name>.ics`.

Each file is one person's or one room's calendar (RFC 5545, as Google Calendar and Outlook
export it): events with a time zone (`DTSTART;TZID=...`), organizer and attendees with their
answers, recurring meetings (`RRULE`) with skipped dates (`EXDATE`), single occurrences that
were moved or cancelled (a `RECURRENCE-ID` override, `STATUS:CANCELLED`), and reschedules
(`SEQUENCE` counts the changes). Parsing is `icalendar`'s; recurring meetings are expanded by
`recurring_ical_events`, so a listing shows each occurrence where it really happens.

Times are shown in one time zone per call: the one asked for, else the first calendar's
`X-WR-TIMEZONE`, else UTC; a line adds the event's own local time when its zone differs.
Creating an event appends it to a calendar file, which later reads (and the verifier) see.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import icalendar
import recurring_ical_events
from pydantic import Field

from bureau.tools.core import (
    FailureKind,
    ToolFailure,
    ToolSet,
    Workspace,
    check_deadline,
    count,
)

TOOLS = ToolSet("calendar", "cal_")
CALENDAR_DIR = "calendar"
MAX_OCCURRENCES = 5000
"""The most occurrences one listing expands (a daily meeting over ten years is 3,650)."""

CalendarArg = Annotated[
    str | None,
    Field(description="Only this calendar (its name or file name); omit for every calendar."),
]
ZoneArg = Annotated[
    str | None,
    Field(
        description="IANA time zone to show times in, e.g. 'Europe/London'; omit for the "
        "calendar's own."
    ),
]
WhenArg = Annotated[
    str,
    Field(
        description="A date '2025-03-14' or a local time '2025-03-14 09:30' (in the call's "
        "time zone), or ISO 8601 with an offset."
    ),
]


@dataclass(frozen=True)
class _Calendar:
    name: str
    path: Path
    data: icalendar.Calendar

    @property
    def zone(self) -> str | None:
        tz = self.data.get("X-WR-TIMEZONE")
        return str(tz) if tz else None


def _calendar_files(ws: Workspace) -> list[Path]:
    folder = ws.resolve(CALENDAR_DIR, must_exist=False)
    if not folder.is_dir():
        raise ToolFailure(FailureKind.not_found, "this workspace has no calendar/ folder")
    return [p for p in sorted(folder.glob("*.ics")) if not p.is_symlink() and p.is_file()]


def _load(ws: Workspace, path: Path) -> _Calendar:
    try:
        data = icalendar.Calendar.from_ical(path.read_bytes())
    except (ValueError, KeyError, IndexError) as exc:
        raise ToolFailure(
            FailureKind.unreadable_file, f"{ws.rel(path)} is not a valid iCalendar file: {exc}"
        ) from exc
    if not isinstance(data, icalendar.Calendar):
        raise ToolFailure(FailureKind.unreadable_file, f"{ws.rel(path)} holds no VCALENDAR")
    return _Calendar(str(data.get("X-WR-CALNAME") or path.stem), path, data)


def _calendars(ws: Workspace, which: str | None) -> list[_Calendar]:
    found = [_load(ws, p) for p in _calendar_files(ws)]
    if which is None:
        return found
    key = which.strip().removesuffix(".ics").lower()
    chosen = [c for c in found if key in (c.name.lower(), c.path.stem.lower())]
    if not chosen:
        names = ", ".join(f"{c.name} ({c.path.name})" for c in found) or "none"
        raise ToolFailure(FailureKind.not_found, f"no calendar {which!r}; calendars: {names}")
    return chosen


def _zone(name: str | None, calendars: list[_Calendar]) -> ZoneInfo:
    name = name or next((c.zone for c in calendars if c.zone), None) or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolFailure(
            FailureKind.invalid_argument,
            f"unknown time zone {name!r}; use an IANA name such as 'America/New_York'",
        ) from exc


def _parse_when(text: str, tz: ZoneInfo, *, end: bool = False) -> datetime:
    """A date (its start, or for `end` the start of the next day), a local time in `tz`, or
    an ISO time with its own offset."""
    raw = text.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw):
            day = date.fromisoformat(raw) + timedelta(days=1 if end else 0)
            return datetime.combine(day, time(), tz)
        when = datetime.fromisoformat(raw)
    except ValueError as exc:
        raise ToolFailure(
            FailureKind.invalid_argument,
            f"cannot read {text!r} as a date or time; write '2025-03-14' or '2025-03-14 09:30'",
        ) from exc
    return when if when.tzinfo else when.replace(tzinfo=tz)


def _as_datetime(value: date | datetime, tz: ZoneInfo) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=tz)
    return datetime.combine(value, time(), tz)  # an all-day event starts at local midnight


def _people(event: icalendar.Event) -> list[tuple[str, str, str]]:
    """(name, address, answer) of each attendee."""
    raw = event.get("ATTENDEE")
    values = raw if isinstance(raw, list) else [raw] if raw is not None else []
    people = []
    for a in values:
        params = getattr(a, "params", {})
        address = str(a).removeprefix("mailto:").removeprefix("MAILTO:")
        people.append((str(params.get("CN", address)), address, str(params.get("PARTSTAT", ""))))
    return people


def _organizer_of(event: icalendar.Event) -> tuple[str, str]:
    """(name, address) of the organizer, or empty strings."""
    org = event.get("ORGANIZER")
    if org is None:
        return "", ""
    address = str(org).removeprefix("mailto:").removeprefix("MAILTO:")
    return str(getattr(org, "params", {}).get("CN", address)), address


def _organizer(event: icalendar.Event) -> str:
    return _organizer_of(event)[0]


def _fmt(when: datetime, tz: ZoneInfo) -> str:
    local = when.astimezone(tz)
    return f"{local:%Y-%m-%d %a %H:%M} {local.tzname()}"


def _span(start: datetime, end: datetime, tz: ZoneInfo, all_day: bool) -> str:
    if all_day:
        last = end - timedelta(days=1)
        days = f"{start:%Y-%m-%d %a}" + (f" to {last:%Y-%m-%d %a}" if last > start else "")
        return f"{days} (all day)"
    a, b = start.astimezone(tz), end.astimezone(tz)
    if a.date() == b.date():
        text = f"{a:%Y-%m-%d %a %H:%M}-{b:%H:%M} {a.tzname()}"
    else:
        text = f"{_fmt(start, tz)} to {_fmt(end, tz)}"
    own = start.tzinfo
    if isinstance(own, ZoneInfo) and own.key != tz.key:
        text += f" ({start:%H:%M} {own.key})"
    return text


def _occurrence_line(calendars: list[str], event: icalendar.Event, tz: ZoneInfo) -> str:
    raw_start = event.get("DTSTART").dt
    all_day = not isinstance(raw_start, datetime)
    start = _as_datetime(raw_start, tz)
    end_prop = event.get("DTEND")
    end = _as_datetime(end_prop.dt, tz) if end_prop is not None else start
    line = f"{_span(start, end, tz, all_day)}  {event.get('SUMMARY', '(no title)')}"
    status = str(event.get("STATUS", "")).upper()
    if status == "CANCELLED":
        line += "  [CANCELLED]"
    elif status == "TENTATIVE":
        line += "  [tentative]"
    on = f"calendar{'s' if len(calendars) > 1 else ''} {', '.join(calendars)}"
    details = [on, f"uid {event.get('UID')}"]
    rid = event.get("RECURRENCE-ID")
    if rid is not None and _as_datetime(rid.dt, tz) != start:
        details.append(f"moved from {_fmt(_as_datetime(rid.dt, tz), tz)}")
    if event.get("LOCATION"):
        details.append(f"at {event.get('LOCATION')}")
    people = _people(event)
    if people:
        details.append(count(len(people), "attendee"))
    return line + "\n    " + "; ".join(details)


def _matches(event: icalendar.Event, query: str | None, attendee: str | None) -> bool:
    if query:
        text = " ".join(str(event.get(k, "")) for k in ("SUMMARY", "DESCRIPTION", "LOCATION"))
        if not all(w in text.lower() for w in query.lower().split()):
            return False
    if attendee:
        key = attendee.lower()
        who = [n.lower() for n, a, _ in _people(event)] + [a.lower() for _, a, _ in _people(event)]
        who.append(_organizer(event).lower())
        if not any(key in w for w in who):
            return False
    return True


def _occurrences(cal: _Calendar, start: datetime, end: datetime) -> list[icalendar.Event]:
    try:
        query = recurring_ical_events.of(cal.data)
        found = []
        for event in query.between(start, end):
            check_deadline()
            found.append(event)
            if len(found) > MAX_OCCURRENCES:
                raise ToolFailure(
                    FailureKind.invalid_argument,
                    f"more than {MAX_OCCURRENCES} occurrences in {cal.name} between "
                    f"{start:%Y-%m-%d} and {end:%Y-%m-%d}; ask for a shorter range",
                )
    except recurring_ical_events.InvalidCalendar as exc:
        raise ToolFailure(
            FailureKind.unreadable_file, f"{cal.path.name} has an invalid event: {exc}"
        ) from exc
    return found


@TOOLS.tool(read_only=True)
def cal_list_calendars(ws: Workspace) -> str:
    """List the calendars (calendar/*.ics) with their time zone, how many events and recurring
    meetings each holds, and the dates they span."""
    files = _calendar_files(ws)
    if not files:
        return "the calendar/ folder has no .ics files"
    lines = [count(len(files), "calendar")]
    for path in files:
        cal = _load(ws, path)
        events = [e for e in cal.data.walk("VEVENT") if e.get("RECURRENCE-ID") is None]
        recurring = sum(1 for e in events if e.get("RRULE") is not None)
        starts = sorted(
            _as_datetime(e.get("DTSTART").dt, ZoneInfo("UTC")).date()
            for e in events
            if e.get("DTSTART") is not None
        )
        span = f"from {starts[0]} to {starts[-1]}" if starts else "on no date"
        lines.append(
            f"- {cal.name} ({ws.rel(path)}): {count(len(events), 'event')} "
            f"({recurring} recurring) starting {span}; time zone {cal.zone or 'not set'}"
        )
    return "\n".join(lines)


@TOOLS.tool(read_only=True)
def cal_events(
    ws: Workspace,
    start: WhenArg,
    end: WhenArg,
    calendar: CalendarArg = None,
    query: Annotated[
        str | None,
        Field(
            description="Words that must all appear in the title, description "
            "or location (case-insensitive)."
        ),
    ] = None,
    attendee: Annotated[
        str | None,
        Field(
            description="Only events this person organizes or attends (part of a name or address)."
        ),
    ] = None,
    timezone: ZoneArg = None,
    offset: Annotated[int, Field(ge=0, description="Skip this many occurrences.")] = 0,
    limit: Annotated[int, Field(ge=1, le=500, description="Most occurrences to list.")] = 100,
) -> str:
    """List the events between start and end (an end date counts in full), earliest first,
    with recurring meetings expanded into their occurrences: moved ones where they now are,
    skipped dates left out, cancelled ones marked. Each shows its uid for cal_get_event."""
    cals = _calendars(ws, calendar)
    tz = _zone(timezone, cals)
    lo, hi = _parse_when(start, tz), _parse_when(end, tz, end=True)
    if hi <= lo:
        raise ToolFailure(FailureKind.invalid_argument, f"end {end!r} is not after start {start!r}")
    # A meeting on several people's calendars is one line naming every calendar it is on.
    seen: dict[tuple[str, datetime], tuple[list[str], icalendar.Event]] = {}
    for cal in cals:
        for event in _occurrences(cal, lo, hi):
            if _matches(event, query, attendee):
                when = _as_datetime(event.get("DTSTART").dt, tz)
                names, _ = seen.setdefault((str(event.get("UID")), when), ([], event))
                names.append(cal.name)
    found = sorted((when, uid, names, e) for (uid, when), (names, e) in seen.items())
    head = f"{count(len(found), 'event')} from {_fmt(lo, tz)} to {_fmt(hi, tz)} (times in {tz.key})"
    if not found:
        return head
    window = found[offset : offset + limit]
    if offset + limit < len(found):
        head += (
            f"; showing {offset + 1}-{offset + len(window)}, continue with offset={offset + limit}"
        )
    return "\n".join([head] + [_occurrence_line(names, e, tz) for _, _, names, e in window])


def _masters(cals: list[_Calendar], uid: str) -> list[tuple[_Calendar, icalendar.Event]]:
    return [
        (cal, e)
        for cal in cals
        for e in cal.data.walk("VEVENT")
        if isinstance(e, icalendar.Event) and str(e.get("UID")) == uid
    ]


@TOOLS.tool(read_only=True)
def cal_get_event(
    ws: Workspace,
    uid: Annotated[str, Field(description="The event's uid, as cal_events shows it.")],
    calendar: CalendarArg = None,
    timezone: ZoneArg = None,
) -> str:
    """Everything about one event: title, time, organizer, each attendee's answer, location,
    description, how it recurs, the dates skipped and the occurrences moved or cancelled, and
    how many times it was changed."""
    cals = _calendars(ws, calendar)
    tz = _zone(timezone, cals)
    parts = _masters(cals, uid.strip())
    if not parts:
        raise ToolFailure(FailureKind.not_found, f"no event with uid {uid!r}")
    master_cal, master = next(
        ((c, e) for c, e in parts if e.get("RECURRENCE-ID") is None), parts[0]
    )
    lines = [str(master.get("SUMMARY", "(no title)")), f"uid {uid}; calendar {master_cal.name}"]
    raw_start = master.get("DTSTART").dt
    start = _as_datetime(raw_start, tz)
    end_prop = master.get("DTEND")
    end = _as_datetime(end_prop.dt, tz) if end_prop is not None else start
    lines.append("when: " + _span(start, end, tz, not isinstance(raw_start, datetime)))
    if master.get("STATUS"):
        lines.append(f"status: {str(master.get('STATUS')).lower()}")
    if _organizer(master):
        lines.append(f"organizer: {_organizer(master)}")
    for name, address, answer in _people(master):
        lines.append(f"attendee: {name} <{address}>" + (f" ({answer.lower()})" if answer else ""))
    for key in ("LOCATION", "DESCRIPTION"):
        if master.get(key):
            lines.append(f"{key.lower()}: {master.get(key)}")
    rule = master.get("RRULE")
    if rule is not None:
        lines.append(f"repeats: {rule.to_ical().decode()}")
        skipped = []
        raw = master.get("EXDATE")
        for ex in raw if isinstance(raw, list) else [raw] if raw is not None else []:
            skipped += [_fmt(_as_datetime(d.dt, tz), tz) for d in ex.dts]
        if skipped:
            lines.append("skipped: " + ", ".join(skipped))
    for _, e in parts:
        rid = e.get("RECURRENCE-ID")
        if rid is None:
            continue
        was = _fmt(_as_datetime(rid.dt, tz), tz)
        if str(e.get("STATUS", "")).upper() == "CANCELLED":
            lines.append(f"cancelled: the occurrence of {was}")
        else:
            now = _as_datetime(e.get("DTSTART").dt, tz)
            lines.append(
                f"moved: the occurrence of {was} to {_fmt(now, tz)} ({e.get('SUMMARY', '')})"
            )
    changes = master.get("SEQUENCE")
    if changes:
        lines.append(f"changed {count(int(changes), 'time')} since it was first sent")
    return "\n".join(lines)


@TOOLS.tool(read_only=True)
def cal_free_slots(
    ws: Workspace,
    people: Annotated[
        list[str],
        Field(min_length=1, description="Names or addresses of everyone who must be free."),
    ],
    start: WhenArg,
    end: WhenArg,
    duration_minutes: Annotated[
        int, Field(ge=5, le=24 * 60, description="The shortest slot worth listing.")
    ] = 30,
    day_start: Annotated[str, Field(description="Working day start, 'HH:MM'.")] = "09:00",
    day_end: Annotated[str, Field(description="Working day end, 'HH:MM'.")] = "17:00",
    timezone: ZoneArg = None,
) -> str:
    """Times between start and end, on weekdays within working hours, when none of `people` has
    an event they organize or have not declined, that are at least duration_minutes long."""
    cals = _calendars(ws, None)
    tz = _zone(timezone, cals)
    lo, hi = _parse_when(start, tz), _parse_when(end, tz, end=True)
    try:
        open_t, close_t = time.fromisoformat(day_start), time.fromisoformat(day_end)
    except ValueError as exc:
        raise ToolFailure(
            FailureKind.invalid_argument, "day_start/day_end must be 'HH:MM'"
        ) from exc
    busy: list[tuple[datetime, datetime]] = []
    expanded = [(c, _occurrences(c, lo, hi)) for c in cals]
    # A person is their name and their address, wherever either appears.
    names: dict[str, set[str]] = {}
    for _, events in expanded:
        for event in events:
            for name, address, _ in [*_people(event), (*_organizer_of(event), "")]:
                if name or address:
                    both = {name.lower(), address.lower()} - {""}
                    for key in both:
                        names.setdefault(key, set()).update(both)
    wanted = []
    for person in people:
        key = person.strip().lower()
        wanted.append({key} | {i for k, ids in names.items() if key in k for i in ids})
    for cal, events in expanded:
        for event in events:
            if str(event.get("STATUS", "")).upper() == "CANCELLED":
                continue
            org_name, org_address = _organizer_of(event)
            who = {cal.name.lower(), org_name.lower(), org_address.lower()} - {""}
            for name, address, answer in _people(event):
                if answer.upper() != "DECLINED":
                    who |= {name.lower(), address.lower()}
            if any(ids & who for ids in wanted):
                s = _as_datetime(event.get("DTSTART").dt, tz)
                e_prop = event.get("DTEND")
                busy.append((s, _as_datetime(e_prop.dt, tz) if e_prop is not None else s))
    busy.sort()
    slots: list[tuple[datetime, datetime]] = []
    day = lo.astimezone(tz).date()
    while datetime.combine(day, time(), tz) < hi:
        if day.weekday() < 5:
            cursor = max(datetime.combine(day, open_t, tz), lo)
            close = min(datetime.combine(day, close_t, tz), hi)
            for s, e in busy:
                if e <= cursor or s >= close:
                    continue
                if s - cursor >= timedelta(minutes=duration_minutes):
                    slots.append((cursor, s))
                cursor = max(cursor, e)
            if close - cursor >= timedelta(minutes=duration_minutes):
                slots.append((cursor, close))
        day += timedelta(days=1)
    head = (
        f"{count(len(slots), 'free slot')} of at least {duration_minutes} min for "
        f"{', '.join(people)} (times in {tz.key})"
    )
    return "\n".join([head] + [f"- {_fmt(s, tz)} to {e.astimezone(tz):%H:%M}" for s, e in slots])


@TOOLS.tool(read_only=False)
def cal_create_event(
    ws: Workspace,
    calendar: Annotated[str, Field(description="The calendar to add it to (name or file).")],
    summary: Annotated[str, Field(min_length=1, description="The event's title.")],
    start: Annotated[str, Field(description="Local start, '2025-03-14 09:30'.")],
    end: Annotated[str, Field(description="Local end, '2025-03-14 10:00'.")],
    timezone: ZoneArg = None,
    attendees: Annotated[
        list[str] | None, Field(description="Attendees as 'Name <address>' or an address.")
    ] = None,
    location: Annotated[str, Field(description="Room, address or call link.")] = "",
    description: Annotated[str, Field(description="The invitation's text.")] = "",
) -> str:
    """Add an event to a calendar file; returns its uid."""
    (cal,) = _calendars(ws, calendar)
    tz = _zone(timezone, [cal])
    lo, hi = _parse_when(start, tz), _parse_when(end, tz)
    if hi <= lo:
        raise ToolFailure(FailureKind.invalid_argument, f"end {end!r} is not after start {start!r}")
    existing = {str(e.get("UID")) for e in cal.data.walk("VEVENT")}
    n = len(existing) + 1
    while f"agent-{n}@{cal.path.stem}" in existing:
        n += 1
    uid = f"agent-{n}@{cal.path.stem}"
    event = icalendar.Event()
    event.add("UID", uid)
    event.add("DTSTAMP", datetime.now(ZoneInfo("UTC")).replace(microsecond=0))
    event.add("DTSTART", lo)
    event.add("DTEND", hi)
    event.add("SUMMARY", summary)
    if location:
        event.add("LOCATION", location)
    if description:
        event.add("DESCRIPTION", description)
    for person in attendees or []:
        m = re.fullmatch(r"\s*(.*?)\s*<([^>]+)>\s*", person)
        name, address = (m.group(1), m.group(2)) if m else (person.strip(), person.strip())
        attendee = icalendar.vCalAddress(f"mailto:{address}")
        attendee.params["CN"] = name
        attendee.params["PARTSTAT"] = "NEEDS-ACTION"
        event.add("ATTENDEE", attendee, encode=False)
    cal.data.add_component(event)
    body = cal.data.to_ical()
    ws.atomic_save(cal.path, lambda tmp: tmp.write_bytes(body))
    return (
        f"added {summary!r} on {_span(lo, hi, tz, False)} to {cal.name} "
        f"({ws.rel(cal.path)}); uid {uid}"
    )


if __name__ == "__main__":
    from bureau.tools.cli import main

    main(default_groups=["calendar"])
