"""``python manage.py analyze FILE [--library FILE] [--json]``: analyse one thesis, no queue."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from jobs.analysis import AnalysisInputError, analyze
from jobs.analysis.summary import format_summary


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


class Command(BaseCommand):
    help = (
        "Analyse the citations of one thesis synchronously and print a summary or the report JSON."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="the thesis: DOCX, PDF, HTML, Markdown or plain text")
        parser.add_argument("--library", help="the author's library: BibTeX, CSL-JSON or RIS")
        parser.add_argument(
            "--json", action="store_true", dest="as_json", help="print the report JSON"
        )

    def handle(self, *args, file: str, library: str | None, as_json: bool, **options) -> None:
        data = _read(file, "file")
        lib = _read(library, "library") if library else None
        max_mb = getattr(settings, "ACURIO_MAX_UPLOAD_MB", None)
        try:
            report = analyze(
                data,
                Path(file).name,
                library=lib,
                library_filename=Path(library).name if library else None,
                resolver_url=getattr(settings, "ACURIO_RESOLVER_URL", None) or None,
                max_bytes=int(max_mb * 1024 * 1024) if max_mb else None,
            )
        except AnalysisInputError as exc:
            # CommandError prints one line on stderr and exits 1, without a traceback.
            raise CommandError(str(exc)) from None
        if as_json:
            self.stdout.write(json.dumps(report, ensure_ascii=False, indent=2))
        else:
            self.stdout.write(format_summary(report))
