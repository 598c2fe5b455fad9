"""Foreign tenants for the ownership tests: records that benchd must never touch.

Ids are global in the store, so the hostile tenants hold exactly what a
benchd fixture carries (DESIGN §2): the tiny fixture's *ids* with other
contents, its *contents* under other ids, and *both* — once in ``global``
(the target API's own eval script seeds there) and once in another
``client_id``. An owner may also hold records in benchd's namespace (a
namespace benchd must refuse, or adopt and write beside). A snapshot is the
full ``GET /export`` of each tenant, inactive records included, so a move,
an overwrite or a soft delete all show.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from drill_support import TINY_MEMORIES

OTHER = "globex-media"
TEXT = dict(TINY_MEMORIES)
_IDS = [mid for mid, _ in TINY_MEMORIES]

FOREIGN: list[dict[str, Any]] = [
    # (a) a fixture id, another text
    {"id": _IDS[0], "content": "Payroll closes on the twenty-fifth.", "client_id": "global"},
    # (b) a fixture text, another id
    {"id": "g-crystal", "content": TEXT[_IDS[1]], "type": "fact", "client_id": "global"},
    # (c) both: the fixture's own record, as the API's eval script seeds it
    {"id": _IDS[2], "content": TEXT[_IDS[2]], "type": "fact", "client_id": "global"},
    {"id": _IDS[3], "content": "The ski lift opens at nine.", "client_id": OTHER},
    {"id": "x-bread", "content": TEXT[_IDS[4]], "type": "fact", "client_id": OTHER},
    {"id": _IDS[5], "content": TEXT[_IDS[5]], "type": "fact", "client_id": OTHER},
]


def owner_records(namespace: str) -> list[dict[str, Any]]:
    """What an owner keeps in ``namespace``: one record with a fixture text, one without."""
    return [
        {"id": "own-ferry", "content": TEXT[_IDS[0]], "type": "fact", "client_id": namespace},
        {"id": "own-note", "content": "Owner's own note about invoices.", "client_id": namespace},
    ]


def plant(url: str, key: str, namespace: str | None = None) -> None:
    """Write the foreign tenants (and, with ``namespace``, an owner's records there)."""
    records = FOREIGN + (owner_records(namespace) if namespace else [])
    reply = httpx.post(
        url + "/export/import",
        json={"data": records, "operator_approved": True},
        headers={"x-api-key": key},
        timeout=10,
    )
    assert reply.json() == {"imported": len(records), "skipped": 0, "errors": 0}, reply.text


def export(url: str, key: str, client_id: str) -> list[dict[str, Any]]:
    """Every record of a tenant, inactive ones too."""
    reply = httpx.get(
        url + "/export",
        params={"client_id": client_id, "active_only": "false", "limit": 5000},
        headers={"x-api-key": key},
        timeout=10,
    )
    reply.raise_for_status()
    return list(reply.json()["memories"])


def snapshot(url: str, key: str, namespace: str) -> str:
    """The foreign tenants' bytes: ``global``, the other tenant, and non-benchd records in
    benchd's namespace."""
    parts = {c: export(url, key, c) for c in ("global", OTHER)}
    parts[namespace] = [r for r in export(url, key, namespace) if not benchds(r)]
    return json.dumps(parts, sort_keys=True)


def benchds(record: dict[str, Any]) -> bool:
    """Whether a listed record is one benchd wrote (its id, or its mark where ids are assigned)."""
    metadata = record.get("metadata") or {}
    return str(record["id"]).startswith("benchd") or "benchd_owner" in metadata
