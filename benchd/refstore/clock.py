"""The reference store's clock: system time, or a moment a test set, running on from there.

Everything in the store that reads "now" reads it here: the ``created_at`` an
import fills, the date words a search resolves without ``reference_date``,
confidence decay, ``exported_at`` and ``/health``'s timestamp. Setting the
clock (``POST /admin/config {"clock": "2026-07-01T00:00:00Z"}`` or
``benchd refstore --clock``) is how a test moves the store a month ahead
without waiting a month; ``null`` goes back to system time.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

__all__ = ["StoreClock", "iso"]


def iso(moment: datetime) -> str:
    """ISO 8601 in UTC with milliseconds, like JavaScript's ``toISOString``."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class StoreClock:
    """System time plus an offset; the offset is what ``set`` changes."""

    def __init__(self) -> None:
        self._offset_s = 0.0

    def now(self) -> datetime:
        return datetime.now(UTC) + timedelta(seconds=self._offset_s)

    def iso_now(self) -> str:
        return iso(self.now())

    @property
    def shifted(self) -> bool:
        return self._offset_s != 0.0

    def set(self, moment: datetime | None) -> None:
        """Make ``now()`` read ``moment`` from this instant on (None: system time again)."""
        self._offset_s = 0.0 if moment is None else moment.timestamp() - time.time()
