"""The comparison page (answers/report.py): what it embeds equals the marts; the page is valid HTML,
self-contained and written atomically; `gpucost report` writes it."""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import html5lib
import pytest
from typer.testing import CliRunner

from answers import report
from answers import status as answers_status
from flows.cli import app
from tests.factories import make_offer
from tests.replay_warehouse import build_replay_warehouse
from warehouse.db import SAMPLE_BANNER, connect, load_seeds, migrate
from warehouse.load import load_offers
from warehouse.marts import build_marts

T0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
T1 = T0 + timedelta(days=1)
T2 = T0 + timedelta(days=2)


def embedded(html: str) -> dict[str, Any]:
    """The JSON the page embeds."""
    match = re.search(r'<script type="application/json" id="gpucost-data">(.*?)</script>', html, re.S)
    assert match, "the page has no embedded data block"
    return json.loads(match.group(1))


def records(table: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict[str, Any]]:
    rel = con.execute(sql, params or [])
    columns = [d[0] for d in rel.description]
    return [dict(zip(columns, row, strict=True)) for row in rel.fetchall()]


@pytest.fixture(scope="module")
def replay_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A GPUCOST_HOME whose replay/ holds the full replay warehouse (as `refresh --replay` leaves it)."""
    home = tmp_path_factory.getbasetemp() / "report-home"
    (home / "replay").mkdir(parents=True, exist_ok=True)
    build_replay_warehouse(home / "replay")
    return home


@pytest.fixture(scope="module")
def replay(replay_home: Path) -> duckdb.DuckDBPyConnection:
    con = connect(replay_home / "replay" / "warehouse.duckdb", read_only=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def page(replay: duckdb.DuckDBPyConnection, tmp_path_factory: pytest.TempPathFactory) -> str:
    return report.write_report(replay, tmp_path_factory.mktemp("site")).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def data(page: str) -> dict[str, Any]:
    return embedded(page)


# -- the comparison table ------------------------------------------------------------------------


# what the page's filters and grouping need to tell offers apart
OFFER_GROUP = (
    "gpu_name",
    "provider",
    "is_spot",
    "region",
    "vram_gb",
    "intra_node_interconnect",
    "inter_node_fabric",
)


def test_offers_are_the_cheapest_of_each_group_the_page_can_filter_on(replay, data):
    expected = {
        tuple(r[c] for c in OFFER_GROUP): r
        for r in rows(
            replay,
            f"""
            select {", ".join(OFFER_GROUP)}, min(price_usd_per_gpu_hour) as cheapest, count(*) as offers
            from marts.gpu_offers where price_usd_per_gpu_hour is not null
                and coalesce(available, true)  -- marked unavailable now: not ranked by default
            group by all
            """,
        )
    }
    sent = {tuple(o[c] for c in OFFER_GROUP): o for o in records(data["offers"])}
    assert sent.keys() == expected.keys()
    for key, offer in sent.items():
        assert offer["price_usd_per_gpu_hour"] == expected[key]["cheapest"], key
        assert offer["offers"] == expected[key]["offers"], key
    assert all(o["available"] is not False for o in sent.values())


def test_unavailable_offers_are_on_the_page_only_when_asked_for(replay, data):
    # the replay cassette holds offers their provider marks unavailable (Cudo, JarvisLabs, ...)
    unavailable = rows(replay, "select count(*) as n from marts.gpu_offers where available = false")[0]["n"]
    assert unavailable > 0
    every = records(report.offers_data(replay, include_unavailable=True)["offers"])
    assert len(every) > len(records(data["offers"])) and any(o["available"] is False for o in every)
    fit = report.fit_data(replay, include_unavailable=True)
    assert len(fit["runs"]["rows"]) >= len(data["fit"]["runs"]["rows"])


def test_each_offer_row_is_a_real_current_offer_with_its_own_price_and_hardware(replay, data):
    columns = (
        "price_usd_per_hour",
        "price_source",
        "gpu_count",
        "vram_gb",
        "total_vram_gb",
        "intra_node_interconnect",
        "inter_node_fabric",
        "inter_node_gbps",
        "billing_granularity",
    )
    for offer in records(data["offers"]):
        found = rows(
            replay,
            f"select {', '.join(columns)}, epoch(last_seen_at)::bigint as last_seen_at from marts.gpu_offers "
            "where provider = ? and instance_type = ? and region is not distinct from ? "
            "and zone is not distinct from ? and is_spot = ?",
            [offer["provider"], offer["instance_type"], offer["region"], offer["zone"], offer["is_spot"]],
        )
        assert len(found) == 1, offer
        assert {c: offer[c] for c in (*columns, "last_seen_at")} == found[0]


def test_gpu_specs_and_provider_features_come_from_the_seeds(replay, data):
    gpus = {g["gpu_name"]: g for g in records(data["gpus"])}
    assert set(gpus) == {
        g for (g,) in replay.execute("select distinct gpu_name from marts.gpu_offers").fetchall()
    }
    h100 = rows(replay, "select * from core.gpus where gpu_name = 'H100-SXM'")[0]
    assert gpus["H100-SXM"]["bf16_tflops"] == h100["bf16_tflops"]
    assert gpus["H100-SXM"]["supports_fp8"] == h100["supports_fp8"]
    runpod = rows(replay, "select * from core.providers where provider = 'runpod'")[0]
    assert data["providers"]["runpod"]["ssh_access"] == runpod["ssh_access"]
    assert data["providers"]["runpod"]["url"] in runpod["source"]


def test_provider_url_prefers_the_pricing_page_of_the_citation():
    assert report.provider_url("https://docs.x.ai/billing ; https://x.ai/pricing") == "https://x.ai/pricing"
    assert report.provider_url("https://docs.x.ai/billing (per second)") == "https://docs.x.ai/billing"
    assert report.provider_url("seen on the console") is None
    # a bare origin gets the slash a browser's link resolves to; a URL with a path is kept as cited
    assert report.provider_url("https://docs.latitude.sh ; notes") == "https://docs.latitude.sh/"
    assert report.provider_url("https://x.ai/") == "https://x.ai/"


# -- will my job fit ---------------------------------------------------------------------------------


def fit_runs(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The page's runs with their job and offer spelled out (they are sent by index)."""
    jobs = records(data["fit"]["jobs"])
    offers = records(data["fit"]["offers"])
    return [
        {**offers[run["offer"]], **run, "job_id": jobs[run["job"]]["job_id"]}
        for run in records(data["fit"]["runs"])
    ]


