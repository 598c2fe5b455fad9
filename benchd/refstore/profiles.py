"""Behaviour profiles: ``default`` (the designed contract) and ``zengram-4.3`` (the real server).

The default profile answers the target API's contract as designed. The
``zengram-4.3`` profile adds what the real server (v4.3) was measured doing
(DESIGN §2, "More of the real server"), for tests that must see benchd cope
with it:

- imports pause 100 ms after every 10 records (not before the first), so a
  500-record import takes about 5 s; ``import_pacing`` scales the pause
  (0.1 = 10 ms per 10 records) so tests stay short;
- ``GET /export`` pages newest first by a ``(created_at, id)`` cursor whose
  time is cut to milliseconds: records sharing one millisecond are all
  listed (the id breaks the tie), but a record dated *below* the
  millisecond, in the boundary millisecond and older than the page's last
  record, falls between the two pages;
- there is no ``GET /memory/{id}``: 404 ``Cannot GET /memory/...`` (HTML,
  as Express answers an unknown route);
- facts and statuses are also upserted into structured tables keyed across
  tenants: a fact by its ``key`` (else its content hash), a status by its
  ``subject`` (else ``unknown``), moving the row into the writer's
  ``client_id``; ``GET /memory/query`` lists them;
- ``/health`` carries no model label (nor retriever, nor fault list);
- fact and status records lose confidence with age: × 0.98 per day since
  ``last_accessed_at`` (else ``created_at``), read on the store's clock.

Both profiles answer a repeated DELETE with ``already_inactive`` and a
``message`` (no ``deleted`` field), and keep the date filter on the zero-hit
retry, as the real server does.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile", "profile_named"]

PROFILES = ("default", "zengram-4.3")
DEFAULT_PROFILE = "default"
IMPORT_CHUNK = 10
IMPORT_PAUSE_S = 0.1
DECAY_PER_DAY = 0.98
DECAY_TYPES = frozenset({"fact", "status"})


@dataclass(frozen=True, slots=True)
class Profile:
    """What a profile turns on; the default profile turns nothing on."""

    name: str = DEFAULT_PROFILE
    import_pause_s: float = 0.0  # after every IMPORT_CHUNK records of one import
    ms_cursor: bool = False  # GET /export pages by a millisecond created_at cursor
    health_model: bool = True  # /health names the model, retriever and faults
    get_by_id: bool = True  # GET /memory/{id} exists
    structured: bool = False  # facts/statuses tables keyed across tenants
    decay_per_day: float | None = None  # confidence × this per day of age (fact/status)


def profile_named(name: str, import_pacing: float = 1.0) -> Profile:
    """The profile called ``name``; ``import_pacing`` scales the real server's import pause."""
    if name == "zengram-4.3":
        return Profile(
            name=name,
            import_pause_s=IMPORT_PAUSE_S * import_pacing,
            ms_cursor=True,
            health_model=False,
            get_by_id=False,
            structured=True,
            decay_per_day=DECAY_PER_DAY,
        )
    if name == DEFAULT_PROFILE:
        return Profile()
    raise ValueError(f"unknown profile '{name}': use one of {', '.join(PROFILES)}")
