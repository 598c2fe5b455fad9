"""A call is run once more only when its store's handles were forgotten meanwhile."""

from __future__ import annotations

import pytest

from benchd.errors import TargetProtocolError, TargetUnreachable
from benchd.store.handles import Handles, fresh_after_restart

pytestmark = pytest.mark.anyio


class FakeIO:
    """A store whose cached id goes stale once the server 'restarts'."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures  # raised by the next calls, in order
        self.cached: str | None = "old-id"
        self.calls = 0
        self.handles = Handles("fake store", self._forget)

    async def _forget(self) -> None:
        self.cached = None

    @fresh_after_restart
    async def page(self, cursor: str) -> str:
        self.calls += 1
        if self.failures:
            error = self.failures.pop(0)
            if isinstance(error, TargetUnreachable):
                await self.handles.stale(str(error))  # as a kind notes it where it translates
            raise error
        return f"{cursor}:{self.cached or 'looked up again'}"


async def test_a_stale_handle_is_forgotten_and_the_call_runs_once_more() -> None:
    io = FakeIO([TargetUnreachable("connection refused")])
    assert await io.page("c") == "c:looked up again"
    assert io.calls == 2 and io.handles.resets == 1


async def test_any_other_error_is_not_retried() -> None:
    io = FakeIO([TargetProtocolError("bad answer")])
    with pytest.raises(TargetProtocolError):
        await io.page("c")
    assert io.calls == 1 and io.cached == "old-id"


async def test_a_store_still_down_fails_after_one_more_call() -> None:
    io = FakeIO([TargetUnreachable("refused"), TargetUnreachable("refused again"), ValueError()])
    with pytest.raises(TargetUnreachable, match="refused again"):
        await io.page("c")
    assert io.calls == 2 and io.handles.resets == 2


async def test_one_log_line_an_outage(capsys: pytest.CaptureFixture[str]) -> None:
    from benchd.logging import configure_logging

    configure_logging("info", json=True)
    io = FakeIO([TargetUnreachable("down")] * 4)
    for _ in range(2):  # two cycles while the store is down: 4 stale calls
        with pytest.raises(TargetUnreachable):
            await io.page("c")
    assert await io.page("c") == "c:looked up again"  # back
    io.failures = [TargetUnreachable("down again")]
    assert await io.page("c") == "c:looked up again"
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "store handles reset" in ln]
    assert len(lines) == 2 and "down again" in lines[1]
