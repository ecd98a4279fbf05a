"""The comparison page in a real browser: headless Chromium opens it from file:// with the network
cut, sorts and filters the table, changes the job picker, draws the charts; the assertions read the
DOM and compare it with the marts. Screenshots of every view go to a temp folder (and, when
GPUCOST_REPORT_SHOTS names a folder, are copied there too).

Needs Chromium (Debian's `chromium`; .ci/run installs it when missing); without one these tests
skip and say so.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from answers import report
from tests.cdp import Chromium, find_chromium, screenshot_folder
from tests.replay_warehouse import build_replay_warehouse
from warehouse.db import connect

CHROMIUM = find_chromium()
TOP_SERIES = 8  # app.js: the lines a history chart draws before "all series" is ticked
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium to drive: install Debian's `chromium` (apt-get install chromium, as .ci/run does) "
    "or point GPUCOST_CHROMIUM at a Chromium or Chrome binary",
)
LAPTOP = (1366, 900)
PHONE = (390, 844)
NARROW = (375, 812)  # the narrowest phone people share links to (iPhone SE, 13 mini)
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
    with screenshot_folder(tmp_path_factory.mktemp("report-shots")) as folder:
        yield folder


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
        "select min(cost_usd) as cost from marts.finetune_costs as costs where job_id = ? "
        "and pricing_type = ? and fits and priced "
        # an offer its provider marks unavailable now is left off the page (fit_offers.sql)
        "and not exists (select 1 from marts.gpu_offers as offers where offers.available = false "
        "and offers.provider = costs.provider and offers.instance_type = costs.instance_type "
        "and offers.region = costs.region and offers.zone is not distinct from costs.zone "
        "and offers.pricing_type = costs.pricing_type) "
        "group by provider, instance_type order by cost limit ?",
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
    opened.click("#history-all")  # every series, not only the most relevant
    opened.wait_for("document.getElementById('history-all').checked")
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
    opened.click("#history-all")
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


def legend(browser: Chromium, pricing: str) -> list[dict[str, str]]:
    """The chart's legend entries after the time axis: label, colour and line style of each."""
    return browser.evaluate(
        f"[...document.querySelectorAll('#chart-{pricing} .u-legend .u-series')].slice(1).map(e => ({{"
        " label: e.querySelector('.u-label').textContent,"
        " colour: getComputedStyle(e.querySelector('.u-marker')).borderTopColor,"
        " style: getComputedStyle(e.querySelector('.u-marker')).borderTopStyle }))"
    )


def test_history_draws_the_most_relevant_series_in_distinct_colours_and_folds_the_rest(opened, replay):
    opened.evaluate("location.hash = '#history'")
    opened.wait_for("!!document.querySelector('#chart-on_demand canvas')")
    opened.choose("#history-gpu", "H100-SXM")
    total = int(opened.evaluate("document.getElementById('chart-on_demand').dataset.total"))
    assert total > TOP_SERIES, "the replay's H100 on-demand chart should have more series than it draws"
    shown = legend(opened, "on_demand")
    assert (
        len(shown)
        == TOP_SERIES
        == int(opened.evaluate("document.getElementById('chart-on_demand').dataset.series"))
    )
    assert len({e["colour"] for e in shown}) == len(shown)  # no colour twice
    # the most relevant: the cheapest providers now (history and comparison agree on current prices)
    now = query(
        replay,
        "select p.display_name, min(o.price_usd_per_gpu_hour) as price from marts.gpu_offers o "
        "join core.providers p using (provider) where o.gpu_name = 'H100-SXM' and not o.is_spot "
        "group by all order by price, p.display_name",
    )
    cheapest = {name for name, price in now if price <= now[TOP_SERIES - 1][1]}
    assert {e["label"] for e in shown} <= cheapest
    folded = opened.evaluate(
        "['on_demand', 'spot'].map(p => document.getElementById('chart-' + p).dataset)"
        ".reduce((n, d) => n + Number(d.total) - Number(d.series), 0)"
    )
    assert folded >= total - TOP_SERIES  # both charts' folded series, counted beside the toggle
    assert opened.evaluate("document.getElementById('history-all-count').textContent") == f"({folded} more)"

    opened.click("#history-all")
    opened.wait_for(
        f"document.querySelectorAll('#chart-on_demand .u-legend .u-series').length === {total + 1}"
    )
    every = legend(opened, "on_demand")
    assert [e["label"] for e in every[:TOP_SERIES]] == [e["label"] for e in shown]  # same order, more
    assert len({(e["colour"], e["style"]) for e in every}) == total  # a colour repeats only with dashes
    assert "history_all=1" in opened.evaluate("location.search")
    opened.click("#history-all")


