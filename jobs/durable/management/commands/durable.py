"""``manage.py durable start|status|result|cancel|resume|fork|purge|schedule|unschedule|signal|
explain|list`` (thin over cli.py)."""

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
        p.add_argument("--id", help="a workflow id: the same start again is a no-op")
        p.add_argument("--queue", default="default")
        p.add_argument("--priority", type=int, default=0, help="0 (default) to 9, higher first")
        p.add_argument("--delay", type=float, help="seconds before its first step may run")
        for name, text in (
            ("status", "print an instance's status"),
            ("result", "print a completed instance's result as JSON"),
            ("resume", "run a failed or cancelled instance again from its failed steps"),
        ):
            verb(name, text).add_argument("instance")
        p = verb("cancel", "cancel an unfinished instance, or every one matching the filters")
        p.add_argument("instance", nargs="?")
        p.add_argument("--label")
        p.add_argument("--queue")
        p.add_argument("--status", choices=["pending", "running"])
        p = verb("fork", "start a copy that reuses the checkpoints before a step; prints its id")
        p.add_argument("instance")
        p.add_argument("--from-step", required=True, help="a result name or a task's name")
        p = verb("purge", "delete finished instances older than some days, in batches")
        p.add_argument("--older-than-days", type=float, required=True)
        p.add_argument("--status", choices=["completed", "failed", "cancelled"])
        p = verb("schedule", "start a workflow at every slot of a cron expression (UTC)")
        p.add_argument("name")
        p.add_argument("workflow", help="dotted path to a workflow object (or a factory)")
        p.add_argument("input", nargs="?", help="the start input as JSON")
        p.add_argument("--cron", required=True, help="5 fields, e.g. '0 3 * * *'")
        verb("unschedule", "delete a schedule").add_argument("name")
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
                id=o["id"],
                queue=o["queue"],
                priority=o["priority"],
                delay=o["delay"],
            )
        if verb == "cancel" and o["instance"] is None:
            return cli.cancel_where(
                label=o["label"], queue=o["queue"], status=o["status"], user=user
            )
        if verb == "cancel" and (o["label"] or o["queue"] or o["status"]):
            raise cli.CliError("give an instance or filters, not both")
        if verb == "fork":
            return cli.fork(o["instance"], from_step=o["from_step"], user=user)
        if verb == "purge":
            return cli.purge(older_than_days=o["older_than_days"], status=o["status"], user=user)
        if verb == "schedule":
            return cli.schedule(
                o["name"], o["workflow"], cron=o["cron"], input=o["input"], user=user
            )
        if verb == "unschedule":
            return cli.unschedule(o["name"], user=user)
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
