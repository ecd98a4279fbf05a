"""`gpucost serve`'s OfferBook cache (flows/web.py `OfferBooks`) follows the warehouse file.

The server keeps one `answers.estimate.OfferBook` per warehouse version (path, inode, mtime_ns,
size). Each test serves a warehouse of its own (a copy of the replay warehouse), asks
/api/estimate, changes the warehouse as a refresh would (a price moves, an offer appears, the
file is replaced by another) and asks again: the answer must be what `gpucost estimate --json`
(which keeps no book) prints for the changed warehouse, and the book must have been read again.
An unchanged file must reuse the book. Reads are counted by a spy on `OfferBook.read`, never
inferred from timing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from answers.estimate import OfferBook
from flows import web
from tests.replay_warehouse import replay_only_home
from tests.served import hub_cache, running, serve_env
from tests.test_serve import cli_json, same_rows
from warehouse import db

# every priced offer is answered (--all, a large --top): a changed offer cannot hide off-screen
JOB = {"model": "Llama-3.1-8B", "method": "qlora", "tokens": "50M", "show_all": "true", "top": "1000"}
JOB_ARGS = ["--model", "Llama-3.1-8B", "--method", "qlora", "--tokens", "50M", "--all", "--top", "1000"]
KEY = ("provider", "instance_type", "region", "zone", "pricing_type")
# an offer's price in each unit marts.gpu_offers holds it (a refresh moves them together)
PRICE_COLUMNS = (
    "price_usd_per_hour",
    "price_per_hour",
    "price_usd_per_gpu_hour",
    "price_usd_per_vram_gb_hour",
)
WHERE_KEY = " and ".join(f"{k} is not distinct from ?" for k in KEY)


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replay_only_home(tmp_path_factory.getbasetemp()) / "replay" / "warehouse.duckdb"


@pytest.fixture
def home(replay: Path, tmp_path: Path) -> Path:
    """A replay-only GPUCOST_HOME of this test's own: the tests write to its warehouse."""
    (tmp_path / "home" / "replay").mkdir(parents=True)
    shutil.copyfile(replay, tmp_path / "home" / "replay" / "warehouse.duckdb")
    return tmp_path / "home"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """One entry per `OfferBook.read`: each time the server reads a book of the warehouse."""
    calls: list[object] = []
    original = OfferBook.read

    def counted(con: Any) -> OfferBook:
        calls.append(con)
        return original(con)

    monkeypatch.setattr(OfferBook, "read", staticmethod(counted))
    return calls


@pytest.fixture
def client(home: Path, tmp_path: Path) -> Iterator[httpx.Client]:
    with (
        serve_env(home, hub_cache(tmp_path / "hub")),
        running(web.create_app()) as url,
        httpx.Client(base_url=url, timeout=60, trust_env=False) as http,
    ):
        yield http


def estimate(client: httpx.Client) -> list[dict[str, Any]]:
    answer = client.get("/api/estimate", params=JOB)
    assert answer.status_code == 200, answer.text
    offers = answer.json()["offers"]
    assert offers
    return offers


def key_of(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[k] for k in KEY)


def write(path: Path, sql: str, params: list[Any]) -> None:
    """A write to the warehouse between requests, as `gpucost refresh` makes (read-write, then closed)."""
    con = db.connect(path)
    try:
        con.execute(sql, params)
    finally:
        con.close()


def scale_price(path: Path, key: tuple[Any, ...], factor: float) -> None:
    moved = ", ".join(f"{c} = {c} * {factor}" for c in PRICE_COLUMNS)
    write(path, f"update marts.gpu_offers set {moved} where {WHERE_KEY}", list(key))


def warehouse(home: Path) -> Path:
    return home / "replay" / "warehouse.duckdb"


def test_an_unchanged_warehouse_reuses_its_book_whatever_the_job(client, reads):
    estimate(client)
    assert len(reads) == 1
    estimate(client)
    other = client.get("/api/estimate", params={"model": "Qwen2.5-7B", "method": "lora", "spot": "true"})
    assert other.status_code == 200, other.text
    # three answers, two jobs, spot and on-demand: one read of the warehouse's offers
    assert len(reads) == 1


def test_a_kept_book_answers_without_opening_the_warehouse(client, reads, monkeypatch):
    """Between changes of the file, a question reads the book's copy, never the file: opening it
    cost ~30 ms a question, and held its lock against a refresh."""
    estimate(client)
    opened: list[object] = []
    original = db.open_reader

    def counted(*args: Any, **kwargs: Any) -> Any:
        opened.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(db, "open_reader", counted)
    estimate(client)
    other = client.get("/api/estimate", params={"model": "Qwen2.5-7B", "method": "lora", "offer_gpu": "H100"})
    assert other.status_code == 200, other.text
    assert opened == [] and len(reads) == 1


