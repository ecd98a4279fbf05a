"""Messages that point at the cause (issue 19 item 5): a cut body says "truncated: retried N
times", a bot-challenge page says "challenge", not "has the endpoint changed its format?"."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from connectors.base import FetchError, LayoutChanged, RawResponse, challenge_page, ends_early
from connectors.http import make_client

BODY = json.dumps({"offers": [{"gpu": "H100", "price": 2.49}, {"gpu": "A100", "price": 1.29}]}).encode()
XML = b"<?xml version='1.0'?><Envelope><Cube><Cube currency='USD' rate='1.08'/></Cube></Envelope>"
# a challenge interstitial in Cloudflare's shape, written for this test
CHALLENGE = (
    b"<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>"
    b"<script>window._cf_chl_opt={cvId: '3'};</script></body></html>"
)


def client_serving(*bodies: tuple[int, bytes, dict[str, str]], retries: int = 2):
    """A client whose server answers `bodies` in turn (the last one again once they run out)."""
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        status, body, headers = bodies[min(len(calls), len(bodies) - 1)]
        calls.append(request)
        return httpx.Response(status, content=body, headers=headers)

    client = make_client(transport=httpx.MockTransport(handler), retries=retries, sleep=lambda _: None)
    return client, calls


JSON_TYPE = {"content-type": "application/json"}


@pytest.mark.parametrize("cut", [len(BODY) // 2, 12, len(BODY) - 1])
def test_a_json_body_cut_short_is_retried_then_says_truncated(cut):
    client, calls = client_serving((200, BODY[:cut], JSON_TYPE))
    with pytest.raises(
        FetchError, match=r"truncated: retried 2 times, and every JSON body ended early"
    ) as exc:
        client.fetch("GET", "https://api.example.test/offers")
    assert "changed its format" not in str(exc.value) and len(calls) == 3


def test_a_body_cut_once_is_fetched_again_whole():
    client, calls = client_serving((200, BODY[:40], JSON_TYPE), (200, BODY, JSON_TYPE))
    assert client.fetch("GET", "https://api.example.test/offers").json() == json.loads(BODY)
    assert len(calls) == 2


def test_an_xml_body_cut_short_says_truncated():
    client, _ = client_serving((200, XML[: len(XML) - 20], {"content-type": "text/xml"}), retries=1)
    with pytest.raises(FetchError, match=r"truncated: retried 1 times, and every XML body ended early"):
        client.fetch("GET", "https://www.ecb.example.test/eurofxref-daily.xml")


@pytest.mark.parametrize(
    ("body", "content_type", "expected"),
    [
        (BODY, "application/json", None),
        (BODY[:30], "application/json", "JSON"),
        (b'{"note": "an unterminated str', "", "JSON"),  # by its first byte, no type given
        (b'{"offers": 1} trailing', "application/json", None),  # not cut: something else is wrong
        (b"<html>not json</html>", "application/json", None),  # another format: the parser says so
        (b"", "application/json", None),  # empty is empty, not cut
        (XML, "application/xml", None),
        (XML[:50], "application/xml", "XML"),
        (b"<html><body><table>", "text/html; charset=utf-8", None),  # pages read their own HTML
    ],
)
def test_ends_early_tells_a_cut_body_from_a_wrong_one(body, content_type, expected):
    assert ends_early(body, content_type) == expected


def test_raw_json_of_a_cut_body_says_truncated_and_a_wrong_one_says_format():
    def raw(body: bytes) -> RawResponse:
        return RawResponse("https://x.test/a", "GET", 200, datetime.now(UTC), body=body)

    with pytest.raises(FetchError, match="truncated: the JSON body ends early, mid-value at byte"):
        raw(BODY[:25]).json()
    with pytest.raises(LayoutChanged, match="changed its format"):
        raw(b"<html></html>").json()


@pytest.mark.parametrize(
    ("status", "body", "headers"),
    [
        (403, CHALLENGE, {"content-type": "text/html"}),
        (503, CHALLENGE, {"content-type": "text/html"}),
        (200, CHALLENGE, {"content-type": "text/html"}),
        (403, b"<html>blocked</html>", {"cf-mitigated": "challenge", "content-type": "text/html"}),
    ],
)
def test_a_challenge_page_says_challenge_and_what_to_do(status, body, headers):
    client, _ = client_serving((status, body, headers), retries=0)
    with pytest.raises(FetchError, match=rf"answered HTTP {status} with a challenge: .*Rerun later") as exc:
        client.fetch("GET", "https://www.example.test/pricing")
    assert "from another network" in str(exc.value)


def test_an_ordinary_page_with_cloudflares_script_is_no_challenge():
    """Cloudflare injects its challenge-platform script into ordinary pages: that alone is no mark."""
    page = (
        b"<html><title>Pricing</title><script src='/cdn-cgi/challenge-platform/scripts/jsd/main.js'></script>"
    )
    assert not challenge_page({"content-type": "text/html", "server": "cloudflare"}, page)


def test_no_real_capture_is_taken_for_a_challenge_or_a_cut_body(shared_raw: Path):
    """The detectors over every real capture (../shared/data/raw): none of them is either."""
    checked = 0
    for path in sorted(shared_raw.rglob("*")):
        if not path.is_file() or path.suffix not in (".json", ".xml", ".html", ".htm"):
            continue
        body = path.read_bytes()
        kind = {".json": "application/json", ".xml": "application/xml"}.get(path.suffix, "text/html")
        assert not challenge_page({}, body), path
        assert ends_early(body, kind) is None, path
        checked += 1
    assert checked