def test_hovering_a_history_chart_shows_provider_price_and_date(opened):
    opened.evaluate("location.hash = '#history'")
    opened.wait_for("!!document.querySelector('#chart-on_demand canvas')")
    opened.choose("#history-gpu", "H100-SXM")
    opened.wait_for("!!document.querySelector('#chart-on_demand canvas')")
    assert opened.evaluate("document.querySelector('#chart-on_demand .chart-tip').hidden") is True
    # the right end of the plot is now, where every drawn series has its current price
    x, y = opened.evaluate(
        "(() => { const o = document.querySelector('#chart-on_demand .u-over');"
        " o.scrollIntoView({block: 'center'});"
        " const r = o.getBoundingClientRect(); return [r.right - 2, r.top + r.height / 2]; })()"
    )
    opened.page("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
    opened.wait_for("!document.querySelector('#chart-on_demand .chart-tip').hidden")
    tip = opened.evaluate("document.querySelector('#chart-on_demand .chart-tip').innerText")
    provider, rest = tip.split(" $", 1)
    assert provider in {e["label"] for e in legend(opened, "on_demand")}
    assert re.fullmatch(r"[\d.,]+/GPU-h\n\d{4}-\d\d-\d\d \d\d:\d\d UTC", rest), tip
    # the price shown is that provider's value in the legend at the same moment
    values = opened.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#chart-on_demand .u-legend .u-series')].slice(1)"
        ".map(e => [e.querySelector('.u-label').textContent, e.querySelector('.u-value').textContent]))"
    )
    assert values[provider] == "$" + rest.split("/", 1)[0]


def test_freshness_shows_each_providers_state(opened, replay):
    opened.evaluate("location.hash = '#freshness'")
    states = opened.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#freshness-table tbody tr')]"
        ".map(tr => [tr.dataset.provider, tr.querySelector('td[data-state]').dataset.state]))"
    )
    failing = dict(query(replay, "select provider, provider_state from staging.provider_health"))
    assert states == {
        p: {"stale": "stale", "active": "failing"}.get(failing.get(p, ""), "fresh") for p in states
    }
    assert set(states) == {p for (p,) in query(replay, "select distinct provider from ops.provider_runs")}


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


PRICE_CELLS_VISIBLE = """[...document.querySelectorAll("#compare-table td[data-key='gpu_hour']")]
    .map(td => { const r = td.getBoundingClientRect();
        return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth
            && td.scrollWidth <= td.clientWidth; })"""
NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"


def test_at_375_px_rows_are_cards_with_every_price_fully_visible(browser, page_url, replay):
    open_page(browser, page_url, NARROW, mobile=True)
    assert browser.evaluate("window.innerWidth") == NARROW[0]
    assert browser.evaluate(NO_SIDEWAYS_SCROLL)
    visible = browser.evaluate(PRICE_CELLS_VISIBLE)
    assert len(visible) == len(cheapest_groups(replay)) and all(visible)
    # nor does the table scroll sideways inside its box
    assert browser.evaluate(
        "(() => { const s = document.querySelector('#compare-table').parentElement;"
        " return s.scrollWidth <= s.clientWidth; })()"
    )
    assert (
        browser.evaluate("getComputedStyle(document.querySelector('#compare-table thead')).display") == "none"
    )
    # the essentials show, each cell named; the rest are a checkbox away and still fit
    row = "#compare-table tbody tr:first-child"
    assert (
        browser.evaluate(
            f"getComputedStyle(document.querySelector(\"{row} td[data-key='bandwidth']\")).display"
        )
        == "none"
    )
    assert (
        browser.evaluate(f"document.querySelector(\"{row} td[data-key='vram']\").dataset.label") == "VRAM/GPU"
    )
    browser.click("#f-all-columns")
    assert (
        browser.evaluate(
            f"getComputedStyle(document.querySelector(\"{row} td[data-key='bandwidth']\")).display"
        )
        != "none"
    )
    assert browser.evaluate(NO_SIDEWAYS_SCROLL) and all(browser.evaluate(PRICE_CELLS_VISIBLE))
    # with no header to click, the sort picker sorts
    browser.choose("#f-sort", "-gpu_hour")
    prices = [float(v) for v in browser.evaluate(column("gpu_hour"))]
    assert prices == sorted(prices, reverse=True) and prices[0] > prices[-1]
    assert "sort=-gpu_hour" in browser.evaluate("location.search")


