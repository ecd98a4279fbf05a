"""Scaleway: faults in page 1 of the Product Catalog cassette (H100-SXM-8-80G, L40S-4-48G, a CPU type).

Offers map by instance type first (warehouse/seeds/instance_types.csv), so `unknown_gpu` renames
both the GPU type and the offer id of one product.
"""

from __future__ import annotations

from typing import Any

from tests.faults.bodies import UNKNOWN_GPU, BodyFaults, edit_json, renaming


def _first_gpu_product(data: Any) -> dict[str, Any]:
    return next(p for p in data["products"] if p["properties"]["hardware"].get("gpu"))


def _zero_price(data: Any) -> None:
    _first_gpu_product(data)["price"]["retail_price"].update(units=0, nanos=0)


def _ten_times(data: Any) -> None:
    retail = _first_gpu_product(data)["price"]["retail_price"]
    nanos = (retail["units"] * 10**9 + retail["nanos"]) * 10
    retail.update(units=nanos // 10**9, nanos=nanos % 10**9)


def _unknown_gpu(data: Any) -> None:
    product = _first_gpu_product(data)
    product["properties"]["hardware"]["gpu"]["type"] = UNKNOWN_GPU
    product["properties"]["instance"]["offer_id"] = product["product"] = "ZETA-Z9-8-80G"


FAULTS = BodyFaults(
    target="public-catalog/products?page=1&",
    bad_row=edit_json(_zero_price),
    price_jump=edit_json(_ten_times),
    unknown_gpu=edit_json(_unknown_gpu),
    renamed_key=renaming("retail_price"),
)
