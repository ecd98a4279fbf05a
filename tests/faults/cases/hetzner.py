"""Hetzner: faults in the hand-written GPU matrix page and price feed of the replay cassette.

The target matches both exchanges (`www.hetzner.com`): the GPU and the plan name live in the page,
the prices in the feed, so each mutation edits the body it applies to and passes the other
through (`either`); the fault tests then check the effect (a quarantine, a held price, an
unmapped GPU, a failed run). `unknown_gpu` renames GEX45's GPU and its plan name (its hardware
maps by plan in instance_types.csv), `renamed_key` renames the feed's `hourly` rate key.
"""

from __future__ import annotations

import json
from typing import Any

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, Mutation, edit_json, renaming, replace_all


def either(page: Mutation | None = None, feed: Mutation | None = None) -> Mutation:
    """`feed` on the JSON price feed, `page` on the HTML page; the other body is left as it is."""

    def mutate(body: bytes) -> bytes:
        try:
            json.loads(body)
        except ValueError:
            return page(body) if page is not None else body
        return feed(body) if feed is not None else body

    return mutate


def _gex45_fsn1(data: Any) -> dict[str, Any]:
    return data["products"]["ROBOT_1768"]["locations"][0]["prices"]["hourly"]


def _zero(data: Any) -> None:
    _gex45_fsn1(data)["EUR"] = 0


def _ten_times(data: Any) -> None:
    _gex45_fsn1(data)["EUR"] *= 10


FAULTS = BodyFaults(
    target="www.hetzner.com",
    bad_row=either(feed=edit_json(_zero)),
    price_jump=either(feed=edit_json(_ten_times)),
    unknown_gpu=either(
        page=lambda body: replace_all("GEX45", "GEX99")(
            replace_all("PRO 4000 Blackwell SFF", UNKNOWN_GPU)(body)
        )
    ),
    renamed_key=either(feed=renaming("hourly")),
)
