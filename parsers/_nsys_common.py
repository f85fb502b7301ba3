"""Decisions shared by the Nsight Systems readers (SQLite export and ``nsys stats`` CSV).

Both readers see the same nsys vocabulary: API names with ``_vNNNN`` suffixes, memory kinds by
label (``Pageable``, ``Pinned``, ``Device``, ``Managed``, ``Unknown``), copy labels such as
``Device-to-Device`` or ``Unified Host-to-Device``. The rules here turn them into the event
schema's columns, as polars expressions so they run once per column, not once per row.

Copy direction is decided from the memory kinds, not from the label: under Confidential
Computing the driver emulates pinned memory, so a pinned host-to-device copy is recorded as
``Device-to-Device`` with a ``Managed`` source (and device-to-host with a ``Managed``
destination). ``Managed -> Device`` is therefore ``HtoD`` and ``Device -> Managed`` is
``DtoH``; the memory kinds are kept as recorded, so a rule can still tell them apart.

Unified-memory migrations (labels ``Unified ...``) become ``memcpy`` rows whose source and
destination are both ``managed`` (their recorded kinds are ``Unknown``): that pair is how the
rules recognise a UVM migration, as opposed to an explicit copy with one managed side.
"""

from __future__ import annotations

import polars as pl

from ccdiag import apis

#: nsys memory-kind labels (ENUM_CUDA_MEM_KIND.label, CSV SrcMemKd/DstMemKd) -> MemKind value.
MEM_KIND_BY_LABEL: dict[str, str] = {
    "pageable": "pageable",
    "pinned": "pinned",
    "device": "device",
    "array": "array",
    "managed": "managed",
    "device static": "device",
    "managed static": "managed",
    "unknown": "unknown",
}

#: nsys copy labels (ENUM_CUDA_MEMCPY_OPER.label, the text in ``[CUDA memcpy <label>]``)
#: -> CopyKind value implied by the label alone.
COPY_KIND_BY_LABEL: dict[str, str | None] = {
    "host-to-device": "HtoD",
    "device-to-host": "DtoH",
    "host-to-array": "HtoD",
    "array-to-host": "DtoH",
    "array-to-array": "DtoD",
    "array-to-device": "DtoD",
    "device-to-array": "DtoD",
    "device-to-device": "DtoD",
    "host-to-host": "HtoH",
    "peer-to-peer": "PtoP",
    "unified host-to-device": "HtoD",
    "unified device-to-host": "DtoH",
    "unified device-to-device": "DtoD",
    "unknown": None,
}

_HOST = ("pageable", "pinned")
_DEVICE = ("device", "array")


def strip_api_suffix(expr: pl.Expr) -> pl.Expr:
    """``cudaMemcpyAsync_v3020`` -> ``cudaMemcpyAsync``, as :func:`ccdiag.apis.normalize`
    (which also drops the driver's ABI suffix: ``cuGetProcAddress_v2`` -> ``cuGetProcAddress``)."""
    return apis.base_name(expr)


def mem_kind(label: pl.Expr) -> pl.Expr:
    """nsys memory-kind label -> MemKind value (null stays null, unknown labels -> unknown)."""
    mapped = (
        label.str.strip_chars()
        .str.to_lowercase()
        .replace_strict(MEM_KIND_BY_LABEL, default="unknown", return_dtype=pl.String)
    )
    return pl.when(label.is_null()).then(pl.lit(None, pl.String)).otherwise(mapped)


def label_copy_kind(label: pl.Expr) -> pl.Expr:
    """Copy direction implied by the nsys label alone (before the memory kinds are checked)."""
    return (
        label.str.strip_chars()
        .str.to_lowercase()
        .replace_strict(COPY_KIND_BY_LABEL, default=None, return_dtype=pl.String)
    )


def is_unified(label: pl.Expr) -> pl.Expr:
    """True for unified-memory migration labels (``Unified Host-to-Device`` ...)."""
    return label.str.to_lowercase().str.starts_with("unified").fill_null(False)


def managed_if_unified(mem: pl.Expr, unified: pl.Expr) -> pl.Expr:
    """A UVM migration's side whose kind was not recorded is managed memory."""
    unknown = mem.is_null() | (mem == "unknown")
    return pl.when(unified & unknown).then(pl.lit("managed")).otherwise(mem)


def copy_kind(src: pl.Expr, dst: pl.Expr, label_kind: pl.Expr, peer: pl.Expr) -> pl.Expr:
    """Direction of a copy from its memory kinds; the label decides only what they cannot.

    Args:
        src: source MemKind value.
        dst: destination MemKind value.
        label_kind: the CopyKind implied by the nsys label (:func:`label_copy_kind`).
        peer: true when source and destination are different devices.

    Returns:
        A CopyKind value (or null when nothing tells).
    """
    host_src, host_dst = src.is_in(_HOST), dst.is_in(_HOST)
    dev_src, dev_dst = src.is_in(_DEVICE), dst.is_in(_DEVICE)
    return (
        pl.when(host_src & dev_dst)
        .then(pl.lit("HtoD"))
        .when(dev_src & host_dst)
        .then(pl.lit("DtoH"))
        .when(host_src & host_dst)
        .then(pl.lit("HtoH"))
        .when((src == "managed") & dev_dst)
        .then(pl.lit("HtoD"))
        .when(dev_src & (dst == "managed"))
        .then(pl.lit("DtoH"))
        .when(dev_src & dev_dst & (peer.fill_null(False) | (label_kind == "PtoP")))
        .then(pl.lit("PtoP"))
        .when(dev_src & dev_dst)
        .then(pl.lit("DtoD"))
        .otherwise(label_kind)
    )


def kernel_kind(name: pl.Expr) -> pl.Expr:
    """``collective`` for NCCL kernels (name contains ``nccl``), else ``kernel``."""
    nccl = name.str.to_lowercase().str.contains("nccl", literal=True).fill_null(False)
    return pl.when(nccl).then(pl.lit("collective")).otherwise(pl.lit("kernel"))


def is_graph_launch(name: pl.Expr) -> pl.Expr:
    """API calls that launch a CUDA graph (:data:`ccdiag.apis.GRAPH_LAUNCH_APIS`)."""
    return apis.is_graph_launch(name).fill_null(False)