def test_fit_runs_are_the_cheapest_instance_types_of_each_job_and_pricing_type(replay, data):
    top = data["fit"]["top"]
    cheapest: dict[tuple[str, str, str, str], float] = {}
    for r in rows(
        replay,
        # the page ranks only offers not marked unavailable (jarvislabs' india-01 takes no new
        # instances), so the expectation leaves those out too
        # ranked by the whole bill (finetune.cost.itemized_bill), as `gpucost estimate` ranks
        "select job_id, c.pricing_type, c.provider, c.instance_type, total_usd as cost_usd "
        "from marts.finetune_costs as c join marts.gpu_offers as o using "
        "(provider, instance_type, region, pricing_type) "
        "where c.zone is not distinct from o.zone and fits and priced and coalesce(o.available, true)",
    ):
        key = (r["job_id"], r["pricing_type"], r["provider"], r["instance_type"])
        cheapest[key] = min(cheapest.get(key, math.inf), r["cost_usd"])
    expected: dict[tuple[str, str], list[tuple[float, str, str]]] = defaultdict(list)
    for (job_id, pricing, provider, instance_type), cost in cheapest.items():
        expected[(job_id, pricing)].append((cost, provider, instance_type))
    sent: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for run in sorted(fit_runs(data), key=lambda r: r["rank"]):
        sent[(run["job_id"], run["pricing_type"])].append((run["provider"], run["instance_type"]))
    assert sent.keys() == expected.keys()
    for key, shown in sent.items():
        ranked = [(p, i) for _, p, i in sorted(expected[key])]
        assert shown == ranked[:top], key


