"""Date words in a query become a ``created_at`` window, as the target API does.

Recognised (first match wins, in this order): "yesterday", "today",
"N days/weeks/months/years ago", "this week/month/year", "last
week/month/year", "recent(ly)" (the last 14 days) and "in <Month>" (the most
recent such month not after the reference date). Windows are computed in UTC
against ``reference_date`` when given, else now.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["TimeWindow", "resolve_temporal"]

_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH_RE = "|".join(_MONTHS + [m[:3] for m in _MONTHS])
_AGO = re.compile(r"\b(\d{1,4})\s+(day|week|month|year)s?\s+ago\b")
_THIS = re.compile(r"\bthis\s+(week|month|year)\b")
_LAST = re.compile(r"\blast\s+(week|month|year)\b")
_IN_MONTH = re.compile(rf"\bin\s+({_MONTH_RE})\b")


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """An inclusive ``created_at`` window and the rule that produced it."""

    since: datetime
    until: datetime
    pattern: str


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int) -> datetime:
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    return datetime(year, month, 1, tzinfo=UTC)


def _ago(ref: datetime, amount: int, unit: str) -> TimeWindow:
    if unit in ("day", "week"):
        days, slack = (amount, 2) if unit == "day" else (amount * 7, 5)
        centre = ref - timedelta(days=days)
        return TimeWindow(centre - timedelta(days=slack), centre + timedelta(days=slack), "ago")
    if unit == "month":
        start = _month_start(ref.year, ref.month - amount)
        end = _month_start(start.year, start.month + 1) - timedelta(microseconds=1)
        return TimeWindow(start, end, "ago")
    start = datetime(ref.year - amount, 1, 1, tzinfo=UTC)
    return TimeWindow(
        start, datetime(ref.year - amount + 1, 1, 1, tzinfo=UTC) - timedelta(microseconds=1), "ago"
    )


def _this(ref: datetime, unit: str) -> TimeWindow:
    if unit == "week":
        start = _day(ref) - timedelta(days=ref.weekday())
    elif unit == "month":
        start = _day(ref).replace(day=1)
    else:
        start = datetime(ref.year, 1, 1, tzinfo=UTC)
    return TimeWindow(start, ref, "this_period")


def _last(ref: datetime, unit: str) -> TimeWindow:
    if unit == "week":
        return TimeWindow(ref - timedelta(days=14), ref, "last_period")
    if unit == "month":
        start = _month_start(ref.year, ref.month - 1)
        end = _day(ref).replace(day=1) - timedelta(microseconds=1)
        return TimeWindow(start - timedelta(days=5), end + timedelta(days=5), "last_period")
    start = datetime(ref.year - 1, 1, 1, tzinfo=UTC)
    return TimeWindow(
        start, datetime(ref.year, 1, 1, tzinfo=UTC) - timedelta(microseconds=1), "last_period"
    )


def _in_month(ref: datetime, name: str) -> TimeWindow:
    month = next(i for i, full in enumerate(_MONTHS, 1) if full.startswith(name))
    start = _month_start(ref.year, month)
    if start > ref:
        start = _month_start(ref.year - 1, month)
    end = _month_start(start.year, start.month + 1) - timedelta(microseconds=1)
    return TimeWindow(start, end, "month")


def resolve_temporal(query: str, reference: datetime | None = None) -> TimeWindow | None:
    """The ``created_at`` window the query's date words ask for, or None."""
    ref = (reference or datetime.now(UTC)).astimezone(UTC)
    text = query.lower()
    if re.search(r"\byesterday\b", text):
        start = _day(ref) - timedelta(days=1)
        return TimeWindow(start, start + timedelta(days=1, microseconds=-1), "yesterday")
    if re.search(r"\btoday\b", text):
        return TimeWindow(_day(ref), ref, "today")
    if match := _AGO.search(text):
        return _ago(ref, int(match.group(1)), match.group(2))
    if match := _THIS.search(text):
        return _this(ref, match.group(1))
    if match := _LAST.search(text):
        return _last(ref, match.group(1))
    if re.search(r"\brecent(ly)?\b", text):
        return TimeWindow(ref - timedelta(days=14), ref, "recent")
    if match := _IN_MONTH.search(text):
        return _in_month(ref, match.group(1))
    return None
