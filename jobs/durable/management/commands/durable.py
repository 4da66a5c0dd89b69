"""``manage.py durable start|status|result|cancel|signal|explain|list`` (thin over cli.py)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from jobs.durable import cli


class Command(BaseCommand):
    help = "Control and inspect durable workflow instances."

    def add_arguments(self, parser) -> None:
        verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

        def verb(name: str, help: str):
            sub = verbs.add_parser(name, help=help, description=help)
            sub.add_argument(
                "--user", help="act as this user (their permissions and instances only)"
            )
            return sub

        p = verb("start", "start a workflow; prints the new instance id")
        p.add_argument("workflow", help="dotted path to a workflow object (or a factory)")
        p.add_argument("input", nargs="?", help="the start input as JSON")
        p.add_argument("--label", default="")
        p.add_argument("--on-failure", default="", help="dotted path of fn(instance_id, error)")
        for name, text in (
            ("status", "print an instance's status"),
            ("result", "print a completed instance's result as JSON"),
            ("cancel", "cancel an unfinished instance"),
        ):
            verb(name, text).add_argument("instance")
        p = verb("signal", "send a signal (an event) to an instance")
        p.add_argument("instance")
        p.add_argument("name")
        p.add_argument("data", nargs="?", help="the signal's data as JSON")
        p = verb("explain", "print an instance's graph with each step's state, and its waits")
        p.add_argument("instance")
        p.add_argument("--json", action="store_true", help="print JSON instead of text")
        p = verb("list", "list instances, newest first, a page at a time")
        p.add_argument("--status")
        p.add_argument("--label")
        p.add_argument("--page", type=int, default=1)
        p.add_argument("--per-page", type=int, default=20)

    def handle(self, *args: Any, verb: str, **options: Any) -> None:
        try:
            user = cli.find_user(options.get("user"))
            out = self.run_verb(verb, user, options)
        except cli.CliError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(out)

    def run_verb(self, verb: str, user: Any, o: dict[str, Any]) -> str:
        if verb == "start":
            return cli.start(
                o["workflow"],
                input=o["input"],
                label=o["label"],
                user=user,
                on_failure=o["on_failure"],
            )
        if verb == "signal":
            return cli.signal(o["instance"], o["name"], data=o["data"], user=user)
        if verb == "explain":
            return cli.explain(o["instance"], user=user, as_json=o["json"])
        if verb == "list":
            return cli.list_instances(
                status=o["status"],
                label=o["label"],
                page=o["page"],
                per_page=o["per_page"],
                user=user,
            )
        return getattr(cli, verb)(o["instance"], user=user)
