"""answers.estimate.OfferBook, finetune_marts.PricedOffers.only and warehouse.db's concurrent readers.

The book is what `gpucost serve` keeps of one warehouse whatever the job; a ranking through it
must be the ranking `gpucost estimate` computes without one (only the offers its filters pass,
read, worded and priced per command), for every filter: that equality is what lets the server
cache at all. The readers' test is the one that failed before `open_reader` connected and
sandboxed under one lock: two requests at once shared a DuckDB instance, and the second's
`set global TimeZone` met the first's locked configuration (HTTP 500).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from answers import estimate
from answers.estimate import OfferBook, billing_rules, rank_offers
from answers.prices import OFFER_KEY, OfferFilters, current_offers
from finetune import FinetuneJob, Job
from tests.replay_warehouse import replay_only_home
from warehouse import db
from warehouse.finetune_marts import PricedOffers, priced_offers, read_offers
from warehouse.seed_models import load_models

MODELS = load_models()
KEY = list(OFFER_KEY)
LORA_8B = FinetuneJob("adhoc", "meta-llama/Llama-3.1-8B", Job(method="lora"), 50_000_000, 1.0)
# a 70B full fine-tune spans nodes where it may: max_nodes changes which offers can hold it
FULL_70B = FinetuneJob("adhoc", "meta-llama/Llama-3.1-70B", Job(method="full"), 20_000_000, 1.0)


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The replay warehouse a fresh clone builds (`gpucost refresh --replay tests/replay`)."""
    return replay_only_home(tmp_path_factory.getbasetemp()) / "replay" / "warehouse.duckdb"


