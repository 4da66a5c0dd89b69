"""``python manage.py sweeper [--once]``: the sweeper daemon (``jobs.sweeper.Sweeper``)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from jobs.durable.observe import serve_metrics
from jobs.durable.sessions import use_direct_connection
from jobs.sweeper import Sweeper


class Command(BaseCommand):
    help = (
        "Run the sweeper: lease recovery, the run backstop (records runs no tab saved, then "
        "judges them), the judge backstop and the doc_html trim, every tick until SIGTERM."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--once",
            action="store_true",
            help="Run a single tick, wait for its backstop, then exit.",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=0,
            help="Serve this process's Prometheus metrics on this port (default: none).",
        )
        parser.add_argument(
            "--metrics-addr",
            default="127.0.0.1",
            help="Address the metrics port binds to (default 127.0.0.1; it has no token).",
        )

    def run_from_argv(self, argv: list[str]) -> None:
        # A sweeper process of its own (not call_command in another program): with
        # DATABASE_DIRECT_URL it connects to the server itself, not through the pooler
        # (jobs.durable.sessions): a session of its own, its code version announced at connect.
        use_direct_connection()
        super().run_from_argv(argv)

    def handle(self, *args, once: bool = False, **options) -> None:
        if options.get("metrics_port"):
            serve_metrics(options["metrics_port"], options.get("metrics_addr", "127.0.0.1"))
        code = Sweeper().run(once=once)
        if code:
            raise SystemExit(code)
