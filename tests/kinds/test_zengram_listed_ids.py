"""The listing's per-record shortcuts say what the general functions say: the id a listed
record was written as (``owned_id``) and its ``created_at`` in epoch seconds (the aware
moment's ``timestamp()``), over every id and date shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from benchd.kinds import zengram_wire as wire
from benchd.kinds.zengram import _written_as
from benchd.store.owned import owned_id, owned_prefix

NAMESPACES = ["benchd-eval", "n" * 64, "n" * 65]  # the last: a hashed prefix
fixture_ids = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["#hashed", "#", "", "x" * 140]),
    st.integers(),
    st.builds(lambda n: "x" * n, st.integers(90, 130)),  # around the id length cap
)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(NAMESPACES), fixture_ids, st.data())
def test_the_id_written_as_is_owned_id_for_any_listed_id(
    namespace: str, fid: object, data: st.DataObject
) -> None:
    prefix = owned_prefix(namespace)
    text = fid if type(fid) is str else str(fid)
    derived = owned_id(namespace, text)
    sid = data.draw(
        st.sampled_from(
            [derived, prefix + text, derived + "x", text, prefix + "#" + text, "srv-1", prefix]
        )
    )
    assert _written_as(namespace, prefix, sid, fid) == derived


def _reference_epoch_s(stamp: str) -> float | None:
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return wire.epoch_s(stamp)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


moments = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), allow_imaginary=True
)
offsets = st.one_of(
    st.none(), st.builds(lambda m: timezone(timedelta(minutes=m)), st.integers(-1439, 1439))
)


@settings(max_examples=400, deadline=None)
@given(moments, offsets, st.sampled_from(["auto", "seconds", "milliseconds", "microseconds"]))
def test_a_listed_date_is_the_seconds_its_aware_moment_gives(
    moment: datetime, tz: timezone | None, spec: str
) -> None:
    stamp = moment.replace(tzinfo=tz).isoformat(timespec=spec)
    assert wire.epoch_s(stamp) == _reference_epoch_s(stamp)
    if tz is None:
        assert wire.epoch_s(stamp + "Z") == _reference_epoch_s(stamp + "Z")