def test_on_a_laptop_the_table_keeps_its_header_and_the_sort_picker_hides(opened):
    assert (
        opened.evaluate("getComputedStyle(document.getElementById('f-sort').closest('label')).display")
        == "none"
    )
    assert (
        opened.evaluate("getComputedStyle(document.querySelector('#compare-table thead')).display") != "none"
    )


def test_on_a_phone_every_view_stays_within_the_screen(browser, page_url):
    open_page(browser, page_url, NARROW, mobile=True)
    for view in ("compare", "fit", "history", "freshness"):
        browser.evaluate(f"location.hash = '#{view}'")
        browser.wait_for(f"document.body.dataset.view === '{view}'")
        if view == "history":
            browser.wait_for("!!document.querySelector('#chart-on_demand canvas')")
        assert browser.evaluate(NO_SIDEWAYS_SCROLL), view


# -- the URL as people share it --------------------------------------------------------------------


def test_filters_and_sort_go_into_the_url_and_a_shared_url_opens_as_it_was_left(browser, page_url, replay):
    open_page(browser, page_url)
    assert browser.evaluate("location.search") == ""  # the opening state needs no parameters
    entries = browser.evaluate("window.history.length")
    browser.choose("#f-gpu", "H100-SXM")
    browser.choose("#f-vram", "80")
    browser.click("#compare-table th[data-key='provider']")
    browser.click("#compare-table th[data-key='provider']")
    browser.wait_for("location.search.includes('sort=-provider')")
    assert browser.evaluate("document.getElementById('f-sort').value") == "-provider"  # the picker follows
    assert browser.evaluate("window.history.length") == entries  # replaced, never pushed
    browser.evaluate("location.hash = '#fit'")
    browser.choose("#fit-model", "Qwen/Qwen2.5-7B")
    browser.choose("#fit-method", "lora")
    browser.choose("#fit-seq", "2048")
    browser.choose("#fit-pricing", "spot")
    shared = browser.evaluate("location.href")
    assert shared.startswith(page_url + "?") and shared.endswith("#fit")
    params = browser.evaluate("Object.fromEntries(new URLSearchParams(location.search))")
    assert params == {
        "gpu": "H100-SXM",
        "vram": "80",
        "sort": "-provider",
        "model": "Qwen/Qwen2.5-7B",
        "method": "lora",
        "seq": "2048",
        "fit_pricing": "spot",
    }

    # someone else opens the link: a fresh load, same view, same controls, same rows in the same order
    browser.open("about:blank")
    open_page(browser, shared)
    assert browser.evaluate("document.body.dataset.view") == "fit"
    assert browser.evaluate(
        "['fit-model', 'fit-method', 'fit-seq', 'fit-pricing'].map(id => document.getElementById(id).value)"
    ) == ["Qwen/Qwen2.5-7B", "lora", "2048", "spot"]
    assert {r["pricing"] for r in browser.evaluate(FIT_ROWS)} == {"spot"}
    browser.evaluate("location.hash = '#compare'")
    browser.wait_for("document.body.dataset.view === 'compare'")
    assert browser.evaluate("document.getElementById('f-gpu').value") == "H100-SXM"
    assert shown_groups(browser) == cheapest_groups(replay, "gpu_name = 'H100-SXM' and vram_gb >= 80")
    assert (
        browser.evaluate("document.querySelector(\"#compare-table th[data-key='provider']\").ariaSort")
        == "descending"
    )
    names = browser.evaluate(column("provider"))
    assert names == browser.evaluate(f"{column('provider')}.slice().sort((a, b) => b.localeCompare(a))")
    assert browser.evaluate("location.href") == page_url + "?" + shared.split("?", 1)[1].replace(
        "#fit", "#compare"
    )

    # Reset clears the filters, and the URL with them (the fit job is kept: it is not a filter)
    browser.click("#f-reset")
    browser.wait_for("!location.search.includes('gpu=')")
    assert "model=Qwen" in browser.evaluate("location.search")
    assert (
        browser.evaluate("document.querySelector(\"#compare-table th[data-key='gpu_hour']\").ariaSort")
        == "ascending"
    )


