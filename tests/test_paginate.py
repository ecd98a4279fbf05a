"""One paginator for the paged APIs: every page in order, a token seen twice stops the listing, and
so does a page past the cap; each paged connector goes through it (a looping answer, an endless one)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from connectors import azure, digitalocean, gcp, scaleway, vultr
from connectors.base import LayoutChanged, RawResponse, paginate
from connectors.http import make_client


def _listing(tokens: list[str | None]) -> tuple[list[str | None], Callable[..., Any], Callable[..., Any]]:
    """A listing whose page N answers tokens[N-1] as the next token; records the tokens asked for."""
    asked: list[str | None] = []

    def fetch_page(token: str | None, number: int) -> RawResponse:
        asked.append(token)
        url = f"https://api.example.test/list?page={number}"
        return RawResponse(url=url, method="GET", status=200, fetched_at=datetime.now(UTC), body=b"{}")

    def next_token(page: RawResponse, number: int) -> str | None:
        return tokens[number - 1]

    return asked, fetch_page, next_token


def test_every_page_in_order_until_the_token_runs_out():
    asked, fetch_page, next_token = _listing(["a", "b", None])
    pages = list(paginate(fetch_page, next_token, max_pages=3, what="the list"))
    assert [p.url.rsplit("=", 1)[1] for p in pages] == ["1", "2", "3"]
    assert asked == [None, "a", "b"]


def test_an_empty_token_ends_the_listing_too():
    asked, fetch_page, next_token = _listing([""])
    assert len(list(paginate(fetch_page, next_token, max_pages=5, what="the list"))) == 1
    assert asked == [None]


def test_a_token_seen_twice_stops_before_following_it_again():
    asked, fetch_page, next_token = _listing(["a", "b", "a", "never"])
    pages = []
    with pytest.raises(LayoutChanged, match=r"the list: page 3 gives the next-page token 'a' a second time"):
        pages.extend(paginate(fetch_page, next_token, max_pages=10, what="the list"))
    assert asked == [None, "a", "b"] and len(pages) == 3  # the pages read are yielded before the stop


def test_a_listing_past_the_cap_stops_with_the_hint():
    asked, fetch_page, next_token = _listing([f"t{i}" for i in range(10)])
    with pytest.raises(LayoutChanged, match=r"more than 4 pages; is paging looping\? is the filter on\?"):
        list(paginate(fetch_page, next_token, max_pages=4, what="the list", hint="is the filter on?"))
    assert len(asked) == 4  # never a fifth request


# --- each paged connector, through its own fetch -------------------------------------------------------

# slug -> (connector, credentials, the JSON of a page whose next token is `token`)
PAGED: dict[str, tuple[Any, dict[str, str], Callable[[str], dict[str, Any]]]] = {
    "azure": (azure, {}, lambda token: {"Items": [], "NextPageLink": f"{azure.API_URL}?$skip={token}"}),
    "digitalocean": (
        digitalocean,
        {"DIGITALOCEAN_TOKEN": "t"},
        lambda token: {"sizes": [], "links": {"pages": {"next": f"{digitalocean.SIZES_URL}?page={token}"}}},
    ),
    "gcp": (gcp, {"GOOGLE_API_KEY": "k"}, lambda token: {"skus": [], "nextPageToken": token}),
    "vultr": (vultr, {}, lambda token: {"plans": [], "meta": {"links": {"next": token}}}),
}


def _fetch_all(connector: Any, creds: dict[str, str], answer: Callable[[httpx.Request], dict]) -> int:
    requests = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json=answer(request))

    with make_client(transport=httpx.MockTransport(handler), retries=0) as client:
        list(connector.fetch(client, creds))
    return len(requests)


@pytest.mark.parametrize("slug", sorted(PAGED))
def test_a_looping_answer_stops_each_paged_connector(slug: str):
    connector, creds, page = PAGED[slug]
    with pytest.raises(LayoutChanged, match="a second time"):
        _fetch_all(connector, creds, lambda request: page("same"))


@pytest.mark.parametrize("slug", sorted(PAGED))
def test_an_endless_answer_stops_each_paged_connector_at_its_cap(slug: str, monkeypatch):
    connector, creds, page = PAGED[slug]
    monkeypatch.setattr(connector, "MAX_PAGES", 3)
    made = iter(range(1000))
    with pytest.raises(LayoutChanged, match="more than 3 pages"):
        _fetch_all(connector, creds, lambda request: page(f"p{next(made)}"))


def test_scaleway_stops_at_its_cap_when_total_count_is_never_reached(monkeypatch):
    monkeypatch.setattr(scaleway, "MAX_PAGES", 3)
    product = {"product": "x", "locality": {"zone": "fr-par-2"}}
    with pytest.raises(LayoutChanged, match=r"more than 3 pages.*product_types"):
        _fetch_all(scaleway, {}, lambda request: {"products": [product], "total_count": 10**6})
