"""A store's model label keeps enough of itself that the output path masks a key whole."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from benchd import redact
from benchd.kinds.http.config import HealthTemplate
from benchd.kinds.http.records import health_labels as http_health_labels
from benchd.kinds.zengram_wire import health_labels as zengram_health_labels

KEY = "sk-LIVE-0123456789abcdef0123456789ABCDEF"
# every offset around the adapters' old 200-character cut and the label's own 256
OFFSETS = [*range(180, 205), *range(230, 260)]


@pytest.fixture(autouse=True)
def registered() -> Iterator[None]:
    redact.clear_secrets()
    redact.register_secret(KEY)
    yield
    redact.clear_secrets()


def _no_window_of_the_key(shown: str) -> None:
    for i in range(len(KEY) - 3):
        assert KEY[i : i + 4] not in shown, (KEY[i : i + 4], shown)


@pytest.mark.parametrize("offset", OFFSETS)
def test_a_key_in_a_zengram_model_label_never_shows_in_its_metric_label(offset: int) -> None:
    model, version = zengram_health_labels({"model": "~" * offset + KEY + " tail", "version": KEY})
    _no_window_of_the_key(redact.label(model))
    _no_window_of_the_key(redact.label(version))


@pytest.mark.parametrize("offset", OFFSETS)
def test_a_key_in_an_http_model_label_never_shows_in_its_metric_label(offset: int) -> None:
    health = HealthTemplate(path="/health", model="model", version="version")
    data = {"model": "~" * offset + KEY + " tail", "version": "1"}
    model, _ = http_health_labels(health, "GET /health", data)
    _no_window_of_the_key(redact.label(model))
