"""The comparison page in a real browser: headless Chromium opens it from file:// with the network
cut, sorts and filters the table, changes the job picker, draws the charts; the assertions read the
DOM and compare it with the marts. Screenshots of every view go to a temp folder (and, when
GPUCOST_REPORT_SHOTS names a folder, are copied there too).

Needs Chromium (Debian's `chromium`; .ci/run installs it when missing); without one these tests
skip and say so.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from answers import report
from tests.cdp import Chromium, find_chromium
from tests.replay_warehouse import build_replay_warehouse
from warehouse.db import connect

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium to drive: install Debian's `chromium` (apt-get install chromium, as .ci/run does) "
    "or point GPUCOST_CHROMIUM at a Chromium or Chrome binary",
)
LAPTOP = (1366, 900)
PHONE = (390, 844)
READY = "document.body && document.body.dataset.ready === 'true'"
COMPARE_ROWS = """[...document.querySelectorAll('#compare-table tbody tr')].map(tr => ({
    gpu: tr.dataset.gpu, provider: tr.dataset.provider, spot: tr.dataset.spot === 'spot',
    region: tr.dataset.region, price: Number(tr.dataset.price)}))"""
FIT_ROWS = """[...document.querySelectorAll('#fit-table tbody tr')].map(tr => ({
    pricing: tr.dataset.pricing, cost: Number(tr.dataset.cost), offer: tr.cells[1].textContent}))"""


def column(key: str) -> str:
    """JS: the data-sort values of the comparison table's column `key`, top to bottom."""
    return (
        f"(() => {{ const i = [...document.querySelectorAll('#compare-table thead th')]"
        f".findIndex(th => th.dataset.key === '{key}');"
        " return [...document.querySelectorAll('#compare-table tbody tr')]"
        ".map(tr => tr.cells[i].dataset.sort); })()"
    )


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    home = tmp_path_factory.getbasetemp() / "report-home" / "replay"
    home.mkdir(parents=True, exist_ok=True)
    con = connect(build_replay_warehouse(home), read_only=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def page_url(replay: duckdb.DuckDBPyConnection, tmp_path_factory: pytest.TempPathFactory) -> str:
    return report.write_report(replay, tmp_path_factory.mktemp("site")).resolve().as_uri()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("report-shots")
    yield folder
    copy_to = os.environ.get("GPUCOST_REPORT_SHOTS")
    if copy_to:
        Path(copy_to).mkdir(parents=True, exist_ok=True)
        for shot in folder.glob("*.png"):
            shutil.copy2(shot, Path(copy_to) / shot.name)


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    assert CHROMIUM is not None
    with Chromium(CHROMIUM, width=LAPTOP[0], height=LAPTOP[1]) as chromium:
        chromium.offline()  # the page must work with no network at all
        yield chromium


def open_page(
    browser: Chromium, url: str, size: tuple[int, int] = LAPTOP, *, mobile: bool = False
) -> Chromium:
    browser.viewport(*size, mobile=mobile, scale=2 if mobile else 1)
    browser.open(url)
    browser.wait_for(READY)
    return browser


@pytest.fixture
def opened(browser: Chromium, page_url: str) -> Chromium:
    return open_page(browser, page_url)


def query(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[tuple[Any, ...]]:
    return con.execute(sql, params or []).fetchall()


def cheapest_groups(con: duckdb.DuckDBPyConnection, where: str = "true", params: list | None = None) -> dict:
    """(gpu, provider, is_spot) -> cheapest $/GPU-hour among the offers `where` selects (of those
    the provider does not mark unavailable: the page ranks rentable offers only)."""
    found = query(
        con,
        "select gpu_name, provider, is_spot, min(price_usd_per_gpu_hour) from marts.gpu_offers "
        f"where price_usd_per_gpu_hour is not null and coalesce(available, true) and ({where}) group by all",
        params,
    )
    return {(g, p, s): price for g, p, s, price in found}


def shown_groups(browser: Chromium) -> dict:
    return {(r["gpu"], r["provider"], r["spot"]): r["price"] for r in browser.evaluate(COMPARE_ROWS)}


# -- loading ---------------------------------------------------------------------------------------


def test_the_page_opens_from_file_offline_without_errors_or_requests(opened):
    assert opened.console_errors() == []
    assert {url.split(":", 1)[0] for url in opened.requested_urls()} == {"file"}
    assert opened.evaluate("document.body.dataset.view") == "compare"
    assert opened.evaluate("!!document.getElementById('sample-banner')")  # the replay data says so


# -- comparison table ------------------------------------------------------------------------------


def test_one_row_per_gpu_provider_and_pricing_with_its_cheapest_price(opened, replay):
    assert shown_groups(opened) == cheapest_groups(replay)


def test_the_table_opens_cheapest_first_and_sorts_by_a_clicked_column(opened):
    prices = [float(v) for v in opened.evaluate(column("gpu_hour"))]
    assert prices == sorted(prices)
    opened.click("#compare-table th[data-key='vram']")
    opened.wait_for("document.querySelector(\"#compare-table th[data-key='vram']\").ariaSort === 'ascending'")
    vram = lambda: [float(v) for v in opened.evaluate(column("vram"))]  # noqa: E731
    opened.wait_for(f"{column('vram')}.map(Number).every((x, i, v) => !i || v[i - 1] <= x)")
    assert vram() == sorted(vram())
    opened.click("#compare-table th[data-key='vram']")
    opened.wait_for(f"{column('vram')}.map(Number).every((x, i, v) => !i || v[i - 1] >= x)")
    assert vram() == sorted(vram(), reverse=True) and vram()[0] > vram()[-1]
    # a filter redraws the rows and keeps the chosen order
    opened.choose("#f-spot", "spot")
    assert vram() == sorted(vram(), reverse=True)


def test_text_columns_sort_too(opened):
    opened.click("#compare-table th[data-key='provider']")
    opened.wait_for(
        "document.querySelector(\"#compare-table th[data-key='provider']\").ariaSort === 'ascending'"
    )
    # the header's state changes before the rows move: wait for the rows themselves
    opened.wait_for(f"{column('provider')}.every((x, i, v) => !i || v[i - 1].localeCompare(x) <= 0)")
    names = opened.evaluate(column("provider"))
    # sortable-tablesort compares text with localeCompare, so the check does too
    assert names == opened.evaluate(f"{column('provider')}.slice().sort((a, b) => a.localeCompare(b))")
    assert names[0] != names[-1]


@pytest.mark.parametrize(
    ("control", "value", "where"),
    [
        ("#f-gpu", "H100-SXM", "gpu_name = 'H100-SXM'"),
        ("#f-provider", "aws", "provider = 'aws'"),
        ("#f-vram", "80", "vram_gb >= 80"),
        ("#f-spot", "spot", "is_spot"),
        ("#f-spot", "on_demand", "not is_spot"),
        ("#f-interconnect", "intra:NVSwitch", "intra_node_interconnect = 'NVSwitch'"),
        ("#f-interconnect", "fabric:InfiniBand", "inter_node_fabric = 'InfiniBand'"),
    ],
)
def test_each_filter_shows_the_cheapest_offer_among_those_that_pass(opened, replay, control, value, where):
    opened.choose(control, value)
    expected = cheapest_groups(replay, where)
    assert expected, f"the replay data has no offer where {where}; pick another filter value"
    assert shown_groups(opened) == expected


def test_a_region_filter_shows_that_regions_price_never_another_regions(opened, replay):
    # the region with the most GPU x provider groups: the filter has something to choose between
    region = query(
        replay,
        "select region from marts.gpu_offers where region <> 'global' group by region "
        "order by count(distinct gpu_name || provider) desc, region limit 1",
    )[0][0]
    opened.choose("#f-region", region)
    shown = opened.evaluate(COMPARE_ROWS)
    assert {r["region"] for r in shown} == {region}
    assert shown_groups(opened) == cheapest_groups(replay, "region = ?", [region])


def test_filters_combine_and_reset_restores_every_row(opened, replay):
    opened.choose("#f-gpu", "H100-SXM")
    opened.choose("#f-spot", "spot")
    assert shown_groups(opened) == cheapest_groups(replay, "gpu_name = 'H100-SXM' and is_spot")
    opened.click("#f-reset")
    opened.wait_for("document.getElementById('f-gpu').value === ''")
    opened.wait_for(
        f"document.querySelectorAll('#compare-table tbody tr').length === {len(cheapest_groups(replay))}"
    )
    assert shown_groups(opened) == cheapest_groups(replay)


def test_provider_links_go_to_the_providers_pages(opened, replay):
    links = opened.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#compare-table tbody tr')]"
        ".map(tr => [tr.dataset.provider, tr.querySelector('a') && tr.querySelector('a').href]))"
    )
    sources = dict(query(replay, "select provider, source from core.providers"))
    for provider, href in links.items():
        assert href and href == report.provider_url(sources[provider]), provider


# -- will my job fit -------------------------------------------------------------------------------


def cheapest_runs(con: duckdb.DuckDBPyConnection, job_id: str, pricing: str) -> list[float]:
    """Costs of the cheapest region of each instance type, cheapest first (what the page ranks)."""
    found = query(
        con,
        "select min(cost_usd) as cost from marts.finetune_costs where job_id = ? and pricing_type = ? "
        "and fits and priced group by provider, instance_type order by cost limit ?",
        [job_id, pricing, report.TOP_OFFERS],
    )
    return [report.significant(c) for (c,) in found]


def test_the_job_picker_opens_on_the_70b_qlora_question_and_answers_it(opened, replay):
    opened.evaluate("location.hash = '#fit'")
    opened.wait_for("document.body.dataset.view === 'fit'")
    assert opened.evaluate("document.getElementById('fit-model').value") == "meta-llama/Llama-3.1-70B"
    assert opened.evaluate("document.getElementById('fit-method').value") == "qlora"
    assert opened.evaluate("document.getElementById('fit-seq').value") == "4096"
    provider, instance, cost = query(
        replay,
        "select provider, instance_type, expected_spot_cost_usd from marts.finetune_costs "
        "where job_id = ? and pricing_type = 'spot' and fits and priced order by cost_usd limit 1",
        [report.DEFAULT_JOB],
    )[0]
    answer = opened.evaluate("document.getElementById('fit-answer').textContent")
    display = query(replay, "select display_name from core.providers where provider = ?", [provider])[0][0]
    assert f"Cheapest on spot: {display} · {instance}" in answer
    assert f"${report.significant(cost):.2f}" in answer
    rows = opened.evaluate(FIT_ROWS)
    assert sorted(r["cost"] for r in rows if r["pricing"] == "spot") == cheapest_runs(
        replay, report.DEFAULT_JOB, "spot"
    )
    assert sorted(r["cost"] for r in rows if r["pricing"] == "on_demand") == cheapest_runs(
        replay, report.DEFAULT_JOB, "on_demand"
    )
    assert [r["cost"] for r in rows] == sorted(r["cost"] for r in rows)  # ranked by cost
    total = query(
        replay,
        "select total_gb from marts.finetune_requirements "
        "where job_id = ? and n_gpus = 1 and sharding = 'none'",
        [report.DEFAULT_JOB],
    )[0][0]
    assert float(opened.evaluate("document.querySelector('#fit-memory td[data-total]').dataset.total")) == (
        report.significant(total)
    )


def test_changing_the_job_changes_the_breakdown_and_the_offers(opened, replay):
    opened.evaluate("location.hash = '#fit'")
    opened.choose("#fit-model", "Qwen/Qwen2.5-7B")
    opened.choose("#fit-method", "lora")
    opened.choose("#fit-seq", "2048")
    job_id = query(
        replay,
        "select job_id from core.finetune_jobs "
        "where model_id = 'Qwen/Qwen2.5-7B' and method = 'lora' and seq_len = 2048",
    )[0][0]
    rows = opened.evaluate(FIT_ROWS)
    assert sorted(r["cost"] for r in rows if r["pricing"] == "spot") == cheapest_runs(replay, job_id, "spot")
    opened.choose("#fit-pricing", "on_demand")
    rows = opened.evaluate(FIT_ROWS)
    assert {r["pricing"] for r in rows} == {"on_demand"}
    assert [r["cost"] for r in rows] == cheapest_runs(replay, job_id, "on_demand")
    assert "Cheapest on spot" not in opened.evaluate("document.getElementById('fit-answer').textContent")


def test_a_job_no_offer_can_hold_says_so(opened, replay):
    unfit = query(
        replay,
        "select model_id, method, seq_len from core.finetune_jobs where job_id not in "
        "(select job_id from marts.finetune_costs where fits and priced) order by job_id limit 1",
    )
    if not unfit:
        pytest.skip("every job of the replay grid fits some offer")
    model, method, seq_len = unfit[0]
    opened.evaluate("location.hash = '#fit'")
    opened.choose("#fit-model", model)
    opened.choose("#fit-method", method)
    opened.choose("#fit-seq", str(seq_len))
    assert "No current offer can run this job" in opened.evaluate(
        "document.getElementById('fit-answer').textContent"
    )
    assert opened.evaluate(FIT_ROWS) == []


# -- price history and freshness -------------------------------------------------------------------


def test_price_history_draws_a_chart_per_pricing_type_with_a_line_per_provider(opened, replay):
    opened.evaluate("location.hash = '#history'")
    opened.wait_for("!!document.querySelector('#chart-on_demand canvas')")
    opened.choose("#history-gpu", "H100-SXM")
    for pricing, spot in (("on_demand", False), ("spot", True)):
        labels = opened.evaluate(
            f"[...document.querySelectorAll('#chart-{pricing} .u-legend .u-series .u-label')]"
            ".map(e => e.textContent)"
        )
        providers = query(
            replay,
            "select distinct p.display_name from marts.gpu_offers o join core.providers p using (provider) "
            "where o.gpu_name = 'H100-SXM' and o.is_spot = ?",
            [spot],
        )
        # the first legend entry is the time axis
        assert sorted(labels[1:]) == sorted(name for (name,) in providers)
    # a GPU with no spot price says so instead of drawing an empty chart
    no_spot = query(
        replay,
        "select gpu_name from marts.gpu_offers group by gpu_name "
        "having not bool_or(is_spot) order by 1 limit 1",
    )
    if no_spot:
        opened.choose("#history-gpu", no_spot[0][0])
        assert "No spot prices recorded" in opened.evaluate(
            "document.getElementById('chart-spot').textContent"
        )


def test_freshness_lists_every_provider_with_its_last_run(opened, replay):
    opened.evaluate("location.hash = '#freshness'")
    shown = opened.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#freshness-table tbody tr')]"
        ".map(tr => [tr.dataset.provider, tr.dataset.status]))"
    )
    expected = dict(
        query(
            replay,
            "select provider, status from ops.provider_runs "
            "qualify row_number() over (partition by provider order by started_at desc) = 1",
        )
    )
    assert shown == expected