@pytest.mark.parametrize(
    "query",
    [
        "?gpu=NoSuchGPU&vram=7&spot=maybe&sort=-nosuchcolumn&columns=2&model=nobody/nothing&seq=-1",
        "?sort=warning&fit_sort=&history_gpu=%3Cscript%3E&history_all=yes",
        "?gpu&&=&%zz=1",
    ],
)
def test_values_a_url_does_not_offer_are_ignored(browser, page_url, replay, query):
    browser.events.clear()
    open_page(browser, page_url + query + "#compare")
    assert browser.console_errors() == []
    assert shown_groups(browser) == cheapest_groups(replay)
    assert browser.evaluate("document.getElementById('f-gpu').value") == ""
    assert (
        browser.evaluate("document.querySelector(\"#compare-table th[data-key='gpu_hour']\").ariaSort")
        == "ascending"
    )
    assert browser.evaluate("document.getElementById('fit-model').value") == "meta-llama/Llama-3.1-70B"
    # what was ignored leaves the URL, so the link shared next is a clean one
    assert browser.evaluate("location.search") == ""
    assert browser.evaluate("location.hash") == "#compare"


def test_filters_that_leave_no_row_say_which_filters_and_what_to_do(opened, replay):
    # a GPU and a region that share no offer: each filter alone shows rows, both together none
    gpu, region = query(
        replay,
        "with shown as (select * from marts.gpu_offers where price_usd_per_gpu_hour is not null"
        " and coalesce(available, true) and not is_stale),"
        " gpus as (select distinct gpu_name from shown), regions as (select distinct region from shown)"
        " select gpu_name, region from gpus cross join regions where not exists (select 1 from shown"
        " where shown.gpu_name = gpus.gpu_name and shown.region = regions.region) order by all limit 1",
    )[0]
    opened.choose("#f-gpu", gpu)
    opened.choose("#f-region", region)
    assert opened.evaluate("document.querySelectorAll('#compare-table tbody tr').length") == 0
    text = opened.evaluate("document.getElementById('compare-count').textContent")
    assert text.startswith("None of the ") and f"GPU {gpu}" in text and f"Region {region}" in text
    assert text.endswith("Loosen one, or Reset.")
    assert opened.evaluate("document.getElementById('compare-count').classList.contains('empty')")


def test_a_shared_url_restores_the_fit_tables_sort(browser, page_url):
    open_page(browser, page_url + "?fit_sort=-hours#fit")
    assert browser.evaluate("document.querySelector(\"#fit-table th[data-key='hours']\").ariaSort") == (
        "descending"
    )
    hours = browser.evaluate(
        "[...document.querySelectorAll('#fit-table tbody tr')].map(tr => Number(tr.cells[6].dataset.sort))"
    )
    assert len(hours) > 1 and hours == sorted(hours, reverse=True)
    assert browser.evaluate("location.search") == "?fit_sort=-hours"


def test_a_shared_history_url_opens_on_its_gpu_with_all_series(browser, page_url):
    open_page(browser, page_url + "?history_gpu=B200&history_all=1#history")
    browser.wait_for("!!document.querySelector('#chart-on_demand canvas')")
    assert browser.evaluate("document.getElementById('history-gpu').value") == "B200"
    assert browser.evaluate("document.getElementById('history-all').checked") is True


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
