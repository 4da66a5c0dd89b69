"""The README's three example workflows, runnable as they are::

    python manage.py durable start jobs.durable.examples.process_documents
    python manage.py durable start jobs.durable.examples.request_approval '{"document": 42}'
    python manage.py durable start jobs.durable.examples.squares '{"numbers": [1, 2, 3, 4, 5]}'

``process_documents`` needs a ``documents`` table (see :data:`DOCUMENTS_DDL`);
``request_approval`` calls an approval service at ``APPROVAL_URL``, which must be allowed by
``ACURIO_HTTP_ALLOW`` (e.g. ``ACURIO_HTTP_ALLOW=127.0.0.1:8765``).
"""

from __future__ import annotations

from typing import Any

from jobs.durable.graph import fan_out, http, loop, sql, task, wait_for_signal

DOCUMENTS_DDL = """
CREATE TABLE IF NOT EXISTS documents (
    id bigserial PRIMARY KEY,
    body text NOT NULL,
    processed boolean NOT NULL DEFAULT false
)
"""

# 1. Batch update, as an SQL step in a loop: update the next batch, repeat while it updated
#    rows (a condition on an sql step tests its value: here the statement's row count). Each
#    SQL step commits with its checkpoint: no batch is updated twice.
process_documents = loop(
    sql(
        "UPDATE documents SET processed = true WHERE id IN"
        " (SELECT id FROM documents WHERE NOT processed ORDER BY id LIMIT 100)"
    ).as_("updated"),
    while_="updated",  # 0 rows updated: done
    max_iterations=10_000,
)

# 2. An HTTP call, then a wait for a person's approval, for at most a day.
APPROVAL_URL = "http://127.0.0.1:8765/approvals"


def decision(ctx: Any) -> dict[str, Any]:
    """Turn the approval wait's result into the workflow's answer."""
    approval = ctx["approval"]
    if approval["timed_out"]:
        return {"document": ctx.input["document"], "decision": "timed out"}
    data = approval["data"] or {}
    verdict = "approved" if data.get("approved") else "rejected"
    return {"document": ctx.input["document"], "decision": verdict, "by": data.get("by")}


request_approval = (
    http(APPROVAL_URL, method="POST", body_from="input", max_attempts=5).as_("request")
    >> wait_for_signal("approval", timeout=24 * 3600).as_("approval")
    >> task("jobs.durable.examples.decision")
)


# 3. A fan-out over a list: one child step per chunk of three, joined in order.
def numbers(ctx: Any) -> list[int]:
    return list(ctx.input["numbers"])


def square(ctx: Any) -> list[int]:
    return [n * n for n in ctx.chunk]


def total(ctx: Any) -> dict[str, Any]:
    return {"squares": ctx["squares"], "sum": sum(ctx["squares"])}


squares = (
    task("jobs.durable.examples.numbers").as_("numbers")
    >> fan_out(task("jobs.durable.examples.square"), over="numbers", chunk=3).as_("squares")
    >> task("jobs.durable.examples.total")
)