def test_fit_runs_carry_the_marts_numbers(replay, data):
    columns = (
        "gpu_name",
        "gpu_count",
        "price_usd_per_hour",
        "price_source",
        "gpus_used",
        "nodes_used",
        "sharding",
        "fabric_warning",
    )
    estimated = (
        "total_gb",
        "usable_vram_gb",
        "estimated_hours",
        "billed_hours",
        "on_demand_cost_usd",
        "expected_spot_cost_usd",
        "usd_per_million_tokens",
    )
    for run in fit_runs(data)[::7]:  # every 7th: each check is one query
        found = rows(
            replay,
            f"select {', '.join(columns + estimated)}, cost_usd from marts.finetune_costs "
            "where job_id = ? and provider = ? and instance_type = ? and region = ? and pricing_type = ? "
            "and fits and priced order by cost_usd, zone nulls first limit 1",
            [run["job_id"], run["provider"], run["instance_type"], run["region"], run["pricing_type"]],
        )[0]
        assert {c: run[c] for c in columns} == {c: found[c] for c in columns}
        # the model's outputs travel to 4 significant digits
        assert {c: run[c] for c in estimated} == {c: report.significant(found[c]) for c in estimated}


def test_the_70b_qlora_question_has_its_answer_in_the_data(replay, data):
    spot = [r for r in fit_runs(data) if r["job_id"] == report.DEFAULT_JOB and r["pricing_type"] == "spot"]
    best = rows(
        replay,
        "select provider, instance_type, expected_spot_cost_usd from marts.finetune_costs "
        "where job_id = ? and pricing_type = 'spot' and fits and priced order by cost_usd limit 1",
        [report.DEFAULT_JOB],
    )[0]
    first = min(spot, key=lambda r: r["rank"])
    assert (first["provider"], first["instance_type"]) == (best["provider"], best["instance_type"])
    assert first["expected_spot_cost_usd"] == report.significant(best["expected_spot_cost_usd"])


def test_memory_breakdowns_are_the_requirements_of_every_shown_configuration(replay, data):
    jobs = records(data["fit"]["jobs"])
    memory = records(data["fit"]["memory"])
    single = Counter(jobs[m["job"]]["job_id"] for m in memory if (m["n_gpus"], m["sharding"]) == (1, "none"))
    assert set(single) == {j["job_id"] for j in jobs} and set(single.values()) == {1}
    shown = {(jobs[m["job"]]["job_id"], m["n_gpus"], m["sharding"]) for m in memory}
    grid = {
        tuple(r)
        for r in replay.execute("select job_id, n_gpus, sharding from marts.finetune_requirements").fetchall()
    }
    for run in fit_runs(data):
        config = (run["job_id"], run["gpus_used"], run["sharding"])
        assert (config in shown) == (config in grid), config
    for m in memory[::50]:
        found = rows(
            replay,
            "select * from marts.finetune_requirements where job_id = ? and n_gpus = ? and sharding = ?",
            [jobs[m["job"]]["job_id"], m["n_gpus"], m["sharding"]],
        )[0]
        for column in report.MEMORY_COLUMNS:
            assert m[column] == report.significant(found[column])
        assert m["peak_phase"] == found["peak_phase"]


def test_significant_keeps_four_digits():
    assert report.significant(10.887812) == 10.89
    assert report.significant(0.108878) == 0.1089
    assert report.significant(1234567.0) == 1235000.0
    assert report.significant(None) is None
    assert report.significant(0.0) == 0.0


# -- price history and freshness (a small warehouse with known history) ------------------------------


def p5(price: float, **kw: Any):
    return make_offer("p5.48xlarge", price, gpu_count=8.0, **kw)


@pytest.fixture
def small() -> duckdb.DuckDBPyConnection:
    """aws p5 (8x H100) on-demand: 80 -> 64 $/h at T1; a second p5 region from T0 to T1 only."""
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    con.execute(
        "insert into ops.runs (run_id, started_at, finished_at, status, mode, providers) "
        "values ('r0', ?, ?, 'ok', 'live', ['aws']), ('r1', ?, ?, 'partial', 'live', ['aws', 'azure'])",
        [T0, T0, T1, T1],
    )
    load_offers(con, "r0", "aws", [p5(80.0), p5(96.0, region="eu-west-1")], now=T0)
    load_offers(con, "r1", "aws", [p5(64.0)], now=T1, accept_shrink=True)
    build_marts(con)
    yield con
    con.close()


