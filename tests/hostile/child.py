"""Run one hostile input through the analysis as the pipeline does, in this (limited) process.

``python -m tests.hostile.child NAME`` builds the input ``NAME`` of tests/hostile/inputs.py and
runs extract (the deployment's limits), parse with the citation and entry limits, verify in the
pipeline's chunks, the report and the marked document, or loads it as a library. It prints one
JSON line: ``outcome`` ("error" for an AnalysisInputError, "ok", or "crash" with the exception's
type for anything else), ``message``, ``seconds`` (the analysis alone, not the building) and
``peak_rss_mb`` (of the whole process). The caller sets RLIMIT_AS, so a memory regression ends
here as a MemoryError ("crash") instead of on the machine.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time


def main(name: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "acurio.settings")
    import django

    django.setup()
    from django.conf import settings

    from jobs import analysis
    from jobs.pipeline import VERIFY_CHUNK, extraction_limits, parse_bounded
    from tests.hostile.inputs import BY_NAME

    case = BY_NAME[name]
    filename, data = case.build()
    result: dict = {"name": name, "bytes": len(data)}
    started = time.perf_counter()
    try:
        if case.kind == "library":
            library = analysis.load_library(
                data, filename, max_json_depth=settings.ACURIO_JSON_MAX_DEPTH
            )
            result["entries"] = len(library.items)
        else:
            document = analysis.extract(data, filename, limits=extraction_limits())
            del data  # the pipeline's parse step does not hold the upload either
            parsed = parse_bounded(
                document.html,
                max_citations=settings.ACURIO_MAX_CITATIONS,
                max_entries=settings.ACURIO_MAX_ENTRIES,
            )
            citations, references = parsed["citations"], parsed["references"]
            verdicts: list[dict] = []
            for i in range(0, len(citations), VERIFY_CHUNK):
                verdicts += analysis.verify(
                    citations[i : i + VERIFY_CHUNK], references, parsed["style"]
                )
            report = analysis.build_report(filename, parsed, verdicts)
            analysis.annotate_html(document.html, report["citations"])
            result.update(citations=len(citations), entries=len(references))
        result["outcome"] = "ok"
    except analysis.AnalysisInputError as exc:
        result.update(outcome="error", message=str(exc))
    except BaseException as exc:
        result.update(outcome="crash", message=f"{type(exc).__name__}: {exc}"[:500])
    result["seconds"] = round(time.perf_counter() - started, 3)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
