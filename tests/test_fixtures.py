"""Fixture loading and validation: the target API's format, benchd's extensions, every problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchd.fixtures import load_fixture

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
ZENGRAM_SMOKE = SHARED / "fixtures-external" / "zengram-smoke.json"


@pytest.mark.skipif(not ZENGRAM_SMOKE.exists(), reason="../shared/fixtures-external absent")
def test_target_api_fixture_loads_unchanged() -> None:
    fixture = load_fixture(ZENGRAM_SMOKE)
    assert len(fixture.memories) == 34
    assert len(fixture.queries) == 12
    assert fixture.name == "zengram-smoke"
