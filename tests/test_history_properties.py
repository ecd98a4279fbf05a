"""Property tests of the SCD2 price history: whatever sequence of batches arrives, the history stays
consistent (hypothesis draws the batches from a small universe of keys and prices)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.factories import make_offer
from warehouse.db import connect, migrate
from warehouse.load import Guards, load_offers

# Every batch is accepted as it stands: this property is about the history, not the guards.
ACCEPT_ALL = Guards(accept_shrink=True, accept_changes=True)

T0 = datetime(2026, 11, 29, tzinfo=UTC)
KEYS = [
    (t, r, p)
    for t in ("p5.48xlarge", "g6.xlarge")
    for r in ("us-east-1", "eu-west-1")
    for p in ("on_demand", "spot")
]
PRICES = (1.0, 2.0, 3.5)

batches = st.lists(
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(PRICES), min_size=1, max_size=len(KEYS)),
    min_size=1,
    max_size=6,
)


def _offers(batch: dict) -> list:
    return [
        make_offer(t, price, region=r, pricing_type=p, price_source="market" if p == "spot" else "list")
        for (t, r, p), price in batch.items()
    ]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches)
def test_history_stays_consistent_for_any_sequence_of_batches(sequence: list[dict]) -> None:
    con = connect(":memory:")
    migrate(con)
    for step, batch in enumerate(sequence):
        now = T0 + timedelta(hours=step)
        result = load_offers(con, f"r{step}", "aws", _offers(batch), now=now, guards=ACCEPT_ALL)
        assert result.status == "ok"
        current = {
            (t, r, p): price
            for t, r, p, price in con.execute(
                "select instance_type, region, pricing_type, price_per_hour from core.offer_prices "
                "where valid_to is null"
            ).fetchall()
        }
        # the current prices are exactly this successful batch
        assert current == batch
        # one current row per key, and intervals per key never overlap and leave no gap
        rows = con.execute(
            "select instance_type, region, pricing_type, valid_from, valid_to from core.offer_prices "
            "order by instance_type, region, pricing_type, valid_from"
        ).fetchall()
        by_key: dict = {}
        for t, r, p, start, end in rows:
            by_key.setdefault((t, r, p), []).append((start, end))
        for intervals in by_key.values():
            assert sum(end is None for _, end in intervals) <= 1
            for (_, end), (next_start, _) in pairwise(intervals):
                assert end is not None and end <= next_start
        # an identical rerun changes nothing
        total = con.execute("select count(*) from core.offer_prices").fetchall()
        again = load_offers(con, f"r{step}b", "aws", _offers(batch), now=now + timedelta(minutes=30))
        assert (again.rows_inserted, again.rows_closed) == (0, 0)
        assert con.execute("select count(*) from core.offer_prices").fetchall() == total
    con.close()
