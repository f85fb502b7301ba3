"""The dashboard's figures for notebooks and scripts: pure functions, Report -> plotly Figure.

The same functions draw the dashboard and the HTML report (they live in ``ccdiag.app.figures``,
which imports plotly only, never Dash): this module re-exports them, so a notebook needs
neither Dash nor the ``[app]`` extra. Each figure says what was measured in its title; a figure
whose data the report does not carry shows "not measured" and why instead of raising.

    from ccdiag import api, figures
    pair = api.load_pair("baseline.json.gz", "treatment.json.gz")
    report = api.diagnose_pair(pair)
    figures.delta_waterfall(report).show()
    for fig in figures.mechanism_figures(report, "launch_toll", api.evidence_series(pair)):
        fig.show()
    figures.timeline(api.step_timeline(pair, 3)).show()

Overview (a Report): ``step_time``, ``delta_waterfall``, ``top_fixes``, ``ledger``,
``mechanism_per_step``. Evidence (a Report and, optionally, ``api.evidence_series(pair)``
for the per-event samples): ``launch_costs``, ``gpu_idle_gaps``, ``copy_latency``,
``copy_concurrency``, ``blocked_calls``, ``collective_bandwidth``, ``uvm_faults``,
``setup_costs``, ``host_code_ops``, or all of one mechanism's with ``mechanism_figures``.
Timeline: ``timeline(api.step_timeline(pair, step_index))``.
"""

from __future__ import annotations

from ccdiag.app.figures import (
    blocked_calls,
    collective_bandwidth,
    copy_concurrency,
    copy_latency,
    delta_waterfall,
    gpu_idle_gaps,
    host_code_ops,
    launch_costs,
    ledger,
    mechanism_figures,
    mechanism_per_step,
    not_measured,
    setup_costs,
    step_time,
    timeline,
    top_fixes,
    uvm_faults,
)

__all__ = [
    "blocked_calls",
    "collective_bandwidth",
    "copy_concurrency",
    "copy_latency",
    "delta_waterfall",
    "gpu_idle_gaps",
    "host_code_ops",
    "launch_costs",
    "ledger",
    "mechanism_figures",
    "mechanism_per_step",
    "not_measured",
    "setup_costs",
    "step_time",
    "timeline",
    "top_fixes",
    "uvm_faults",
]
