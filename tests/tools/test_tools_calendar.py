"""Calendar tools over the fixture calendars: Dana's (New York) and Eli's (London), March 2025.

Between 9 and 30 March New York is on summer time and London is not, so London is 4 hours
ahead, 5 before: the listings must show each event where it really happens.
"""

from __future__ import annotations

from pathlib import Path

import icalendar
import pytest

from bureau.tools import calendar as cal
from bureau.tools.core import FailureKind, ToolFailure, Workspace


def test_list_calendars(ws: Workspace) -> None:
    assert cal.cal_list_calendars(ws).splitlines() == [
        "2 calendars",
        "- Dana Lee (calendar/dana-lee.ics): 5 events (2 recurring) starting from 2025-03-03 "
        "to 2025-03-20; time zone America/New_York",
        "- Eli Park (calendar/eli-park.ics): 2 events (0 recurring) starting from 2025-03-11 "
        "to 2025-03-13; time zone Europe/London",
    ]


def _titles(listing: str) -> list[str]:
    return [line for line in listing.splitlines()[1:] if not line.startswith("    ")]


def test_recurring_meetings_expand_with_skips_moves_and_cancellations(ws: Workspace) -> None:
    out = cal.cal_events(ws, "2025-03-03", "2025-03-19", calendar="Dana Lee")
    assert out.splitlines()[0] == (
        "7 events from 2025-03-03 Mon 00:00 EST to 2025-03-20 Thu 00:00 EDT "
        "(times in America/New_York)"
    )
    assert _titles(out) == [
        "2025-03-03 Mon 09:00-09:30 EST  Weekly deal sync",
        "2025-03-05 Wed 16:00-16:30 EST  1:1 Dana / Eli",
        "2025-03-11 Tue 14:00-14:30 EDT  Weekly deal sync",  # moved from Monday the 10th
        "2025-03-12 Wed 10:00-11:00 EDT  Board prep",
        "2025-03-12 Wed 16:00-16:30 EDT  1:1 Dana / Eli",
        "2025-03-13 Thu 11:00-12:00 EDT (15:00 Europe/London)  London call with counsel",
        "2025-03-19 Wed 16:00-16:30 EDT  1:1 Dana / Eli  [CANCELLED]",
    ]  # the 17th's sync is skipped
    assert "uid sync@acme; moved from 2025-03-10 Mon 09:00 EDT; at Room 4; 2 attendees" in out


def test_times_in_another_zone_and_all_day_events(ws: Workspace) -> None:
    out = cal.cal_events(ws, "2025-03-11", "2025-03-11", timezone="Europe/London")
    assert _titles(out) == [
        "2025-03-11 Tue 13:00-14:00 GMT  Vendor review",
        "2025-03-11 Tue 18:00-18:30 GMT (14:00 America/New_York)  Weekly deal sync",
    ]
    # An end date counts in full; an all-day event keeps its dates in any zone.
    offsite = cal.cal_events(ws, "2025-03-21", "2025-03-21", query="offsite")
    assert _titles(offsite) == ["2025-03-20 Thu to 2025-03-21 Fri (all day)  Offsite"]
    # A local time is read in the call's zone; an offset is kept.
    morning = cal.cal_events(ws, "2025-03-11 08:00", "2025-03-11T13:30+00:00")
    assert _titles(morning) == [
        "2025-03-11 Tue 09:00-10:00 EDT (13:00 Europe/London)  Vendor review"
    ]


def test_filters_and_paging(ws: Workspace) -> None:
    ann = cal.cal_events(ws, "2025-03-01", "2025-03-31", attendee="ann.roe")
    assert [t.split("  ")[1] for t in _titles(ann)] == ["Weekly deal sync"] * 2 + ["Board prep"] + [
        "Weekly deal sync"
    ] * 2
    assert _titles(cal.cal_events(ws, "2025-03-01", "2025-03-31", query="q1 BOARD")) == [
        "2025-03-12 Wed 10:00-11:00 EDT  Board prep"
    ]
    page = cal.cal_events(ws, "2025-03-01", "2025-04-30", limit=3, offset=3)
    assert "showing 4-6, continue with offset=6" in page.splitlines()[0]
    assert len(_titles(page)) == 3
    assert cal.cal_events(ws, "2025-06-01", "2025-06-30").startswith("0 events from")
    # A meeting on two calendars is listed once, naming both.
    both = cal.cal_events(ws, "2025-03-13", "2025-03-13").splitlines()
    assert both[0].startswith("1 event from")
    assert both[2] == "    calendars Dana Lee, Eli Park; uid counsel@acme; 1 attendee"