def test_history_steps_through_price_changes_and_gaps(small):
    series = {
        (s["gpu_name"], s["provider"], s["pricing_type"]): s["points"]
        for s in report.history_data(small)["series"]
    }
    t0, t1 = int(T0.timestamp()), int(T1.timestamp())
    # per GPU: 80/8 = 10 (eu-west-1's 96/8 = 12 is dearer), then 64/8 = 8 once us-east-1 drops
    assert series == {("H100-SXM", "aws", "on_demand"): [[t0, 10.0], [t1, 8.0]]}


def test_history_shows_a_gap_when_no_offer_of_the_group_is_current(small):
    load_offers(
        small, "r2", "aws", [make_offer("p4d.24xlarge", 800.0, gpu_count=8.0)], now=T2, accept_shrink=True
    )
    series = {(s["gpu_name"], s["pricing_type"]): s["points"] for s in report.history_data(small)["series"]}
    t2 = int(T2.timestamp())
    assert series[("H100-SXM", "on_demand")][-1] == [t2, None]
    assert series[("A100-40GB-SXM", "on_demand")] == [[t2, 100.0]]


def test_downsample_keeps_the_cheapest_price_of_each_bucket():
    points = [(t, float(100 - t)) for t in range(100)]
    thinned = report.downsample(points, 10)
    assert len(thinned) == 10
    assert thinned[0] == [0, 91.0]  # bucket 0..9: its cheapest is at t=9, stamped at the bucket's start
    assert report.downsample(points[:5], 10) == [[t, p] for t, p in points[:5]]
    assert report.downsample([(0, None), (1, None), (2, 3.0)], 2) == [[0, None], [2, 3.0]]


def test_freshness_names_failed_providers_held_scopes_and_the_last_good_refresh(small):
    small.execute(
        """
        insert into ops.provider_runs (run_id, provider, status, started_at, finished_at, offers_loaded,
            offers_quarantined, error, hint, scopes)
        values
            ('r0', 'aws', 'ok', ?, ?, 2, 0, null, null, '{"on_demand:us-east-1": {"status": "ok"}}'),
            ('r1', 'aws', 'degraded', ?, ?, 1, 0, 'held 1 scope(s)', null,
                '{"on_demand:us-east-1": {"status": "ok"},
                  "on_demand:eu-west-1": {"status": "held", "reason": "empty or vanished"}}'),
            ('r0', 'azure', 'ok', ?, ?, 5, 0, null, null, '{}'),
            ('r1', 'azure', 'failed', ?, ?, 0, 0, 'Unreachable: no route', 'check the network', '{}')
        """,
        [T0, T0, T1, T1, T0, T0, T1, T1],
    )
    fresh = {p["provider"]: p for p in answers_status.freshness(small)["providers"]}
    assert fresh["azure"]["status"] == "failed"
    assert fresh["azure"]["last_good_at"] == int(T0.timestamp())  # the failed run is not a good one
    assert fresh["azure"]["hint"] == "check the network"
    assert fresh["aws"]["status"] == "degraded"
    assert fresh["aws"]["last_good_at"] == int(T1.timestamp())  # degraded still published prices
    assert fresh["aws"]["held_scopes"] == ["on_demand:eu-west-1 (empty or vanished)"]
    assert fresh["aws"]["current_offers"] == 1
    page = report.render_html(report.report_data(small, now=T2))
    assert "on_demand:eu-west-1 (empty or vanished)" in page and "check the network" in page


def failing_runs(con: duckdb.DuckDBPyConnection, provider: str, *at: datetime) -> None:
    """`provider` ok at T0, then failed at each of `at` (so failing since the first of them)."""
    con.execute(
        "insert into ops.provider_runs (run_id, provider, status, started_at, finished_at, offers_loaded, "
        "offers_quarantined, error, hint, scopes) values ('r0', ?, 'ok', ?, ?, 2, 0, null, null, '{}')",
        [provider, T0, T0],
    )
    for i, when in enumerate(at, start=1):
        con.execute(
            "insert into ops.provider_runs (run_id, provider, status, started_at, finished_at, "
            "offers_loaded, offers_quarantined, error, hint, scopes) "
            "values (?, ?, 'failed', ?, ?, 0, 0, 'Unreachable', 'check the network', '{}')",
            [f"f{i}", provider, when, when],
        )


