"""``python manage.py sweeper [--once]``: the sweeper daemon (``jobs.sweeper.Sweeper``)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

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

    def handle(self, *args, once: bool = False, **options) -> None:
        code = Sweeper().run(once=once)
        if code:
            raise SystemExit(code)