# -- phone and screenshots -------------------------------------------------------------------------


def test_on_a_phone_the_table_keeps_the_essentials_and_the_page_does_not_overflow(browser, page_url):
    open_page(browser, page_url, PHONE, mobile=True)
    assert browser.evaluate("document.getElementById('compare-table').classList.contains('essentials')")
    assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    # the price is on screen without scrolling sideways
    assert browser.evaluate(
        "document.querySelector(\"#compare-table th[data-key='gpu_hour']\").getBoundingClientRect().right"
        " <= window.innerWidth"
    )
    assert (
        browser.evaluate("getComputedStyle(document.querySelector(\"th[data-key='bandwidth']\")).display")
        == "none"
    )
    browser.click("#f-all-columns")
    assert (
        browser.evaluate("getComputedStyle(document.querySelector(\"th[data-key='bandwidth']\")).display")
        != "none"
    )


@pytest.mark.parametrize(("device", "size", "mobile"), [("laptop", LAPTOP, False), ("phone", PHONE, True)])
def test_a_screenshot_of_every_view(browser, page_url, shots, device, size, mobile):
    open_page(browser, page_url, size, mobile=mobile)
    for view in ("compare", "fit", "history", "freshness"):
        browser.evaluate(f"location.hash = '#{view}'")
        browser.wait_for(f"document.body.dataset.view === '{view}'")
        if view == "history":
            browser.wait_for("!!document.querySelector('#chart-on_demand canvas')")
        shot = browser.screenshot(shots / f"{device}-{view}.png")
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert browser.console_errors() == []
