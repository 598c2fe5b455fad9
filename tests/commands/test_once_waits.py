"""What once does after its cycle is bounded and said: the lease hand-back waits a few
seconds at most (an unreleased lease expires by itself), and a noticeable wait is told."""

from __future__ import annotations

from types import SimpleNamespace

import anyio
import pytest

from benchd.commands import once

pytestmark = pytest.mark.anyio


class _SlowHandBack:
    """A runner whose store answers the hand-back with a long Retry-After: its
    release_lease waits out all the time it is given, as ProbeRunner's does."""

    def __init__(self) -> None:
        self.probe = SimpleNamespace(name="slow")
        self.given: list[float] = []

    async def release_lease(self, grace_s: float) -> None:
        self.given.append(grace_s)
        await anyio.sleep(grace_s)


async def test_the_hand_back_is_cut_to_a_few_seconds_and_the_wait_is_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(once, "HAND_BACK_S", 0.6)
    runner = _SlowHandBack()
    with anyio.fail_after(30):  # a probe timeout of 60 s is not waited out
        await once.hand_back(runner, 60.0)  # type: ignore[arg-type]
    assert runner.given == [0.6]
    err = capsys.readouterr().err
    assert "benchd: probe slow:" in err and "s after the cycle handing the lease back" in err


async def test_a_quick_hand_back_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    runner = _SlowHandBack()
    await once.hand_back(runner, 0.0)  # type: ignore[arg-type]
    assert runner.given == [0.0]
    assert capsys.readouterr().err == ""
