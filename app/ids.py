"""Component ids, as constants: every layout and callback refers to these names."""

from __future__ import annotations

# --- the shell (present on every page)
REPORT_STORE = "report-store"  # {"key": <content hash>, "label": str}: the analysis shown
REQUEST_STORE = "request-store"  # {"kind": sample|dir|upload|default, "id"/"tokens", "n"}
JOB_STORE = "job-store"  # {"job": <job id>}
STAGED_STORE = "staged-store"  # {"baseline": {"token", "label", "mb"}, "treatment": {...}}
POLL = "poll-interval"
STATUS = "status-line"
PROGRESS = "status-progress"
CANCEL = "status-cancel"  # cancels the queued or running analysis
BANNER = "failure-banner"  # shown when the last analysis failed
PAIR_LABEL = "pair-label"
VERDICT = "verdict-line"
NAV = "nav"

# --- overview
OVERVIEW = "overview-content"
OV_STEP_TIME = "overview-step-time"
OV_WATERFALL = "overview-waterfall"
OV_FIXES = "overview-fixes"
OV_TOP_MECHANISM = "overview-top-mechanism"
OV_SKIPPED = "overview-skipped"

# --- mechanism pages
MECH_ID = "mechanism-id"  # a Store with the page's mechanism id
MECH_CONTENT = "mechanism-content"

# --- timeline
TL_STEP = "timeline-step"
TL_RANK = "timeline-rank"
TL_GRAPH = "timeline-graph"
TL_INFO = "timeline-info"
TL_CONTROLS = "timeline-controls"

# --- recommendations
RECS = "recommendations-content"

# --- export
EXPORT_INFO = "export-info"
EXPORT_JSON = "export-json"
EXPORT_MD = "export-md"
EXPORT_HTML = "export-html"
EXPORT_TRACE = "export-trace"
EXPORT_DOWNLOAD = "export-download"
EXPORT_MSG = "export-message"

# --- traces (choose a pair)
SAMPLE_PICK = "sample-pick"
DIR_PICK = "dir-pick"
DIR_BLOCK = "dir-block"
UPLOAD_BASELINE = "upload-baseline"
UPLOAD_TREATMENT = "upload-treatment"
UPLOAD_CHECK = "upload-check"  # client-side size check result, per side
UPLOAD_MSG = "upload-message"
UPLOAD_LIMIT = "upload-limit"  # a Store with the server's limit in bytes
UPLOAD_LIMIT_NOTE = "upload-limit-note"  # the limit, said on the page once it is known
TRACES_MSG = "traces-message"

# --- what if CC (issue 13: the prediction page, app/pages/whatif.py)
WHATIF_TRACE = "whatif-trace"  # dropdown: a listed pair's CC-off side, by opaque source id
WHATIF_PLATFORM = "whatif-platform"
WHATIF_CONTENT = "whatif-content"