def test_freshness_shows_a_failing_provider_then_a_stale_one_and_its_offers_leave_the_page(small):
    failing_runs(small, "aws", T1, T2)
    build_marts(small, now=T2 + timedelta(hours=1), stale_after_hours=48)  # failing 25 h: not yet stale
    aws = {p["provider"]: p for p in answers_status.freshness(small)["providers"]}["aws"]
    assert (aws["provider_state"], aws["provider_failing_since"], aws["failed_runs"]) == (
        "failing",
        int(T1.timestamp()),
        2,
    )
    data = report.report_data(small, now=T2)
    assert data["why_empty"] is None and data["offers"]["rows"]
    assert 'id="stale-providers"' not in report.render_html(data)

    build_marts(small, now=T1 + timedelta(hours=49), stale_after_hours=48)
    data = report.report_data(small, now=T2)
    assert {p["provider"]: p["provider_state"] for p in data["freshness"]["providers"]} == {"aws": "stale"}
    html = report.render_html(data)
    assert 'data-state="stale"' in html and "offers left out of Compare" in html
    banner = re.search(r'<p class="banner stale" id="stale-providers">(.*?)</p>', html, re.S)
    assert banner and "aws" in banner.group(1) and "--include-stale" in banner.group(1)
    # every offer is the stale provider's: the page is empty and says why, and what shows them
    assert data["offers"]["rows"] == []
    assert "of stale providers (aws)" in data["why_empty"] and "left out" in data["why_empty"]
    assert "--include-stale" in data["why_empty"] and 'id="why-empty"' in html
    shown = report.report_data(small, now=T2, include_stale=True)
    assert shown["why_empty"] is None and shown["offers"]["rows"]
    assert "Their last good prices are shown" in report.render_html(shown)


def test_a_provider_that_never_failed_is_fresh(small):
    failing_runs(small, "aws")
    build_marts(small, now=T2)
    aws = {p["provider"]: p for p in answers_status.freshness(small)["providers"]}["aws"]
    assert (aws["provider_state"], aws["provider_failing_since"], aws["failed_runs"]) == ("fresh", None, None)


def test_an_empty_warehouse_page_says_no_refresh_loaded_prices_and_gives_both_commands():
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    con.execute(
        "insert into ops.runs (run_id, started_at, finished_at, status, mode, providers) "
        "values ('r0', ?, ?, 'failed', 'live', ['aws'])",
        [T0, T0],
    )
    build_marts(con, now=T0)
    data = report.report_data(con, now=T0)
    assert data["current_offers"] == 0
    assert data["why_empty"].startswith("no refresh has loaded prices into this warehouse yet")
    assert "`gpucost refresh`" in data["why_empty"] and report.REPLAY_COMMAND in data["why_empty"]
    html = report.render_html(data)
    banner = re.search(r'<p class="banner empty" id="why-empty"[^>]*>(.*?)</p>', html, re.S)
    assert banner and report.REPLAY_COMMAND in banner.group(1)
    con.close()


def test_unavailable_and_unpriced_offers_are_named_when_they_empty_the_page(small):
    small.execute("update marts.gpu_offers set available = false")
    why = report.why_empty(small)
    assert why == (
        "1 offer its provider marks unavailable is left out "
        "(`gpucost report --include-unavailable` shows it)."
    )
    assert report.why_empty(small, include_unavailable=True) is None
    small.execute("update marts.gpu_offers set price_usd_per_gpu_hour = null")
    (current,) = small.execute("select count(*) from marts.gpu_offers").fetchall()[0]
    assert current > 0
    assert report.why_empty(small, include_unavailable=True) == (
        f"{current} offer{'s have' if current > 1 else ' has'} no price per GPU-hour (GPU count unknown)."
    )


def test_a_warehouse_whose_offers_all_closed_says_so(small):
    failing_runs(small, "aws")
    small.execute("delete from marts.gpu_offers")
    assert report.why_empty(small).startswith("the warehouse holds no current offer")


def test_the_replay_page_is_not_empty(data):
    assert data["why_empty"] is None and data["include_stale"] is False


def test_a_live_warehouse_has_no_sample_banner_and_a_replay_one_does(small, page, data):
    live = report.report_data(small, now=T2)
    assert live["sample_data"] is False
    assert 'id="sample-banner"' not in report.render_html(live)
    assert data["sample_data"] is True and data["sample_banner"] == SAMPLE_BANNER
    assert 'id="sample-banner"' in page