@pytest.fixture(scope="module")
def con(replay: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    reader = db.connect(replay, read_only=True)
    yield reader
    reader.close()


@pytest.fixture(scope="module")
def book(con: duckdb.DuckDBPyConnection) -> OfferBook:
    return OfferBook.read(con)


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows in one order whatever order a join left them in (every column, nulls last)."""
    return frame.sort(frame.columns, nulls_last=True)


def _busiest(con: duckdb.DuckDBPyConnection, column: str, n: int) -> tuple[str, ...]:
    """The `n` values of `column` with the most current offers (the replay's own names)."""
    rows = con.execute(
        f"select {column} from marts.gpu_offers group by 1 order by count(*) desc, 1 limit {n}"
    ).fetchall()
    return tuple(str(v) for (v,) in rows)


# -- PricedOffers.only --------------------------------------------------------------------------


def test_only_keeps_exactly_the_offers_whose_key_is_given(con, book):
    priced = book.priced(con, 1)
    providers = _busiest(con, "provider", 2)
    wanted = book.offers.filter(pl.col("provider").is_in(providers))
    kept = priced.only(wanted)
    assert kept.frame.height > 0
    assert set(kept.frame["provider"].unique()) == set(providers)
    # every given key that was priced is kept, and nothing else (zone is null for most offers:
    # a null zone matches a null zone, as the offer key means)
    expected = priced.frame.join(wanted.select(KEY), on=KEY, how="semi", nulls_equal=True)
    assert_frame_equal(_sorted(kept.frame), _sorted(expected))
    assert kept.frame["zone"].null_count() > 0
    # the hardware table is the book's, whatever is kept: plans look hardware up by key
    assert kept.machines is priced.machines


def test_only_with_no_keys_keeps_nothing_and_with_every_key_keeps_everything(con, book):
    priced = book.priced(con, 1)
    assert priced.only(book.offers.head(0)).frame.height == 0
    assert_frame_equal(_sorted(priced.only(book.offers).frame), _sorted(priced.frame))


def test_only_matches_on_the_whole_key_not_a_part_of_it(con, book):
    priced = book.priced(con, 1)
    first = priced.frame.row(0, named=True)
    # the same provider, instance and region under another pricing type is another offer
    schema = {k: priced.frame.schema[k] for k in KEY}
    other = pl.DataFrame([{**{k: first[k] for k in KEY}, "pricing_type": "no-such-pricing"}], schema=schema)
    assert priced.only(other).frame.height == 0
    same = pl.DataFrame([{k: first[k] for k in KEY}], schema=schema)
    assert (
        priced.only(same).frame.height
        == priced.frame.join(same, on=KEY, how="semi", nulls_equal=True).height
        >= 1
    )


# -- OfferBook ----------------------------------------------------------------------------------


def test_the_book_holds_every_offer_and_a_rule_per_current_offer(con, book):
    assert_frame_equal(_sorted(book.offers), _sorted(read_offers(con)))
    everything = OfferFilters(include_unavailable=True, include_stale=True)
    current = current_offers(con, everything, datetime.now(UTC))
    assert book.rules.columns == [*KEY, "billing_rule"]
    assert book.rules.height == current.height
    assert_frame_equal(_sorted(book.rules), _sorted(billing_rules(current)))


def test_priced_is_read_once_per_node_limit(con, monkeypatch):
    calls: list[int | None] = []

    def counting(con: duckdb.DuckDBPyConnection, offers: pl.DataFrame, **kw: Any) -> PricedOffers:
        calls.append(kw["max_nodes"])
        return priced_offers(con, offers, **kw)

    monkeypatch.setattr(estimate, "priced_offers", counting)
    fresh = OfferBook.read(con)
    one = fresh.priced(con, 1)
    assert fresh.priced(con, 1) is one  # the same limit: kept, not priced again
    two = fresh.priced(con, 2)
    assert calls == [1, 2] and two is not one
    # priced with every offer and no GPU cap, as the no-book path prices (max_gpus=None)
    assert_frame_equal(
        _sorted(one.frame), _sorted(priced_offers(con, read_offers(con), max_nodes=1, max_gpus=None).frame)
    )


def test_the_book_keeps_at_most_keep_limits_node_limits_dropping_the_oldest(con, monkeypatch):
    calls: list[int] = []
    small = PricedOffers(pl.DataFrame(), {})

    def counting(con: duckdb.DuckDBPyConnection, offers: pl.DataFrame, **kw: Any) -> PricedOffers:
        calls.append(kw["max_nodes"])
        return small  # what is priced does not matter here, only what is kept

    monkeypatch.setattr(estimate, "priced_offers", counting)
    fresh = OfferBook(pl.DataFrame(), pl.DataFrame())
    limits = range(1, OfferBook.KEEP_LIMITS + 2)
    for n in limits:
        fresh.priced(con, n)
    assert calls == list(limits)
    # the newest KEEP_LIMITS are held; the first one was dropped and is priced again when asked
    for n in list(limits)[1:]:
        fresh.priced(con, n)
    assert calls == list(limits)
    fresh.priced(con, 1)
    assert calls == [*limits, 1]


def _at_once(count: int, work: Callable[[threading.Barrier], Any]) -> list[Any]:
    """What `count` threads return from `work`, each handed one barrier to wait at, so that
    they do the part after it at the same instant; every thread's exception fails the test."""
    results: list[Any] = []
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def run() -> None:
        try:
            results.append(work(start))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == [] and len(results) == count
    return results


def test_threads_asking_one_book_at_once_get_the_same_priced_offers(replay, book):
    def ask(start: threading.Barrier) -> PricedOffers:
        start.wait(30)  # the four open the warehouse at the same instant
        reader, _ = db.open_reader(db.Settings(home=replay.parent.parent))
        try:
            return book.priced(reader, 3)
        finally:
            reader.close()

    results = _at_once(4, ask)
    for other in results[1:]:
        assert_frame_equal(_sorted(other.frame), _sorted(results[0].frame))


# -- the book's ranking is the command's --------------------------------------------------------


def _ranked(con, fjob, filters, *, spot, max_nodes, book):
    now = datetime(2026, 12, 2, 12, tzinfo=UTC)  # one instant for both: price ages are equal
    return rank_offers(
        con, fjob, MODELS[fjob.model_id], filters, now, spot=spot, max_nodes=max_nodes, book=book
    )


def _filters(con: duckdb.DuckDBPyConnection, name: str) -> OfferFilters:
    if name == "provider":
        return OfferFilters(providers=_busiest(con, "provider", 2), gpu_option="--offer-gpu")
    if name == "gpu":
        return OfferFilters(gpus=("H100", "A100"), gpu_option="--offer-gpu")
    if name == "provider+gpu+vram":
        return OfferFilters(providers=_busiest(con, "provider", 4), gpus=("H100",), min_vram_gb=80)
    return OfferFilters()


CASES = [
    ("none", LORA_8B, False, 1),
    ("provider", LORA_8B, False, 1),
    ("gpu", LORA_8B, False, 1),
    ("none", LORA_8B, True, 1),  # spot: the spot offers join the ranking
    ("gpu", LORA_8B, True, 1),
    ("none", FULL_70B, False, 2),  # max_nodes: offers priced under another node limit
    ("provider+gpu+vram", LORA_8B, True, 2),
]


@pytest.mark.parametrize(("filter_name", "fjob", "spot", "max_nodes"), CASES)
def test_a_ranking_through_the_book_equals_the_commands_without_one(
    con, book, filter_name, fjob, spot, max_nodes
):
    filters = _filters(con, filter_name)
    without = _ranked(con, fjob, filters, spot=spot, max_nodes=max_nodes, book=None)
    through = _ranked(con, fjob, filters, spot=spot, max_nodes=max_nodes, book=book)
    # as the server asks: on a connection of the book's copy, the warehouse file not open
    with book.reader() as copy:
        served = _ranked(copy, fjob, filters, spot=spot, max_nodes=max_nodes, book=book)
    assert without.rows.height > 0
    for ranking in (through, served):
        for part in ("rows", "marked", "details"):
            assert_frame_equal(
                _sorted(getattr(ranking, part)), _sorted(getattr(without, part)), check_exact=True
            )
        assert_frame_equal(_sorted(ranking.excluded()), _sorted(without.excluded()))
        assert_frame_equal(ranking.shown(10, False), without.shown(10, False))
    if spot:
        assert through.rows["is_spot"].any()
    else:
        assert not through.rows["is_spot"].any()
    if filters.providers:
        assert set(through.rows["provider"].unique()) <= set(filters.providers)


REFUSALS = [
    # a real provider at a price no offer has: nothing current matches
    ("loosen a filter", LORA_8B, 1, "cheap"),
    # a 70B full fine-tune over up to 4 H100 nodes of these providers: some offers could hold it
    # across nodes, but none states its inter-node fabric, so none can be priced
    ("none can be priced", FULL_70B, 4, "provider+gpu+vram"),
]


@pytest.mark.parametrize(("says", "fjob", "max_nodes", "filter_name"), REFUSALS)
def test_what_cannot_be_ranked_is_said_through_the_book_as_without(
    con, book, says, fjob, max_nodes, filter_name
):
    from answers import AnswerError

    if filter_name == "cheap":
        filters = OfferFilters(providers=_busiest(con, "provider", 1), max_usd_per_gpu_hour=0.0001)
    else:
        filters = _filters(con, filter_name)
    messages = []
    for with_book in (None, book):
        with pytest.raises(AnswerError) as refused:
            _ranked(con, fjob, filters, spot=True, max_nodes=max_nodes, book=with_book)
        messages.append(str(refused.value))
    with book.reader() as copy, pytest.raises(AnswerError) as refused:
        _ranked(copy, fjob, filters, spot=True, max_nodes=max_nodes, book=book)
    messages.append(str(refused.value))
    assert messages[0] == messages[1] == messages[2] and says in messages[0]


def test_threads_ranking_on_the_books_copy_at_once_get_the_commands_answer(con, book):
    """`gpucost serve` answers two estimates at once, each on a connection of the book's copy:
    each gets the ranking the command computes alone."""
    filters = _filters(con, "gpu")
    without = _ranked(con, LORA_8B, filters, spot=True, max_nodes=1, book=None)

    def ask(start: threading.Barrier) -> Any:
        with book.reader() as copy:
            start.wait(30)
            return _ranked(copy, LORA_8B, filters, spot=True, max_nodes=1, book=book)

    for ranking in _at_once(4, ask):
        assert_frame_equal(_sorted(ranking.marked), _sorted(without.marked), check_exact=True)


@pytest.mark.parametrize("filter_name", ["none", "provider", "gpu", "provider+gpu+vram"])
@pytest.mark.parametrize("spot", [None, True, False])
def test_the_books_current_offers_are_the_warehouses(con, book, filter_name, spot):
    """What a question reads of the book (filtered in polars, aged at its own instant) is what
    `current_offers` reads of the file (filtered and aged in SQL): rows, order, columns, types."""
    filters = dataclasses.replace(_filters(con, filter_name), spot=spot)
    now = datetime(2026, 12, 2, 12, tzinfo=UTC)
    from_file = current_offers(con, filters, now)
    assert from_file.height > 0
    assert_frame_equal(book.current_offers(filters, now), from_file, check_exact=True)


def test_a_book_made_without_a_copy_says_so_when_asked_for_one():
    bare = OfferBook(pl.DataFrame(), pl.DataFrame())
    with pytest.raises(ValueError, match="no copy"), bare.reader():
        pass
    with pytest.raises(ValueError, match="no current offers"):
        bare.current_offers(OfferFilters(), datetime.now(UTC))


def test_the_books_copy_is_the_warehouse_as_it_was_when_read(replay, tmp_path):
    """The copy is the book's own: a change to the file after the read is not in it (the server
    reads a new book when the file's version changes, tests/test_serve_cache.py)."""
    path = tmp_path / "warehouse.duckdb"
    path.write_bytes(replay.read_bytes())
    reader = db.connect(path, read_only=True)
    try:
        kept = OfferBook.read(reader)
    finally:
        reader.close()
    with kept.reader() as copy:
        kept_sum = copy.execute(PRICE_SUM).fetchall()
    writer = db.connect(path)
    try:
        before = writer.execute(PRICE_SUM).fetchall()
        writer.execute("update marts.gpu_offers set price_usd_per_hour = price_usd_per_hour * 2")
        assert writer.execute(PRICE_SUM).fetchall() != before
    finally:
        writer.close()
    with kept.reader() as copy:
        assert copy.execute(PRICE_SUM).fetchall() == kept_sum == before


# -- warehouse.db: readers at once, a writer between --------------------------------------------

READERS = 8
PRICE_SUM = "select round(sum(price_usd_per_hour), 6) from marts.gpu_offers"


def _readers_at_once(settings: db.Settings) -> list[Any]:
    """What READERS threads read, each opening the warehouse read-only at the same instant."""
    answers: list[Any] = []
    errors: list[BaseException] = []
    start = threading.Barrier(READERS)

    def read() -> None:
        try:
            start.wait(30)
            reader, banner = db.open_reader(settings)
            try:
                # sandboxed as open_reader promises, whichever thread sandboxed the instance
                assert reader.execute("select current_setting('enable_external_access')").fetchone() == (
                    False,
                )
                answers.append((reader.execute(PRICE_SUM).fetchone(), banner))
            finally:
                reader.close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(READERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [], errors
    assert len(answers) == READERS
    return answers


WRITER = """
import sys
import duckdb
con = duckdb.connect(sys.argv[1])
con.execute("update marts.gpu_offers set price_usd_per_hour = price_usd_per_hour * 2")
con.close()
"""


def test_readers_at_once_and_a_writer_between_read_consistent_answers(replay, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    path = home / "warehouse.duckdb"
    path.write_bytes(replay.read_bytes())  # a live warehouse of our own: this test writes to it
    settings = db.Settings(home=home)
    assert db.reader_path(settings) == path
    first = _readers_at_once(settings)
    assert len(set(first)) == 1  # every reader read the same warehouse
    (total,), _ = first[0]
    # the writer is another process, as `gpucost refresh` is; it opens once the readers closed
    subprocess.run([sys.executable, "-c", WRITER, str(path)], check=True, timeout=120)
    second = _readers_at_once(settings)
    assert len(set(second)) == 1
    (doubled,), _ = second[0]
    assert doubled == pytest.approx(2 * total, rel=1e-9)
