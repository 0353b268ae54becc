"""Reading and comparing the values agents write: numbers, text, dates and lists of names.

Agents write answers the way people do: "$2,450,000", "2.45m", "(1,200)", "March 5, 2027",
"the Acme Corp.". A criterion compares the meaning of such a value with the rubric's expected
value, so this module turns free-form numbers into floats, text into a normalized form and date
spellings into dates. Every comparison returns an `Outcome` whose reason is short enough for a
results table (at most `MAX_REASON_CHARS`).
"""

from __future__ import annotations

import math
import re
import unicodedata
from datetime import date, datetime
from typing import NamedTuple

MAX_REASON_CHARS = 200


class Outcome(NamedTuple):
    """The verdict of one check and a short human-readable reason."""

    passed: bool
    reason: str


def clip(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """Shorten `text` to at most `limit` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show(value: object, limit: int = 60) -> str:
    """A short quoted rendering of an answer value for a reason string."""
    text = repr(value) if isinstance(value, str) else str(value)
    return clip(text, limit)


def format_number(value: float) -> str:
    """Render a number compactly: 2450000, 2450, 0.001, 1e-06."""
    return f"{value:.10g}"


# ---------------------------------------------------------------------------- numbers

_MINUS_SIGNS = str.maketrans({"\u2212": "-", "\u2012": "-", "\u2013": "-", "\ufe63": "-"})
_CURRENCY_CODES = "USD|EUR|GBP|JPY|CHF|CAD|AUD|NZD|CNY|RMB|INR|SEK|NOK|DKK|SGD|HKD|MXN|BRL|ZAR"
_CURRENCY = rf"(?:US\$|[$€£¥₹]|\b(?:{_CURRENCY_CODES})\b)"
_SCALES = {
    "k": 1e3,
    "thousand": 1e3,
    "m": 1e6,
    "mm": 1e6,
    "mn": 1e6,
    "mln": 1e6,
    "million": 1e6,
    "b": 1e9,
    "bn": 1e9,
    "bln": 1e9,
    "billion": 1e9,
    "tn": 1e12,
    "trillion": 1e12,
}
_SCALE_ALTERNATIVES = "|".join(sorted(_SCALES, key=len, reverse=True))
_NUMBER_RE = re.compile(
    rf"""
    (?P<sign>[+-])?\s*
    (?:{_CURRENCY}\s*)?
    (?P<sign2>[+-])?\s*
    (?P<digits>
        (?:\d{{1,3}}(?P<sep>[, ])\d{{3}}(?:(?P=sep)\d{{3}})*|\d+)(?:\.\d*)?
        | \.\d+
    )
    (?P<exponent>e[+-]?\d+)?
    \s*(?:(?P<scale>{_SCALE_ALTERNATIVES})\b)?
    \s*(?P<percent>%|percent)?
    \s*(?:{_CURRENCY})?
    """,
    re.VERBOSE | re.IGNORECASE,
)


class NumberParseError(ValueError):
    """An answer value that cannot be read as a number; the message is a short reason."""


def parse_number(value: object) -> float:
    """Read a JSON number or a human-written number string as a float.

    Accepted strings include "$2,450,000", "2,450,000 USD", "12.5%" (read as 12.5: the percent
    sign is dropped, the number is taken as written), "2.45m", "1.2bn", "3k" (k/m/mm/bn/b and
    the spelled-out words scale the number), "(1,200)" (accounting negative) and "−3.4"
    (unicode minus). Thousands separators must group digits by three; "1,2345" is rejected
    rather than guessed. Booleans, lists, objects, null and non-finite numbers raise
    `NumberParseError`.
    """
    if isinstance(value, bool) or value is None or not isinstance(value, int | float | str):
        kind = "null" if value is None else type(value).__name__
        raise NumberParseError(f"expected a number, got a {kind}: {show(value)}")
    number = float(value) if isinstance(value, int | float) else _parse_number_text(value)
    if not math.isfinite(number):
        raise NumberParseError(f"expected a finite number, got {show(value)}")
    return number


def _parse_number_text(raw: str) -> float:
    text = unicodedata.normalize("NFKC", raw).translate(_MINUS_SIGNS).strip()
    in_parentheses = len(text) > 2 and text[0] == "(" and text[-1] == ")"
    if in_parentheses:
        text = text[1:-1].strip()
    match = _NUMBER_RE.fullmatch(text)
    if match is None:
        raise NumberParseError(f"could not read {show(raw)} as a number")
    signs = [s for s in (match["sign"], match["sign2"]) if s]
    if len(signs) > 1 or (signs and in_parentheses):
        raise NumberParseError(f"could not read {show(raw)} as a number: more than one sign")
    digits = match["digits"].replace(match["sep"] or ",", "")
    number = float(digits + (match["exponent"] or ""))
    if match["scale"]:
        number *= _SCALES[match["scale"].lower()]
    if in_parentheses or signs == ["-"]:
        number = -number
    return number


def compare_number(value: object, expected: float, rel_tol: float, abs_tol: float) -> Outcome:
    """Pass iff `value` parses to v with |v - expected| <= max(abs_tol, rel_tol * |expected|)."""
    tolerance = max(abs_tol, rel_tol * abs(expected))
    wanted = f"{format_number(expected)} ±{format_number(tolerance)}"
    try:
        number = parse_number(value)
    except NumberParseError as exc:
        return Outcome(False, clip(f"expected {wanted}; {exc}"))
    got = format_number(number)
    if isinstance(value, str):
        got = f"{show(value, 40)} = {got}"
    if abs(number - expected) <= tolerance:
        return Outcome(True, clip(f"got {got} (expected {wanted})"))
    return Outcome(False, clip(f"expected {wanted}, got {got}"))


# ---------------------------------------------------------------------------- text

# Dropped outright so that "O'Brien" == "OBrien" and "U.S." == "US"; other punctuation
# becomes a space so that "Acme-Corp" == "Acme Corp".
_DELETED_PUNCTUATION = frozenset("'’‘ʼ`.")
_NUMBER_PUNCTUATION = frozenset(".,:/-")


def normalize_text(text: str) -> str:
    """Normalize text for comparison.

    NFKC, casefold, punctuation removed (apostrophes and periods deleted, other punctuation
    turned into spaces) except between two digits ("2,450.5", "2027-03-05" survive), whitespace
    collapsed, and a leading "the" dropped from multi-word text.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    chars: list[str] = []
    for i, ch in enumerate(folded):
        if not unicodedata.category(ch).startswith("P") or _between_digits(folded, i):
            chars.append(ch)
        elif ch not in _DELETED_PUNCTUATION:
            chars.append(" ")
    words = "".join(chars).split()
    if len(words) > 1 and words[0] == "the":
        words = words[1:]
    return " ".join(words)


def normalize_label(text: str) -> str:
    """A statement's label as written ("Serve notice by:"): NFKC, casefold, whitespace collapsed,
    punctuation kept, so "peer set:" matches a statement and not a sentence about the peer set."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _between_digits(text: str, i: int) -> bool:
    return (
        text[i] in _NUMBER_PUNCTUATION
        and 0 < i < len(text) - 1
        and text[i - 1].isdigit()
        and text[i + 1].isdigit()
    )


_ISO_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ORDINAL_RE = re.compile(r"(?<=\d)(?:st|nd|rd|th)\b", re.IGNORECASE)
_DATE_FORMATS = (
    "%Y-%m-%d",
    "%Y/%m/%d",
    "%m/%d/%Y",
    "%B %d, %Y",
    "%B %d %Y",
    "%b %d, %Y",
    "%b %d %Y",
    "%d %B %Y",
    "%d %B, %Y",
    "%d %b %Y",
    "%A, %B %d, %Y",
)


def parse_date(text: str) -> date | None:
    """Read a date written as ISO, "2027/03/05", US "03/05/2027", "March 5th, 2027",
    "5 Mar 2027" and similar; None if no format fits."""
    cleaned = _ORDINAL_RE.sub("", text.strip()).replace(".", "")
    cleaned = " ".join(cleaned.split())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt).date()
        except ValueError:
            continue
    return None


def iso_date(text: str) -> date | None:
    """The date an expected value stands for if it is an ISO YYYY-MM-DD date, else None."""
    if not _ISO_DATE_RE.fullmatch(text.strip()):
        return None
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        return None


def as_text(value: object) -> str | None:
    """An answer value as text: strings as is, numbers and dates rendered, anything else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, datetime):
        return value.date().isoformat() if value.time() == datetime.min.time() else str(value)
    if isinstance(value, date):
        return value.isoformat()
    return None