def test_a_warehouse_without_fine_tuning_marts_still_makes_a_page(small):
    fit = report.report_data(small, now=T2)["fit"]
    assert fit["jobs"] is None and fit["runs"] is None


# -- the page --------------------------------------------------------------------------------------


def test_the_page_is_valid_html5(page):
    # strict: any parse error the HTML5 spec defines raises (unclosed or stray tags, bad attributes)
    document = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parse(page)
    ids = Counter(e.get("id") for e in document.iter() if e.get("id"))
    assert [i for i, n in ids.items() if n > 1] == []
    for label in document.iter("label"):
        if label.get("for"):
            assert label.get("for") in ids
    assert document.get("lang") == "en"


def test_the_page_is_self_contained(page):
    document = html5lib.parse(page, namespaceHTMLElements=False)
    assert [s.get("src") for s in document.iter("script") if s.get("src")] == []
    assert [link.get("href") for link in document.iter("link")] == []
    assert [i.get("src") for i in document.iter("img")] == []
    assert "url(" not in "".join(s.text or "" for s in document.iter("style"))
    # the vendored libraries are inlined with their licences
    assert "Permission is hereby granted, free of charge" in page  # uPlot, MIT
    assert "This is free and unencumbered software released into the public domain" in page  # sortable
    assert "function sortSortable" in page and "uPlot" in page


def test_embedded_json_cannot_close_its_script_element():
    text = report._json_for_script({"note": "</script><script>alert(1)</script> <!-- x"})
    assert "</" not in text and "<!--" not in text
    assert json.loads(text) == {"note": "</script><script>alert(1)</script> <!-- x"}


def test_every_compare_column_has_a_header_and_a_cell_renderer(page):
    js = (report.ASSETS_DIR / "app.js").read_text()
    for key, *_ in report.COMPARE_COLUMNS:
        assert f'data-key="{key}"' in page
        assert re.search(rf"\b{key}: function", js), f"app.js draws no cell for column {key!r}"


def test_write_report_replaces_the_page_atomically(small, tmp_path: Path, monkeypatch):
    first = report.write_report(small, tmp_path, now=T1)
    assert first == tmp_path / "index.html"
    report.write_report(small, tmp_path, now=T2)
    assert embedded(first.read_text())["generated_at"] == int(T2.timestamp())
    before = first.read_text()

    def broken(data: dict[str, Any]) -> str:
        raise RuntimeError("template failed")

    monkeypatch.setattr(report, "render_html", broken)
    with pytest.raises(RuntimeError):
        report.write_report(small, tmp_path, now=T2)
    assert first.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html"]


def test_a_warehouse_without_marts_has_no_page():
    con = connect(":memory:")
    migrate(con)
    with pytest.raises(report.ReportUnavailable, match="gpucost refresh"):
        report.report_data(con)


# -- the command -----------------------------------------------------------------------------------


def test_cli_report_writes_the_page_and_says_it_is_sample_data(
    replay_home: Path, tmp_path: Path, monkeypatch
):
    monkeypatch.setenv("GPUCOST_HOME", str(replay_home))
    out = tmp_path / "site"
    result = CliRunner().invoke(app, ["report", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "sample data" in result.output
    assert str(out / "index.html") in result.output.replace("\n", "")
    assert embedded((out / "index.html").read_text())["sample_data"] is True


def test_cli_report_without_a_warehouse_says_what_to_do(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "empty"))
    result = CliRunner().invoke(app, ["report", "--out", str(tmp_path / "site")])
    assert result.exit_code == 1
    assert "gpucost refresh" in result.output


def test_the_header_counts_every_current_offer_and_each_row_counts_its_own(replay, data):
    total, providers = replay.execute(
        "select count(*), count(distinct provider) from marts.gpu_offers"
    ).fetchall()[0]
    assert (data["current_offers"], data["providers_with_offers"]) == (total, providers)
    priced = replay.execute(
        "select count(*) from marts.gpu_offers where price_usd_per_gpu_hour is not null "
        "and coalesce(available, true)"  # the header counts every offer; rows rank the rentable
    ).fetchall()[0][0]
    assert sum(o["offers"] for o in records(data["offers"])) == priced
