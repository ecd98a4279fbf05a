"""How an offer bills, in words: the one answer `estimate`, the page and `gpucost providers` show.

Every price in the warehouse is per instance-hour, so that $/GPU-hour compares across providers;
this module says what an hourly figure does not: that a month-billed rental is paid by the whole
month ("€184.00/month + €79.00 set-up, billed per month"), that an hourly rate is capped at a
monthly price ("€0.34/h, at most €212.30/month + €209.00 set-up, billed per hour"), that a
serverless offer bills only while a run runs. Offers without such a rule get an empty text.

Amounts are the provider's own, in its currency (the monthly figure of a month-billed offer is
its hourly price × 730 h, the month `per_hour` divided it by); the bill in USD is finetune.cost's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from finetune.cost import HOURS_PER_MONTH

# a unit as `gpucost providers` prints it (providers.csv billing_granularity)
UNIT_TEXT = {"per_second": "1 s", "per_minute": "1 min", "per_hour": "1 h", "per_month": "1 month"}
_BILLED = {"per_second": "second", "per_minute": "minute", "per_hour": "hour", "per_month": "month"}
_SYMBOLS = {"USD": "$", "EUR": "€", "GBP": "£"}
SERVERLESS_TEXT = "bills only while running"


def money(amount: float, currency: str | None) -> str:
    """€184.00, $2.50, 1,200.00 INR: the provider's figure in its currency."""
    symbol = _SYMBOLS.get((currency or "").upper())
    return f"{symbol}{amount:,.2f}" if symbol else f"{amount:,.2f} {currency or ''}".rstrip()


def _given(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def billing_rule(offer: Mapping[str, Any]) -> str:
    """The offer's billing rule in words, or "" for plain metered billing.

    Reads `billing_granularity`, `serverless`, `currency`, `published_price_per_hour` (in
    `currency`), `setup_fee` and `monthly_price_cap` (both in `currency`; None: not stated).
    """
    granularity = offer.get("billing_granularity")
    price = _given(offer.get("published_price_per_hour"))
    fee = _given(offer.get("setup_fee"))
    cap = _given(offer.get("monthly_price_cap"))
    currency = offer.get("currency")
    unit = _BILLED.get(granularity or "", "")
    billed = f"billed per {unit}" if unit else ""
    fee_text = f" + {money(fee, currency)} set-up" if fee else ""
    if offer.get("serverless"):
        return ", ".join(t for t in (SERVERLESS_TEXT, billed) if t)
    hourly = f"{money(price, currency)}/h" if price is not None else ""
    if granularity == "per_month" and price is not None:
        head = f"{money(price * HOURS_PER_MONTH, currency)}/month"
    elif cap is not None and hourly:
        head = f"{hourly}, at most {money(cap, currency)}/month"
    elif fee_text:
        head = hourly or "hourly"
    else:
        return ""
    return ", ".join(t for t in (head + fee_text, billed) if t)
