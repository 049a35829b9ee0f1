"""Read models, one module per consumer: dashboard and `/metrics`, task pages, Slack, GitHub.

The per-table modules in `db/` own their table's writes and its plain reads;
these modules hold the queries that exist for one consumer (joins and
aggregates shaped for a page or a listener), so a table module never grows a
function only one screen needs. Nothing here writes.
"""