def compare_text(
    value: object, expected: str, mode: str = "normalized", aliases: tuple[str, ...] = ()
) -> Outcome:
    """Compare an answer with the expected text and its aliases.

    `exact` compares stripped strings; `normalized` compares `normalize_text` forms. If
    `expected` is an ISO date, any spelling `parse_date` understands passes in either mode.
    """
    text = as_text(value)
    if text is None:
        return Outcome(False, clip(f"expected text {show(expected)}, got {show(value)}"))
    candidates = (expected, *aliases)
    if mode == "exact":
        matched = text.strip() in {c.strip() for c in candidates}
    else:
        matched = normalize_text(text) in {normalize_text(c) for c in candidates}
    if matched:
        return Outcome(True, clip(f"got {show(text)}"))
    wanted_date = iso_date(expected)
    if wanted_date is not None and parse_date(text) == wanted_date:
        return Outcome(True, clip(f"got {show(text)} = {wanted_date.isoformat()}"))
    also = f" (or {len(aliases)} aliases)" if aliases else ""
    return Outcome(False, clip(f"expected {show(expected)}{also} ({mode}), got {show(text)}"))


def compare_cell(value: object, expected: float | str, rel_tol: float, abs_tol: float) -> Outcome:
    """Compare a spreadsheet or table cell: numbers with tolerances, text normalized."""
    if value is None or value == "":
        return Outcome(False, "cell is empty")
    if isinstance(expected, str):
        return compare_text(value, expected)
    return compare_number(value, expected, rel_tol, abs_tol)


