"""The product's questions, answered once: what the CLI, the page, the feeds and any web API ask.

Layer: `connectors`, `finetune` ← `warehouse` ← `answers` ← `flows`. Modules here read the marts
through `warehouse.db` connections (a read-only, sandboxed one is enough), return polars frames,
`answers.rows.Rows` (rows DuckDB computed, where no dataframe is needed) or frozen records, never
print, and raise one error type, `AnswerError`, whose message says what to do.

* `answers.prices`: current prices, history, the time/cost frontier and `OfferFilters`, whose
  rules are stated once (`filter_terms`) and rendered as SQL or polars.
* `answers.estimate`: one job priced on every current offer, or on stated hardware (`--gpu X
  --gpus N`) as a one-row offer frame through the same cost SQL the mart uses.
* `answers.status`: freshness per provider and the runs in progress, for `gpucost status` and the page.
* `answers.report`: the comparison page's data and its self-contained HTML.
* `answers.query`: the user's own read-only SQL (`gpucost sql`), statement by statement.
"""

from __future__ import annotations

from warehouse.errors import WarehouseError

__all__ = ["AnswerError"]


class AnswerError(WarehouseError):
    """A question the warehouse cannot answer as asked: a filter names nothing that exists, a job
    is out of range, or the warehouse has no marts yet. The message says what to do next.

    A WarehouseError, so callers that catch the warehouse's errors catch these too."""
