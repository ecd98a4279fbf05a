"""`gpucost serve`'s page in a real browser, as a person uses it: headless Chromium (tests/cdp.py)
opens the served page on a loopback port, types a job into the form (a seeded model, then a
pasted config.json), reads the ranked table and follows the shared URL; the assertions compare
what the page shows with /api/estimate's answer for the same fields. Screenshots go to a temp
folder (and to GPUCOST_REPORT_SHOTS when it names one).

Needs Chromium (Debian's `chromium`); without one these tests skip and say so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from flows import web
from tests.cdp import Chromium, find_chromium, screenshot_folder
from tests.replay_warehouse import replay_only_home
from tests.served import TINY_CONFIG, hub_cache, running, serve_env

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="no Chromium to drive: install Debian's `chromium` (apt-get install chromium) or point "
    "GPUCOST_CHROMIUM at a Chromium or Chrome binary",
)
LAPTOP = (1366, 900)
NARROW = (375, 812)
READY = "document.body && document.body.dataset.ready === 'true' && !!document.body.dataset.planned"
ANSWERED = "['200', '422', '503', 'error'].includes(document.body.dataset.planned)"
RANKED = """[...document.querySelectorAll('#plan-table tbody tr')].map(tr => ({
    provider: tr.dataset.provider, instance_type: tr.dataset.instance, region: tr.dataset.region,
    total: Number(tr.dataset.total), shown: tr.querySelector('td.total').textContent}))"""
MEMORY = """Object.fromEntries([...document.querySelectorAll('#plan-memory tbody tr')].map(tr =>
    [tr.dataset.component, tr.cells[1].textContent]))"""
NO_SIDEWAYS_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = replay_only_home(tmp_path_factory.getbasetemp())
    with serve_env(home, hub_cache(tmp_path_factory.mktemp("hub"))), running(web.create_app()) as url:
        yield url


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with screenshot_folder(tmp_path_factory.mktemp("serve-shots")) as folder:
        yield folder


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    assert CHROMIUM is not None
    with Chromium(CHROMIUM, width=LAPTOP[0], height=LAPTOP[1], timeout=90, loopback=True) as chromium:
        yield chromium


def api(served: str, fields: dict[str, str]) -> dict[str, Any]:
    answer = httpx.post(f"{served}/api/estimate", json=fields, timeout=90, trust_env=False)
    assert answer.status_code == 200, answer.text
    return answer.json()


def open_page(browser: Chromium, url: str, size: tuple[int, int] = LAPTOP, *, mobile: bool = False) -> None:
    browser.viewport(*size, mobile=mobile, scale=2 if mobile else 1)
    # from elsewhere, so the same URL with its #plan is a new page load, not a jump within one
    browser.open("about:blank")
    browser.open(url)
    browser.wait_for(READY, timeout=90)


def type_into(browser: Chromium, selector: str, text: str) -> None:
    """Focus the field and type `text` over what it holds, as keystrokes would."""
    browser.click(selector)
    browser.evaluate(f"document.querySelector({json.dumps(selector)}).select()")
    browser.page("Input.insertText", text=text)


def submit(browser: Chromium) -> None:
    browser.evaluate("document.body.dataset.planned = 'typing'")
    browser.click("#plan-submit")
    browser.wait_for(ANSWERED, timeout=90)


def expected_rows(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "provider": o["provider"],
            "instance_type": o["instance_type"],
            "region": o["region"],
            "total": o["total_usd"],
        }
        for o in answer["offers"]
    ]


def shown_rows(browser: Chromium) -> list[dict[str, Any]]:
    return [
        {k: r[k] for k in ("provider", "instance_type", "region", "total")} for r in browser.evaluate(RANKED)
    ]


def test_the_served_page_opens_on_the_job_form_and_the_comparison_still_works(browser, served):
    open_page(browser, served + "/")
    assert browser.evaluate("document.body.dataset.view") == "plan"
    assert browser.evaluate("document.body.dataset.planned") == "idle"  # no job yet: nothing asked
    browser.evaluate("location.hash = '#compare'")
    browser.wait_for("document.body.dataset.view === 'compare'")
    assert browser.evaluate("document.querySelectorAll('#compare-table tbody tr').length") > 0
    assert browser.console_errors() == []


def test_a_seeded_model_typed_into_the_form_ranks_the_offers_the_api_ranks(browser, served, shots):
    open_page(browser, served + "/")
    type_into(browser, "#plan-model", "Llama-3.1-8B")
    browser.choose("#plan-form [name=method]", "qlora")
    type_into(browser, "#plan-form [name=tokens]", "50M")
    submit(browser)
    assert browser.evaluate("document.body.dataset.planned") == "200"
    answer = api(served, {"model": "Llama-3.1-8B", "method": "qlora", "tokens": "50M"})
    assert shown_rows(browser) == expected_rows(answer)
    # the bill item by item, each item the API names a column, the total as the API adds it
    headers = browser.evaluate(
        "[...document.querySelectorAll('#plan-table thead th')].map(th => th.textContent)"
    )
    assert [h for h in headers if h.replace(" ", "_") in answer["bill_items"]] == [
        item.replace("_", " ") for item in answer["bill_items"]
    ]
    top = browser.evaluate(RANKED)[0]
    assert top["shown"].startswith(f"${answer['offers'][0]['total_usd']:,.2f}")
    memory = browser.evaluate(MEMORY)
    assert set(memory) == set(answer["memory"]["memory_gb"])
    assert float(memory["total_gb"]) == pytest.approx(answer["memory"]["memory_gb"]["total_gb"], abs=0.01)
    assert "sample data" in browser.evaluate("document.getElementById('plan-answer').textContent")
    excluded = browser.evaluate("document.querySelectorAll('#plan-excluded tbody tr').length")
    assert excluded == len(answer["excluded"])
    # the job is in the URL: only what differs from the defaults
    query = parse_qs(urlsplit(browser.evaluate("location.href")).query)
    assert query == {"job.model": ["Llama-3.1-8B"], "job.method": ["qlora"], "job.tokens": ["50M"]}
    browser.screenshot(shots / "serve-seeded-laptop.png", full_page=True)


def test_a_shared_url_opens_on_the_same_job_and_answer(browser, served):
    link = served + "/?job.model=Llama-3.1-8B&job.method=qlora&job.tokens=50M&job.spot=true#plan"
    open_page(browser, link)
    browser.wait_for(ANSWERED, timeout=90)
    assert browser.evaluate("document.querySelector('#plan-model').value") == "Llama-3.1-8B"
    assert browser.evaluate("document.querySelector('#plan-form [name=spot]').checked") is True
    answer = api(served, {"model": "Llama-3.1-8B", "method": "qlora", "tokens": "50M", "spot": "true"})
    assert shown_rows(browser) == expected_rows(answer)


def test_a_pasted_config_json_is_estimated_like_the_api_estimates_it(browser, served, shots):
    open_page(browser, served + "/")
    type_into(browser, "#plan-config", json.dumps(TINY_CONFIG, indent=2))
    type_into(browser, "#plan-form [name=tokens]", "20M")
    submit(browser)
    assert browser.evaluate("document.body.dataset.planned") == "200"
    answer = api(served, {"config_json": json.dumps(TINY_CONFIG, indent=2), "tokens": "20M"})
    assert answer["model_id"] == TINY_CONFIG["_name_or_path"]
    assert shown_rows(browser) == expected_rows(answer)
    # the link holds the pasted config too: following it answers the same
    link = browser.evaluate("location.href")
    open_page(browser, link)
    browser.wait_for(ANSWERED, timeout=90)
    assert shown_rows(browser) == expected_rows(answer)
    browser.screenshot(shots / "serve-pasted-laptop.png", full_page=True)


def test_bad_fields_are_listed_each_in_the_flags_words(browser, served):
    open_page(browser, served + "/?job.model=Llama-3.1-8B&job.tokens=lots&job.checkpoint_every=often#plan")
    browser.wait_for(ANSWERED, timeout=90)
    assert browser.evaluate("document.body.dataset.planned") == "422"
    listed = browser.evaluate("[...document.querySelectorAll('#plan-errors li')].map(li => li.dataset.field)")
    assert sorted(listed) == ["checkpoint_every", "tokens"]
    assert (
        browser.evaluate("document.querySelector('#plan-form [name=tokens]').getAttribute('aria-invalid')")
        == "true"
    )
    assert browser.evaluate("document.getElementById('plan-result').hidden") is True


def test_at_375_px_the_form_and_the_ranked_offers_fit_the_screen(browser, served, shots):
    open_page(browser, served + "/?job.model=Llama-3.1-8B&job.method=qlora#plan", NARROW, mobile=True)
    browser.wait_for(ANSWERED, timeout=90)
    assert browser.evaluate("window.innerWidth") == NARROW[0]
    assert browser.evaluate(NO_SIDEWAYS_SCROLL)
    # each ranked offer is a card: no header row, every value named, the total inside the screen
    assert browser.evaluate("getComputedStyle(document.querySelector('#plan-table thead')).display") == "none"
    inside = browser.evaluate(
        "[...document.querySelectorAll('#plan-table td.total')].map(td => {"
        " const r = td.getBoundingClientRect();"
        " return r.width > 0 && r.left >= 0 && r.right <= window.innerWidth; })"
    )
    assert inside and all(inside)
    assert browser.evaluate("document.querySelector('#plan-table td.total').dataset.label") == "bill total"
    browser.screenshot(shots / "serve-seeded-375.png", full_page=True)