# ---------------------------------------------------------------------------- lists

_ENTITY_SEPARATOR_RE = re.compile(r"\s*[;,\n]\s*(?:and\s+)?|\s+and\s+", re.IGNORECASE)


def split_entities(value: object) -> list[str]:
    """The items of a list answer: a JSON list of strings/numbers, or one string split on
    commas, semicolons, newlines and " and "."""
    if isinstance(value, str):
        return [item for item in _ENTITY_SEPARATOR_RE.split(value.strip()) if item.strip()]
    if not isinstance(value, list):
        raise ValueError(f"expected a list, got {show(value)}")
    items: list[str] = []
    for i, item in enumerate(value):
        text = as_text(item)
        if text is None:
            raise ValueError(f"item {i} of the list is not text: {show(item, 40)}")
        items.append(text)
    return items


def compare_entities(value: object, expected: list[str], mode: str) -> Outcome:
    """Compare normalized sets: `exact` needs the same set, `superset` allows extra items."""
    try:
        items = split_entities(value)
    except ValueError as exc:
        return Outcome(False, clip(str(exc)))
    got = {normalize_text(item): item for item in items if normalize_text(item)}
    wanted = {normalize_text(item): item for item in expected}
    missing = [item for key, item in wanted.items() if key not in got]
    extra = [item for key, item in got.items() if key not in wanted]
    passed = not missing and (mode == "superset" or not extra)
    parts = []
    if missing:
        parts.append(f"missing {missing}")
    if extra:
        parts.append(f"extra {extra}" + (" (allowed)" if mode == "superset" else ""))
    if passed and not parts:
        return Outcome(True, f"all {len(wanted)} expected items, nothing else")
    summary = "; ".join(parts)
    if passed:
        summary = f"all {len(wanted)} expected items; {summary}"
    return Outcome(passed, clip(summary))
