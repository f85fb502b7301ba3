"""Platform profiles for ``ccdiag predict``: small YAML files of sourced CC costs.

One file per platform in this folder (``h100.yaml``, ``b200.yaml``, ``b300.yaml``); a user copies
one, edits the numbers and passes its path (``--platform ./my_platform.yaml``). Every constant has
a value, the published range (``low``, ``high``), a unit and a source; :func:`load_platform`
validates the file with pydantic and raises :class:`ccdiag.errors.InputError` (exit 2, one line
naming the file and the field) when a field is missing or malformed.

The emulator's constants (``ccdiag.emulate.platforms``) are the ``value`` fields of these files;
``tests/test_platforms.py`` checks that they agree.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ccdiag.errors import InputError

SCHEMA = "ccdiag-platform/1"


class Constant(BaseModel):
    """One CC cost: the value used for the median prediction, its published range, its source."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(description="used for the median prediction")
    low: float = Field(description="low end of the published range")
    high: float = Field(description="high end of the published range")
    unit: str
    source: str = Field(min_length=3, description="where the number comes from, with its tag")
    datasets: list[str] = Field(
        default_factory=list, description="raw data the number was derived from"
    )

    @model_validator(mode="after")
    def _ordered(self) -> Constant:
        if not (self.low <= self.value <= self.high):
            raise ValueError(
                f"needs low <= value <= high, got {self.low}, {self.value}, {self.high}"
            )
        if self.low < 0:
            raise ValueError("a cost cannot be negative")
        return self


#: The constants a profile must have, with the unit each one is in.
UNITS: dict[str, str] = {
    "kernel_launch_toll_ns": "ns",
    "library_launch_toll_ns": "ns",
    "graph_launch_toll_ns": "ns",
    "copy_toll_ns": "ns",
    "copy_bandwidth_gbps": "GB/s",
    "sync_toll_ns": "ns",
    "collective_bandwidth_ratio": "ratio",
    "collective_step_latency_ns": "ns",
    "uvm_bandwidth_gbps": "GB/s",
    "uvm_migration_toll_ns": "ns",
    "context_creation_ns": "ns",
}

#: Constants where a larger value means a cheaper CC (bandwidths, ratios): the band's ``low``
#: prediction takes their ``high`` end.
HIGHER_IS_CHEAPER = frozenset(
    {"copy_bandwidth_gbps", "collective_bandwidth_ratio", "uvm_bandwidth_gbps"}
)


class Platform(BaseModel):
    """The CC costs of one platform (a ``ccdiag-platform/1`` YAML file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_: Literal["ccdiag-platform/1"] = Field(alias="schema")
    name: str = Field(min_length=1)
    description: str = ""
    kernel_launch_toll_ns: Constant = Field(description="per cudaLaunchKernel (runtime API)")
    library_launch_toll_ns: Constant = Field(description="per driver-API launch (cuLaunchKernel)")
    graph_launch_toll_ns: Constant = Field(description="per cudaGraphLaunch")
    copy_toll_ns: Constant = Field(description="fixed cost of one host<->device copy")
    copy_bandwidth_gbps: Constant = Field(description="host<->device bandwidth through the bridge")
    sync_toll_ns: Constant = Field(description="added to a synchronize call")
    collective_bandwidth_ratio: Constant = Field(description="CC / CC-off collective bandwidth")
    collective_step_latency_ns: Constant = Field(description="added latency per ring step")
    uvm_bandwidth_gbps: Constant = Field(description="encryption throughput of UVM migrations")
    uvm_migration_toll_ns: Constant = Field(description="fixed cost of one UVM migration")
    context_creation_ns: Constant = Field(description="one-time: added to context creation")
    copy_cost_at: Literal["gpu", "host"] = Field(
        default="gpu",
        description="where a host copy pays toll + bytes / bandwidth: gpu (real CC: the "
        "bounce-buffer copy is the copy) or host (an LD_PRELOAD emulator's busy wait inside the "
        "copy call)",
    )
    notes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _units(self) -> Platform:
        for key, unit in UNITS.items():
            got = getattr(self, key).unit
            if got != unit:
                raise ValueError(f"{key}: unit must be {unit!r}, got {got!r}")
        if self.copy_bandwidth_gbps.low <= 0 or self.uvm_bandwidth_gbps.low <= 0:
            raise ValueError("bandwidths must be > 0")
        if self.collective_bandwidth_ratio.low <= 0:
            raise ValueError("collective_bandwidth_ratio must be > 0")
        return self

    def at(self, end: Literal["value", "low", "high"]) -> dict[str, float]:
        """Every constant at one end of the band: ``low`` = the cheapest CC, ``high`` the dearest."""
        out: dict[str, float] = {}
        for key in UNITS:
            c: Constant = getattr(self, key)
            if end == "value":
                out[key] = c.value
            else:
                cheap = end == "low"
                pick_high = (key in HIGHER_IS_CHEAPER) == cheap
                out[key] = c.high if pick_high else c.low
        return out

    def sources(self) -> dict[str, dict[str, Any]]:
        """JSON-ready constants with their ranges and sources."""
        return {k: getattr(self, k).model_dump() for k in UNITS}


def known_platforms() -> list[str]:
    """Names of the shipped profiles."""
    files = resources.files(__package__)
    return sorted(p.name[:-5] for p in files.iterdir() if p.name.endswith(".yaml"))


def _error_line(exc: ValidationError) -> str:
    e = exc.errors()[0]
    where = ".".join(str(x) for x in e["loc"]) or "file"
    if e["type"] == "missing":
        return f"missing field {where!r}"
    if e["type"] == "extra_forbidden":
        return f"unknown field {where!r}"
    msg = e["msg"].removeprefix("Value error, ")
    return f"field {where!r}: {msg}"


def parse_platform(text: str, origin: str | Path) -> Platform:
    """Validate a profile's YAML text; InputError naming ``origin`` and the bad field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputError(origin, f"not valid YAML{where}") from None
    if not isinstance(data, dict):
        raise InputError(origin, "a platform profile is a YAML mapping of constants")
    try:
        return Platform.model_validate(data)
    except ValidationError as exc:
        raise InputError(origin, f"bad platform profile: {_error_line(exc)}") from None


def load_platform(name_or_path: str | Path) -> Platform:
    """A shipped profile by name (``h100``, ``b200``, ``b300``) or a user's YAML file by path.

    Raises:
        InputError: unknown name (the message lists the known ones), unreadable or invalid file.
    """
    text = str(name_or_path)
    known = known_platforms()
    if text.lower() in known:
        res = resources.files(__package__) / f"{text.lower()}.yaml"
        return parse_platform(res.read_text(encoding="utf-8"), f"{text.lower()}.yaml")
    path = Path(text)
    looks_like_file = path.suffix.lower() in (".yaml", ".yml") or "/" in text or path.exists()
    if not looks_like_file:
        raise InputError(
            None, f"unknown platform {text!r}: choose from {', '.join(known)} or a .yaml file"
        )
    if not path.is_file():
        raise InputError(path, "no such platform file")
    if path.stat().st_size > 1_000_000:
        raise InputError(path, "a platform profile is a small YAML file (this one is over 1 MB)")
    try:
        body = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read: {exc}") from None
    return parse_platform(body, path)