def test_questions_are_answered_while_a_refresh_holds_the_file(client, reads, home):
    """A refresh holds the warehouse read-write for minutes before it writes: DuckDB lets no
    other process open the file then. The kept book still answers, as it was, until the file
    changes (the refresh's writes), and equals the CLI's answer of the same file."""
    before = estimate(client)
    path = warehouse(home)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        with pytest.raises(db.WarehouseBusy):  # nobody else can open it now
            db.connect(path, read_only=True).close()
        during = estimate(client)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    assert len(reads) == 1
    same_rows([dict(row) for row in during], before)  # the same answer, but for the prices' age
    same_rows(during, cli_json("estimate", *JOB_ARGS))


# a process holding the warehouse read-write (as `gpucost refresh` does) until its stdin closes
HOLD_WRITE_LOCK = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("holding", flush=True)
sys.stdin.read()
con.close()
"""


def test_a_price_change_is_in_the_next_answer(client, reads, home):
    before = estimate(client)
    cheapest = before[0]
    # the cheapest offer gets ten times dearer: it can no longer rank first
    scale_price(warehouse(home), key_of(cheapest), 10.0)
    after = estimate(client)
    assert len(reads) == 2  # the file changed: the book was read again
    assert key_of(after[0]) != key_of(cheapest)
    moved = next(o for o in after if key_of(o) == key_of(cheapest))
    assert moved["compute_usd"] == pytest.approx(10 * cheapest["compute_usd"], rel=1e-6)
    same_rows(after, cli_json("estimate", *JOB_ARGS))  # what the command, with no cache, prints now
    estimate(client)
    assert len(reads) == 2  # and that book is kept until the next change


def test_a_new_offer_is_in_the_next_answer(client, reads, home):
    before = estimate(client)
    cheapest = before[0]
    assert all(o["instance_type"] != "gpucost-test-new" for o in before)
    # a new offer of the same box at half the price (a refresh found it): it ranks first
    halved = ", ".join(f"{c} * 0.5 as {c}" for c in PRICE_COLUMNS)
    write(
        warehouse(home),
        f"insert into marts.gpu_offers select * replace ('gpucost-test-new' as instance_type, {halved}) "
        f"from marts.gpu_offers where {WHERE_KEY}",
        list(key_of(cheapest)),
    )
    after = estimate(client)
    assert len(reads) == 2
    assert after[0]["instance_type"] == "gpucost-test-new"
    assert after[0]["compute_usd"] == pytest.approx(0.5 * cheapest["compute_usd"], rel=1e-6)
    same_rows(after, cli_json("estimate", *JOB_ARGS))


def test_a_replaced_file_of_the_same_size_and_mtime_is_read_again(client, reads, home, tmp_path):
    path = warehouse(home)
    first = estimate(client)
    cheapest = key_of(first[0])
    # two changed copies made the same way (the same update, other factors): the same size
    copies = [tmp_path / "a.duckdb", tmp_path / "b.duckdb"]
    for copy, factor in zip(copies, (3.0, 7.0), strict=True):
        shutil.copyfile(path, copy)
        scale_price(copy, cheapest, factor)
    copies[0].replace(path)
    by_a = estimate(client)
    assert len(reads) == 2
    version_a = web.warehouse_version()
    a_stat = path.stat()
    # the second copy replaces the first (a new inode, as a refresh that renames its build into
    # place makes), stamped with the first one's mtime: only the inode tells them apart
    copies[1].replace(path)
    os.utime(path, ns=(a_stat.st_atime_ns, a_stat.st_mtime_ns))
    version_b = web.warehouse_version()
    assert version_b[0] == version_a[0] and version_b[2:] == version_a[2:], (version_a, version_b)
    assert version_b[1] != version_a[1]
    by_b = estimate(client)
    assert len(reads) == 3
    row_a = next(o for o in by_a if key_of(o) == cheapest)
    row_b = next(o for o in by_b if key_of(o) == cheapest)
    assert row_b["compute_usd"] == pytest.approx(7 / 3 * row_a["compute_usd"], rel=1e-6)
    same_rows(by_b, cli_json("estimate", *JOB_ARGS))


# -- OfferBooks itself: which version changes read a book again ---------------------------------

VERSION = ("/home/warehouse.duckdb", 11, 1_700_000_000_000_000_000, 4096)


@pytest.mark.parametrize("part", [0, 1, 2, 3])
def test_any_part_of_the_version_changing_reads_the_book_again(part):
    books = web.OfferBooks()
    reads: list[str] = []

    def read(label: str):  # what OfferBooks._read returns: a book and the file's data banner
        return lambda: reads.append(label) or (object(), f"banner of {label}")

    first = books.kept(VERSION, read("con-1"))  # type: ignore[arg-type]
    assert books.kept(VERSION, read("con-2")) is first  # type: ignore[arg-type]
    assert reads == ["con-1"] and first[1] == "banner of con-1"
    changed = list(VERSION)
    changed[part] = "/other/warehouse.duckdb" if part == 0 else VERSION[part] + 1  # type: ignore[operator]
    second = books.kept(tuple(changed), read("con-3"))  # type: ignore[arg-type]
    assert second is not first and reads == ["con-1", "con-3"]
    # the newer version is the one kept, with its own banner: asked again with it, no read
    assert books.kept(tuple(changed), read("con-4")) is second  # type: ignore[arg-type]
    assert reads == ["con-1", "con-3"] and second[1] == "banner of con-3"
