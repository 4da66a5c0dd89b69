"""``manage.py worker``: run durable workflow steps (a thin shell over jobs.durable.Worker)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs.durable.observe import serve_metrics
from jobs.durable.sessions import use_direct_connection
from jobs.durable.worker import Worker


class Command(BaseCommand):
    help = "Run ready durable-workflow steps until SIGTERM/SIGINT (or, with --once, until none is ready)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--once", action="store_true", help="exit when no step is ready instead of waiting"
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            default=1,
            help="steps run at once in this process, one thread and connection each (default 1)",
        )
        parser.add_argument(
            "--poll-interval",
            type=float,
            default=1.0,
            help="seconds between polls when no NOTIFY arrives (default 1)",
        )
        parser.add_argument(
            "--group",
            type=int,
            default=None,
            help="claim up to N ready steps at once and commit their checkpoints together"
            " (group commit; default ACURIO_WORKER_GROUP, 1 = off)",
        )
        parser.add_argument(
            "--queues",
            default="",
            help="serve only these queues, comma-separated (default: every queue)",
        )
        parser.add_argument(
            "--versions",
            default="",
            help="run only instances started by these code versions (ACURIO_CODE_VERSION),"
            " comma-separated (default: every version)",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=0,
            help="serve this process's Prometheus metrics on this port (default: none)",
        )
        parser.add_argument(
            "--metrics-addr",
            default="127.0.0.1",
            help="address the metrics port binds to (default 127.0.0.1; it has no token)",
        )

    def run_from_argv(self, argv: list[str]) -> None:
        # A worker process of its own (manage.py worker; call_command in another program
        # leaves that program's connection alone): its session settings and LISTEN need a
        # session of its own, so with DATABASE_DIRECT_URL it connects there, not through the
        # pooler (jobs.durable.sessions).
        use_direct_connection()
        super().run_from_argv(argv)

    def handle(
        self,
        *args,
        once: bool,
        concurrency: int,
        poll_interval: float,
        queues: str,
        group: int | None,
        **options,
    ) -> None:
        names = [name.strip() for name in queues.split(",") if name.strip()]
        versions = [v.strip() for v in options["versions"].split(",") if v.strip()]
        try:
            worker = Worker(
                concurrency=concurrency,
                once=once,
                poll_interval=poll_interval,
                group=group,
                queues=names or None,
                versions=versions or None,
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if options["metrics_port"]:
            serve_metrics(options["metrics_port"], options["metrics_addr"])
        worker.install_signal_handlers()
        worker.run()
