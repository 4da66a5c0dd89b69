"""The admin's change-list search on a large jobs table: Acurio's search against Django's.

Runs on the database ``bench/dashboard_bench.py`` fills (1,000,000 jobs by default; run that
first, or pass ``--db``). For each term, ``EXPLAIN ANALYZE`` of the change list's page query
(51 rows, newest first) built by ``AnalysisJobAdmin.get_search_results`` (name trigram index OR
owner ids) and by Django's stock ``ModelAdmin.get_search_results`` (an OR across the owner
join). Prints the execution time and the scan each plan starts with.

Usage::

    .venv/bin/python bench/dashboard_bench.py --jobs 1000000 --renders 3
    .venv/bin/python bench/admin_search.py [--db acurio_bench_admin] [TERM ...]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_TERMS = ["thesis-99999", "zzz-not-there", "student7", "bob", ".docx"]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("terms", nargs="*", default=DEFAULT_TERMS)
    parser.add_argument("--db", default="acurio_bench_admin")
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    args = parser.parse_args()
    os.environ.update(
        DJANGO_SETTINGS_MODULE="acurio.settings",
        DATABASE_URL=f"{args.server}/{args.db}",
        SECRET_KEY="bench-only-not-a-secret-long-enough-for-the-fifty-character-minimum",
        LOG_LEVEL="WARNING",
    )
    import django

    django.setup()
    from django.contrib import admin
    from django.contrib.admin import ModelAdmin
    from django.db import connection

    from jobs.admin import AnalysisJobAdmin
    from jobs.models import AnalysisJob

    model_admin = AnalysisJobAdmin(AnalysisJob, admin.site)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM jobs_analysisjob")
        (jobs,) = cursor.fetchone()
        cursor.execute("ANALYZE jobs_analysisjob")
    print(f"{jobs:,} jobs in {args.db}\n")
    print("| term | search | execution ms | rows | first scan |")
    print("|---|---|---:|---:|---|")
    searches = {
        "Acurio (trigram OR owner ids)": model_admin.get_search_results,
        "Django's default (OR across the join)": lambda request, qs, term: (
            ModelAdmin.get_search_results(model_admin, request, qs, term)
        ),
    }
    for term in args.terms:
        for name, search in searches.items():
            queryset, _ = search(None, AnalysisJob.objects.order_by("-id"), term)
            sql, params = queryset[:51].query.sql_with_params()
            with connection.cursor() as cursor:
                cursor.execute("EXPLAIN (ANALYZE, FORMAT TEXT) " + sql, params)
                plan = [row[0] for row in cursor.fetchall()]
                cursor.execute(sql, params)
                rows = len(cursor.fetchall())
            execution = next(line for line in plan if "Execution Time" in line)
            ms = float(re.search(r"([\d.]+) ms", execution).group(1))
            scan = next((line.strip("-> ").split("  (")[0] for line in plan if "Scan" in line), "")
            print(f"| `{term}` | {name} | {ms:,.2f} | {rows} | {scan} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
