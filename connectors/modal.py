"""Modal: serverless GPU containers billed per second, from the public pricing page.

Source: `GET https://modal.com/pricing` (public HTML, no auth, no documented rate limit; one
request a run). Checked 2026-12-02 against transcriptions of the page (api-evangelist/modal-labs
`plans/modal-labs-plans-pricing.yml`, 2026-07-01; several projects quoting it 2026-08..09): under
the heading "Compute costs" (a "Per second" / "Per hour" toggle) the subsection "GPU Tasks" lists
one row per GPU type, a label and a rate ("Nvidia H100" / "$0.001097 / sec"), then "CPU"
("Physical core (2 vCPU equivalent)" / "$0.0000131 / core / sec", "*minimum of 0.125 cores per
container") and "Memory" ("$0.00000222 / GiB / sec"). Sandboxes and Notebooks price CPU and
memory higher in a later section; GPU Functions are what a fine-tuning job runs as.

What becomes an offer: each GPU row, read by its label, at its per-GPU rate (the cell states USD
and per second; the page prices a GPU type, and a container of n GPUs, `gpu="H100:n"`, bills n of
them), offered in every count Modal sells per container: "B200, H200, H100, A100, L4, T4 and L40S
instances support up to 8 GPUs ... A10 instances support up to 4 GPUs ... always attached to the
same physical machine" (modal.com/docs/guide/gpu, read 2026-12-02; B300 joined the 8-GPU list
in later copies). A type the docs give no count for (RTX PRO 6000) is offered as 1 GPU and says
`provider_data["gpu_counts_documented"] = False`. `region="global"`: the base rate applies where
no region is pinned (pinning one multiplies the whole bill, docs guide/region-selection).

What the price covers: the GPU only. A GPU Function also pays for its CPU cores and memory, at
the rates of the "CPU" and "Memory" rows, whichever is higher of request and use, with a default
request of 0.125 cores and 128 MiB (docs guide/resources); the job chooses them, so they are not
in `price_per_hour` (providers.csv `price_covers=gpu`) and each offer carries them in
`provider_data` (`cpu_usd_per_core_hour`, `memory_usd_per_gib_hour`, `min_cpu_cores`).

Not spot: Modal sells no interruptible tier. Every Function is preemptible by default and
`nonpreemptible=True` is not supported for GPU Functions (docs guide/preemption), so these
`on_demand` offers say `provider_data["preemptible"] = True`: a fine-tuning run checkpoints as on
spot, at the one price there is. Serverless: billed per second of container time, nothing while
scaled to zero (`billing_unit="second"`; cold start in provider_storage.csv).

Quirks handled: the page may print a GPU row both per second and per hour (the toggle); the two
must agree (to 1 %), else `LayoutChanged`, and the per-second one, the billing unit, is kept. A
rate that is not a positive number is a flagged offer (`problem`); a row without its basis is
that row's problem, every row so a `LayoutChanged`; no "GPU Tasks" heading, or one with no rate
under it, raises `LayoutChanged` naming it. Scope: `on_demand:gpu-tasks`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import bs4

from connectors import pages
from connectors.base import HOURS_PER_UNIT, Excluded, LayoutChanged, Offer, RawResponse, Unchanged

name = "modal"
requires: tuple[str, ...] = ()

PAGE_URL = "https://modal.com/pricing"
WHERE = "the GPU Tasks list of modal.com/pricing"
GPU_HEADING = "GPU Tasks"
SCOPE = "on_demand:gpu-tasks"
# What the page leaves unsaid in a GPU row, and where it is said instead.
PER_GPU = pages.Stated(
    per_gpu=True,
    source="a row prices one GPU of its type; gpu='H100:8' bills eight (modal.com/docs/guide/gpu)",
    binding=False,
)
# GPUs per container Modal sells, by the model word of the row; modal.com/docs/guide/gpu
# (2026-12-02): up to 8 for B300/B200/H200/H100/A100/L4/T4/L40S, up to 4 for A10.
MAX_GPUS: Mapping[str, int] = {
    "b300": 8,
    "b200": 8,
    "h200": 8,
    "h100": 8,
    "a100": 8,
    "l4": 8,
    "t4": 8,
    "l40s": 8,
    "a10": 4,
}
AGREE = 0.01  # a per-hour rate printed to the cent may differ from seconds x 3600 this much
_MIN_CORES = re.compile(r"minimum of\s*([\d.]+)\s*cores?", re.I)


def fetch(
    client: Any,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield pages.fetch_page(client, PAGE_URL, previous)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    yield from pages.read_pages(responses, (SCOPE,), _page_items)


def _page_items(response: RawResponse) -> Iterator[Offer]:
    doc = pages.soup(response)
    host = host_rates(doc)
    yield from gpu_offers(doc, host)


def priced_rows(block: bs4.Tag) -> list[tuple[str, list[str]]]:
    """(label, price texts) in page order: each text stating a currency amount is a price of the
    label read last before it; labels with no price after them (a tab name) are dropped."""
    rows: list[tuple[str, list[str]]] = []
    label: str | None = None
    for string in block.find_all(string=True):
        if not isinstance(string.parent, bs4.Tag) or string.parent.name in ("script", "style", "template"):
            continue
        text = pages.clean(str(string))
        if not text or pages.label_matches(text, GPU_HEADING):
            continue
        money = pages.parse_money(text)
        if money is not None and money.currency:
            if label is None:
                raise LayoutChanged(f"price {text!r} in {WHERE} has no label before it; layout changed?")
            if rows and rows[-1][0] == label:
                rows[-1][1].append(text)
            else:
                rows.append((label, [text]))
        else:
            label = text
    return rows


def host_rates(doc: bs4.Tag) -> dict[str, Any]:
    """The CPU and memory rates a GPU Function pays on top, per hour, from the "CPU" and "Memory"
    rows of Compute costs; a rate the page does not show is left out (the GPU price stands alone)."""
    rates: dict[str, Any] = {}
    for heading, key in (("CPU", "cpu_usd_per_core_hour"), ("Memory", "memory_usd_per_gib_hour")):
        try:
            block = pages.section(doc, heading, where="modal.com/pricing")
        except LayoutChanged:
            continue
        for _, texts in priced_rows(block):
            money = pages.parse_money(texts[0])
            if money is not None and money.unit is not None and money.amount > 0:
                rates[key] = round(money.amount / HOURS_PER_UNIT[money.unit], 8)
                break
        if heading == "CPU" and (match := _MIN_CORES.search(pages.clean(block.get_text(" ")))):
            rates["min_cpu_cores"] = float(match.group(1))
    return rates


def gpu_offers(doc: bs4.Tag, host: Mapping[str, Any]) -> Iterator[Offer]:
    block = pages.section(doc, GPU_HEADING, where="modal.com/pricing")
    rows = priced_rows(block)
    if not rows:
        raise LayoutChanged(f"no priced row under `{GPU_HEADING}` in modal.com/pricing; layout changed?")
    basis_errors: list[LayoutChanged] = []
    for label, texts in rows:
        try:
            quote = row_rate(label, texts)
        except LayoutChanged as exc:
            basis_errors.append(exc)
            yield from _offers(label, None, texts[0], host, problem=str(exc))
            continue
        yield from _offers(label, quote, quote.text, host)
    if len(basis_errors) == len(rows):
        raise basis_errors[0]


def row_rate(label: str, texts: Sequence[str]) -> pages.Quote:
    """The row's rate with its basis; a row printed in two units must agree with itself."""
    where = f"the `{label}` row of {WHERE}"
    quotes = [q for text in texts if (q := pages.quote(text, stated=PER_GPU, where=where)) is not None]
    if not quotes:
        raise LayoutChanged(f"{where}: {texts!r} is not a rate; has the page layout changed?")
    kept = min(quotes, key=lambda q: HOURS_PER_UNIT[q.unit])  # the finest unit: what is billed
    for other in quotes:
        if abs(other.per_hour() - kept.per_hour()) > AGREE * kept.per_hour():
            raise LayoutChanged(
                f"{where}: {kept.text!r} is {kept.per_hour():.4f}/hour but {other.text!r} is "
                f"{other.per_hour():.4f}/hour; has the page layout changed?"
            )
    return kept


