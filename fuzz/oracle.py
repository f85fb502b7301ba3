"""What a reader may do with a hostile file: read it, or raise ccdiag's one-line InputError.

:func:`check` is the fuzzing oracle. It runs what ``ccdiag summary --json`` runs (parse, steps,
summary) and, when asked, what ``ccdiag analyze`` runs on (seed, mutant). It returns
``"ok"`` or ``"input_error"``; every other exception is a bug and propagates. It also checks:

- an InputError names a file and is one line (the CLI prints it as is and exits 2);
- the summary is valid JSON (no NaN or infinity: ``json.dumps(allow_nan=False)``);
- nothing is lost: for a Kineto document that is still valid JSON with an event list,
  ``n_events + sum(skipped) == len(traceEvents)``;
- with ``repeat``: reading the file twice gives the same summary (determinism).
"""

from __future__ import annotations

import json
from pathlib import Path

from ccdiag import api
from ccdiag.errors import InputError
from fuzz.mutations import Case


class OracleError(AssertionError):
    """The reader returned, but broke a promise (a bug like any exception)."""


def check(case: Case, baseline: Path | None = None, repeat: bool = False) -> str:
    """Run the reader on ``case``; ``"ok"``, ``"input_error"``, or raise (a bug)."""
    try:
        trace = api.load_trace(case.path)
        summary = api.summarize(trace)
        json.dumps(summary, allow_nan=False)
        if case.total_events is not None and trace.meta.format == "kineto":
            accounted = trace.meta.n_events + sum(trace.meta.skipped.values())
            if accounted != case.total_events:
                raise OracleError(
                    f"events lost: {trace.meta.n_events} read + "
                    f"{sum(trace.meta.skipped.values())} skipped != {case.total_events} in the file"
                )
        if repeat:
            again = api.summarize(api.load_trace(case.path))
            if again != summary:
                diff = sorted(k for k in summary if summary[k] != again.get(k))
                raise OracleError(f"two reads of the same file differ in {diff}")
        if baseline is not None:
            report = api.diagnose(baseline, case.path)
            json.loads(api.render_report(report, "json"))
    except InputError as exc:
        line = exc.line()
        if "\n" in line or exc.path is None or not line.startswith(exc.path.name):
            raise OracleError(f"InputError not one line naming a file: {line!r}") from exc
        return "input_error"
    return "ok"