def test_get_event_tells_the_whole_story(ws: Workspace) -> None:
    assert cal.cal_get_event(ws, "sync@acme").splitlines() == [
        "Weekly deal sync",
        "uid sync@acme; calendar Dana Lee",
        "when: 2025-03-03 Mon 09:00-09:30 EST",
        "status: confirmed",
        "organizer: Dana Lee",
        "attendee: Eli Park <eli.park@vendor.example.com> (accepted)",
        "attendee: Ann Roe <ann.roe@acme.example.com> (declined)",
        "location: Room 4",
        "repeats: FREQ=WEEKLY;COUNT=6",
        "skipped: 2025-03-17 Mon 09:00 EDT",
        "moved: the occurrence of 2025-03-10 Mon 09:00 EDT to 2025-03-11 Tue 14:00 EDT "
        "(Weekly deal sync)",
        "changed 1 time since it was first sent",
    ]
    assert "cancelled: the occurrence of 2025-03-19 Wed 16:00 EDT" in cal.cal_get_event(
        ws, "1on1@acme"
    )
    with pytest.raises(ToolFailure) as info:
        cal.cal_get_event(ws, "nope@acme")
    assert info.value.kind == FailureKind.not_found


def test_free_slots_skip_declined_meetings_and_weekends(ws: Workspace) -> None:
    both = cal.cal_free_slots(
        ws, ["Dana", "eli.park@vendor.example.com"], "2025-03-11", "2025-03-11"
    )
    assert both.splitlines()[1:] == [
        "- 2025-03-11 Tue 10:00 EDT to 14:00",
        "- 2025-03-11 Tue 14:30 EDT to 17:00",
    ]  # Eli's vendor review (London) at 9, the moved sync at 14:00
    ann = cal.cal_free_slots(ws, ["Ann Roe"], "2025-03-08", "2025-03-10", duration_minutes=60)
    assert ann.splitlines()[1:] == ["- 2025-03-10 Mon 09:00 EDT to 17:00"]  # declined; weekend


def test_create_event_is_read_back_like_any_other(ws: Workspace, ws_root: Path) -> None:
    out = cal.cal_create_event(
        ws,
        "eli-park",
        "Signing call",
        "2025-03-14 10:00",
        "2025-03-14 10:45",
        attendees=["Dana Lee <dana.lee@acme.example.com>"],
        location="Zoom",
    )
    assert out == (
        "added 'Signing call' on 2025-03-14 Fri 10:00-10:45 GMT to Eli Park "
        "(calendar/eli-park.ics); uid agent-3@eli-park"
    )
    listed = cal.cal_events(ws, "2025-03-14", "2025-03-14", attendee="dana.lee")
    assert "2025-03-14 Fri 06:00-06:45 EDT (10:00 Europe/London)  Signing call" in listed
    data = icalendar.Calendar.from_ical((ws_root / "calendar" / "eli-park.ics").read_bytes())
    assert [str(e["SUMMARY"]) for e in data.walk("VEVENT")] == [
        "Vendor review",
        "London call with counsel",
        "Signing call",
    ]


def test_bad_input_is_named(ws: Workspace, ws_root: Path) -> None:
    cases = [
        (lambda: cal.cal_events(ws, "March 3", "2025-03-04"), "cannot read 'March 3'"),
        (lambda: cal.cal_events(ws, "2025-03-04", "2025-03-03"), "is not after start"),
        (lambda: cal.cal_events(ws, "2025-03-03", "2025-03-04", timezone="Mars/Base"), "Mars"),
        (lambda: cal.cal_events(ws, "2025-03-03", "2025-03-04", calendar="bob"), "calendars: "),
    ]
    for call, text in cases:
        with pytest.raises(ToolFailure) as info:
            call()
        assert text in str(info.value), info.value
    (ws_root / "calendar" / "broken.ics").write_text("BEGIN:VCALENDAR\nnot a line\n")
    with pytest.raises(ToolFailure) as info:
        cal.cal_list_calendars(ws)
    assert info.value.kind == FailureKind.unreadable_file and "calendar/broken.ics" in str(
        info.value
    )