def gpu_name(label: str) -> str:
    """The GPU as our aliases know it: "Nvidia A100, 80 GB" -> "A100 80GB"."""
    model = pages.parse_gpu_label(label).name
    return " ".join(re.sub(r"(\d+)\s*GB\b", r"\1GB", model.replace(",", " ")).split())


def _offers(
    label: str, quote: pages.Quote | None, text: str, host: Mapping[str, Any], problem: str | None = None
) -> Iterator[Offer]:
    rate = quote.per_hour() if quote is not None else math.nan
    if problem is None and not (math.isfinite(rate) and rate > 0):
        problem = f"rate {text!r} is not a positive number"
    model = gpu_name(label)
    most = MAX_GPUS.get(model.split(" ")[0].lower()) if model else None
    data: dict[str, Any] = {
        "label": label,
        "price_text": text,
        "price_per_gpu_hour": rate,
        "preemptible": True,  # every Function is; GPU Functions cannot opt out (docs guide/preemption)
        "serverless": True,
        **host,
    }
    if quote is not None:
        data |= quote.flags()
    if most is None:
        data["gpu_counts_documented"] = False
    for count in range(1, (most or 1) + 1):
        total = rate * count
        yield Offer(
            provider=name,
            instance_type=f"{count}x {label}",
            region="global",
            pricing_type="on_demand",
            price_source="list",
            price_per_hour=round(total, 6) if math.isfinite(total) else total,
            currency=quote.currency if quote is not None else "USD",
            gpu_name_raw=model or None,
            gpu_count=float(count),
            gpu_memory_gb_raw=pages.parse_gpu_label(label).vram_gb,
            billing_unit="second",
            provider_data=data,
            scope=SCOPE,
            problem=problem,
        )
