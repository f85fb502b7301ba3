"""CUDA API names by role, shared by the parsers, the summary and the rules.

Names are compared after :func:`normalize` / :func:`base_name`, which drop Nsight Systems'
version suffixes (``cudaMemcpyAsync_v3020`` -> ``cudaMemcpyAsync``, ``cuLaunchKernel_v7000`` ->
``cuLaunchKernel``; the driver's own ``_v2`` suffix goes the same way, so the sets below hold
the bare names). Per-thread-stream variants (``_ptsz`` / ``_ptds``) are listed explicitly.
"""

from __future__ import annotations

import re

import polars as pl

_SUFFIX = r"_v\d+$"
_SUFFIX_RE = re.compile(_SUFFIX)


def _with_ptsz(names: set[str]) -> frozenset[str]:
    """Add the per-thread default stream variants (``_ptsz`` / ``_ptds``)."""
    return frozenset(names | {n + s for n in names for s in ("_ptsz", "_ptds")})


#: The shortest call that can hold a CUDA context's creation (driver and device set-up, 0.16 to
#: 0.20 s on H100 with CC off in the ISPASS'25 runs; tens of ms on any GPU). The attribution
#: takes a whole-program trace's first runtime call for it only when it lasts this long, and
#: ``ccdiag predict`` tolls the longest setup call of at least this length.
CONTEXT_CALL_NS = 50_000_000

#: Kernel launches (runtime and driver, CUDA 11-13).
KERNEL_LAUNCH_APIS = _with_ptsz(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchKernelEx",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cuLaunchCooperativeKernelMultiDevice",
        "cuLaunchGrid",
        "cuLaunchGridAsync",
    }
)

#: CUDA graph launches (one call submits a whole graph of kernels and copies).
GRAPH_LAUNCH_APIS = _with_ptsz({"cudaGraphLaunch", "cuGraphLaunch"})

#: Host-side launch calls counted as "launches": kernel launches and graph launches.
LAUNCH_APIS = KERNEL_LAUNCH_APIS | GRAPH_LAUNCH_APIS

#: Host calls that block the CPU thread until GPU work finishes.
SYNC_APIS = _with_ptsz(
    {
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaEventSynchronize",
        "cudaThreadSynchronize",
        "cuStreamSynchronize",
        "cuCtxSynchronize",
        "cuEventSynchronize",
    }
)

#: Calls that make one stream wait for an event (GPU-side ordering; the host does not block).
STREAM_WAIT_APIS = _with_ptsz({"cudaStreamWaitEvent", "cuStreamWaitEvent"})

#: Memory copies (runtime and driver).
MEMCPY_APIS = _with_ptsz(
    {
        "cudaMemcpy",
        "cudaMemcpyAsync",
        "cudaMemcpy2D",
        "cudaMemcpy2DAsync",
        "cudaMemcpy3D",
        "cudaMemcpy3DAsync",
        "cudaMemcpyPeer",
        "cudaMemcpyPeerAsync",
        "cudaMemcpyToSymbol",
        "cudaMemcpyToSymbolAsync",
        "cudaMemcpyFromSymbol",
        "cudaMemcpyFromSymbolAsync",
        "cudaMemcpy2DToArray",
        "cudaMemcpy2DFromArray",
        "cudaMemcpyBatchAsync",
        "cuMemcpy",
        "cuMemcpyAsync",
        "cuMemcpyHtoD",
        "cuMemcpyHtoDAsync",
        "cuMemcpyDtoH",
        "cuMemcpyDtoHAsync",
        "cuMemcpyDtoD",
        "cuMemcpyDtoDAsync",
        "cuMemcpy2D",
        "cuMemcpy2DAsync",
        "cuMemcpy3D",
        "cuMemcpy3DAsync",
        "cuMemcpyPeer",
        "cuMemcpyPeerAsync",
        "cuMemcpyBatchAsync",
    }
)

#: Memsets.
MEMSET_APIS = _with_ptsz(
    {
        "cudaMemset",
        "cudaMemsetAsync",
        "cudaMemset2D",
        "cudaMemset2DAsync",
        "cuMemsetD8",
        "cuMemsetD8Async",
        "cuMemsetD16",
        "cuMemsetD16Async",
        "cuMemsetD32",
        "cuMemsetD32Async",
    }
)


#: Calls that only read host-side state (a kernel's name, whether a stream is capturing, the last
#: error, the current device): no GPU work, no wait. They are host code around a launch or a
#: copy, not a boundary of it (Nsight Systems records ``cuKernelGetName`` right before every
#: ``cudaLaunchKernel``; PyTorch calls ``cudaStreamIsCapturing`` before copies and graph launches).
QUERY_APIS = _with_ptsz(
    {
        "cuKernelGetName",
        "cuFuncGetName",
        "cudaStreamIsCapturing",
        "cuStreamIsCapturing",
        "cudaStreamGetCaptureInfo",
        "cuStreamGetCaptureInfo",
        "cudaGetLastError",
        "cudaPeekAtLastError",
        "cudaGetDevice",
        "cuCtxGetCurrent",
        "cuCtxGetDevice",
        "cudaStreamGetPriority",
        "cuStreamGetPriority",
        "cudaGetFuncBySymbol",
        "cudaPointerGetAttributes",
        "cuPointerGetAttribute",
        "cuPointerGetAttributes",
    }
)


def normalize(name: str) -> str:
    """An API name without Nsight Systems' ``_vNNNN`` suffix."""
    return _SUFFIX_RE.sub("", name)


def base_name(name: pl.Expr) -> pl.Expr:
    """Polars form of :func:`normalize`."""
    return name.str.replace(_SUFFIX, "")


def is_launch(name: pl.Expr) -> pl.Expr:
    """The API call launches a kernel or a graph."""
    return base_name(name).is_in(list(LAUNCH_APIS))


def is_graph_launch(name: pl.Expr) -> pl.Expr:
    """The API call launches a CUDA graph."""
    return base_name(name).is_in(list(GRAPH_LAUNCH_APIS))


def is_sync(name: pl.Expr) -> pl.Expr:
    """The API call blocks the host until GPU work completes."""
    return base_name(name).is_in(list(SYNC_APIS))


def is_memcpy(name: pl.Expr) -> pl.Expr:
    """The API call is a memory copy."""
    return base_name(name).is_in(list(MEMCPY_APIS))
