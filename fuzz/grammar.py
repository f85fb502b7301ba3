"""Grammar-built inputs, from scratch (no seed traces): Kineto JSON, nsys stats CSV sets, capture
metadata sidecars and special files.

Every generator takes a ``random.Random`` and writes files into a folder; a case is rebuilt
exactly from its seed (``python -m fuzz.hostile --replay SEED``). The Kineto grammar produces a
workload (steps made of CPU ops that launch kernels and copies, with matching correlation ids,
flows, metadata and instant events), then lets each production go wrong on its own: values of
the wrong type, out-of-range numbers, strings with escapes, lone surrogates, control bytes,
``},{`` inside names, deep nesting, duplicate keys, keys out of order, whitespace of any kind
and amount, NaN literals, a BOM, gzip, truncation. JSON is written by this module's own
serializer (so that it can write what ``json.dumps`` would not: duplicate keys, NaN, lone
surrogates, raw invalid UTF-8, odd whitespace).
"""

from __future__ import annotations

import gzip
import os
import random
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# -- the serializer ----------------------------------------------------------------------------


class Raw(bytes):
    """Bytes written as they are (a hostile token: NaN, a broken escape, invalid UTF-8)."""


@dataclass
class Obj:
    """A JSON object as a list of pairs (keys may repeat, order is kept)."""

    pairs: list[tuple[Any, Any]] = field(default_factory=list)


_WS = [b"", b" ", b"\n", b"\t", b"\r\n", b"  ", b"\n    "]


class Writer:
    """JSON text with random (valid) whitespace, escapes and number spellings."""

    def __init__(self, rng: random.Random, style: str) -> None:
        self.rng = rng
        self.style = style  # compact | pretty | random
        self.out: list[bytes] = []

    def ws(self) -> bytes:
        if self.style == "compact":
            return b""
        if self.style == "pretty":
            return b" "
        return self.rng.choice(_WS) if self.rng.random() < 0.3 else b""

    def string(self, s: str) -> bytes:
        rng = self.rng
        if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s and "/" not in s:
            return b'"' + s.encode() + b'"'  # the common case, fast
        parts = [b'"']
        for ch in s:
            o = ord(ch)
            if ch == '"':
                parts.append(b'\\"')
            elif ch == "\\":
                parts.append(b"\\\\")
            elif o < 0x20:
                parts.append(b"\\u%04x" % o)
            elif 0xD800 <= o <= 0xDFFF:
                parts.append(b"\\u%04x" % o)  # a lone surrogate, escaped as Python's json does
            elif o > 0x7F and rng.random() < 0.2:
                if o > 0xFFFF:
                    v = o - 0x10000
                    parts.append(b"\\u%04x\\u%04x" % (0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF)))
                else:
                    parts.append(b"\\u%04x" % o)
            elif ch == "/" and rng.random() < 0.3:
                parts.append(b"\\/")
            else:
                parts.append(ch.encode("utf-8", "surrogatepass"))
        parts.append(b'"')
        return b"".join(parts)

    def value(self, v: Any) -> None:
        out = self.out
        if isinstance(v, Raw):
            out.append(bytes(v))
        elif v is None:
            out.append(b"null")
        elif v is True:
            out.append(b"true")
        elif v is False:
            out.append(b"false")
        elif isinstance(v, int):
            out.append(str(v).encode())
        elif isinstance(v, float):
            if v != v:
                out.append(b"NaN")
            elif v in (float("inf"), float("-inf")):
                out.append(b"Infinity" if v > 0 else b"-Infinity")
            else:
                out.append(repr(v).encode() if self.rng.random() < 0.8 else b"%e" % v)
        elif isinstance(v, str):
            out.append(self.string(v))
        elif isinstance(v, (list, tuple)):
            out.append(b"[")
            for i, x in enumerate(v):
                if i:
                    out.append(b"," + self.ws())
                self.value(x)
            out.append(b"]")
        elif isinstance(v, Obj):
            self._pairs(v.pairs)
        elif isinstance(v, dict):
            self._pairs(list(v.items()))
        else:
            out.append(self.string(str(v)))

    def _pairs(self, pairs: list[tuple[Any, Any]]) -> None:
        out = self.out
        out.append(b"{" + self.ws())
        for i, (k, x) in enumerate(pairs):
            if i:
                out.append(b"," + self.ws())
            out.append(self.string(str(k)) + self.ws() + b":" + self.ws())
            self.value(x)
        out.append(self.ws() + b"}")

    def text(self) -> bytes:
        return b"".join(self.out)


# -- values ------------------------------------------------------------------------------------

_NASTY_STR = [
    "",
    "}, {",
    '"},{"ph":"X"',
    "\\",
    "\ud800",
    "\udfff",
    "a\ud83d",
    "\x00",
    "\u2028",
    "é",
    "𝄞",
    "ProfilerStep#",
    "nccl",
    "Memcpy HtoD (Pinned -> Device)",
    "Memcpy DtoD (Managed -> Device)",
    " " * 50,
    "[" * 20,
]
_NASTY_NUM = [0, -1, 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30]
_NASTY_FLOAT = [0.5, -0.0, 1e308, 1e-320, float("nan"), float("inf"), float("-inf"), 5e15]


def nasty(rng: random.Random, depth: int = 0) -> Any:
    """A value of any JSON type, biased to the ones that break readers."""
    r = rng.random()
    if r < 0.25:
        return rng.choice(_NASTY_NUM)
    if r < 0.4:
        return rng.choice(_NASTY_FLOAT)
    if r < 0.65:
        s = rng.choice(_NASTY_STR)
        return s * rng.randint(1, 4) if rng.random() < 0.5 else s
    if r < 0.72:
        return rng.choice([None, True, False])
    if r < 0.8:
        return Raw(rng.choice([b"NaN", b"-Infinity", b"1e999", b"-0", b"0.0e-0"]))
    if depth > 3:
        return None
    if r < 0.9:
        return [nasty(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {f"k{i}": nasty(rng, depth + 1) for i in range(rng.randint(0, 3))}


def maybe(rng: random.Random, good: Any, p: float) -> Any:
    """``good``, or with probability ``p`` a nasty value instead."""
    return nasty(rng) if rng.random() < p else good


# -- Kineto ------------------------------------------------------------------------------------

_GPU_CATS = ["kernel", "gpu_memcpy", "gpu_memset", "cuda_sync", "gpu_user_annotation"]
_HOST_CATS = ["cpu_op", "cuda_runtime", "cuda_driver", "user_annotation", "python_function"]
_OTHER_CATS = ["ac2g", "fwdbwd", "async_gpu", "Trace", "overhead", "cpu_instant_event", "x" * 9]


def _event(rng: random.Random, p: float, **kv: Any) -> Obj:
    pairs = [(k, maybe(rng, v, p)) for k, v in kv.items() if rng.random() > p / 3]
    if rng.random() < p:
        rng.shuffle(pairs)
    if rng.random() < p / 2 and pairs:
        pairs.append(rng.choice(pairs))  # a duplicate key
    if rng.random() < p / 2:
        pairs.append((rng.choice(["id", "bp", "s", "tts", "extra"]), nasty(rng)))
    return Obj(pairs)


def kineto_events(rng: random.Random, p: float) -> list[Any]:
    """A workload of steps, each op launching kernels and copies (then made to go wrong)."""
    steps = rng.choice([0, 1, 2, 3, 5, 8])
    ops = rng.randint(1, 6)
    t = rng.choice([0.0, 1000.0, 5e12, 1.7e15])
    pid, tid, dev = rng.choice([1, 4242, 2**31 + 5]), rng.choice([1, 77]), rng.choice([0, 1, 7])
    corr = rng.randint(1, 1000)
    evs: list[Any] = []
    for s in range(steps):
        s_start = t
        body: list[Any] = []
        for _ in range(ops):
            t += rng.uniform(1, 20)
            op_start = t
            nk = rng.randint(0, 3)
            for _ in range(nk):
                corr += 1
                launch = rng.choice(["cudaLaunchKernel", "cudaMemcpyAsync", "cudaGraphLaunch"])
                body.append(
                    _event(
                        rng,
                        p,
                        ph="X",
                        cat=rng.choice(["cuda_runtime", "cuda_driver"]),
                        name=launch,
                        pid=pid,
                        tid=tid,
                        ts=t,
                        dur=rng.uniform(2, 15),
                        args={"correlation": corr, "External id": corr},
                    )
                )
                if rng.random() < 0.3:
                    body.append(
                        _event(
                            rng,
                            p,
                            ph="s",
                            cat="ac2g",
                            id=corr,
                            pid=pid,
                            tid=tid,
                            ts=t,
                            name="ac2g",
                            bp="e",
                        )
                    )
                kind = rng.random()
                g_args: dict[str, Any] = {"correlation": corr, "device": dev, "stream": 7}
                if kind < 0.6:
                    name = rng.choice(["gemm_kernel", "ncclDevKernel_AllReduce", "k" * 40])
                    cat = "kernel"
                elif kind < 0.85:
                    name = rng.choice(
                        [
                            "Memcpy HtoD (Pinned -> Device)",
                            "Memcpy DtoH (Device -> Pageable)",
                            "Memcpy DtoD (Managed -> Device)",
                        ]
                    )
                    cat = "gpu_memcpy"
                    g_args["bytes"] = rng.choice([64, 4096, 1 << 20])
                else:
                    name, cat = "Memset (Device)", "gpu_memset"
                    g_args["bytes"] = 256
                if "nccl" in name and rng.random() < 0.5:
                    g_args.update(
                        {
                            "In msg nelems": 1024,
                            "Out msg nelems": 1024,
                            "dtype": rng.choice(["Float", "BFloat16", "Weird"]),
                        }
                    )
                body.append(
                    _event(
                        rng,
                        p,
                        ph="X",
                        cat=cat,
                        name=name,
                        pid=dev,
                        tid=7,
                        ts=t + rng.uniform(0, 30),
                        dur=rng.uniform(1, 50),
                        args=g_args,
                    )
                )
                t += rng.uniform(1, 10)
            op_name = rng.choice(["aten::mm", "aten::copy_", "record_param_comms", "aten::to"])
            op_args: dict[str, Any] = {"External id": corr}
            if op_name in ("aten::copy_", "aten::to"):
                op_args["Concrete Inputs"] = ["", "", rng.choice(["True", "False", 3])]
            if op_name == "record_param_comms":
                op_args.update({"Input Dims": [[rng.randint(0, 99), 8]], "Input type": ["float"]})
            body.append(
                _event(
                    rng,
                    p,
                    ph="X",
                    cat="cpu_op",
                    name=op_name,
                    pid=pid,
                    tid=tid,
                    ts=op_start,
                    dur=max(t - op_start, 0.5),
                    args=op_args,
                )
            )
        step = _event(
            rng,
            p,
            ph="X",
            cat="user_annotation",
            name=f"ProfilerStep#{s}",
            pid=pid,
            tid=tid,
            ts=s_start,
            dur=t - s_start + 1,
        )
        evs.append(step)
        evs.extend(body)
        t += rng.uniform(1, 5)
    for _ in range(rng.randint(0, 4)):  # metadata, instants, other categories
        r = rng.random()
        if r < 0.4:
            evs.append(
                _event(rng, p, ph="M", name="process_name", pid=pid, tid=0, args={"name": "python"})
            )
        elif r < 0.7:
            evs.append(
                _event(
                    rng, p, ph="i", cat="cpu_instant_event", name="i", pid=pid, tid=tid, ts=t, s="t"
                )
            )
        else:
            evs.append(
                _event(
                    rng,
                    p,
                    ph=rng.choice(["X", "B", "E", "C", "?"]),
                    cat=rng.choice(_OTHER_CATS + _GPU_CATS + _HOST_CATS),
                    name=rng.choice(_NASTY_STR),
                    pid=pid,
                    tid=tid,
                    ts=t,
                    dur=1.0,
                )
            )
    if rng.random() < p:  # entries that are not event objects
        evs.insert(rng.randint(0, len(evs)), nasty(rng))
    if rng.random() < p / 2:
        rng.shuffle(evs)
    return evs


def kineto_doc(rng: random.Random, p: float) -> tuple[Any, int | None]:
    """(document, number of traceEvents entries if the document is well formed)."""
    events = kineto_events(rng, p)
    header: list[tuple[Any, Any]] = []
    if rng.random() < 0.8:
        header.append(("schemaVersion", maybe(rng, 1, p)))
    if rng.random() < 0.5:
        header.append(
            (
                "deviceProperties",
                [
                    maybe(
                        rng,
                        {
                            "id": 0,
                            "name": rng.choice(["NVIDIA H200", "NVIDIA H100 NVL", "\ud800"]),
                            "totalGlobalMem": 150000000000,
                        },
                        p,
                    )
                    for _ in range(rng.randint(0, 3))
                ],
            )
        )
    if rng.random() < 0.3:
        header.append(
            (
                "distributedInfo",
                maybe(
                    rng,
                    {
                        "backend": "nccl",
                        "rank": rng.choice([0, 1, 2**64, -1]),
                        "world_size": rng.choice([1, 2, 0]),
                    },
                    p,
                ),
            )
        )
    if rng.random() < 0.3:
        header.append(("cuda_runtime_version", maybe(rng, 12080, p)))
    tail: list[tuple[Any, Any]] = []
    if rng.random() < 0.5:
        tail.append(("traceName", maybe(rng, "/tmp/x.json", p)))
    if rng.random() < 0.3:
        tail.append(("displayTimeUnit", "ms"))
    if rng.random() < 0.03:  # a member ccdiag does not read, past 1 MiB: skipped unread
        n = rng.randint(1 << 20, 3 << 20)
        blob: Any = rng.choice(
            [
                "ab" * (n // 2),
                'x}, {\\"y' * (n // 7),  # false cut points and escapes inside it
                [rng.randint(0, 9) for _ in range(n // 8)],
                {"frames": [{"f": "x" * 60, "line": i} for i in range(n // 80)]},
            ]
        )
        tail.append((rng.choice(["stackTraces", "traceName", "x"]), blob))
        if rng.random() < 0.5:  # a member that is read, after it (last one wins, as in json)
            tail.append(("distributedInfo", {"rank": rng.randint(0, 7), "world_size": 8}))
    pairs = header + [("traceEvents", events)] + tail
    well_formed = True
    if rng.random() < p / 3:  # a second traceEvents key
        pairs.insert(rng.randint(0, len(pairs)), ("traceEvents", kineto_events(rng, p)[:3]))
        well_formed = False
    if rng.random() < p / 2:
        rng.shuffle(pairs)
    if rng.random() < 0.05:
        return events, len(events)  # a bare array document
    return Obj(pairs), (len(events) if well_formed else None)


def serialize(rng: random.Random, doc: Any, p: float) -> bytes:
    w = Writer(rng, rng.choice(["compact", "pretty", "random"]))
    w.value(doc)
    text = w.text()
    if rng.random() < p / 4:
        text = b"\xef\xbb\xbf" + text
    if rng.random() < p / 4:  # raw bytes that are not UTF-8, inside a string if lucky
        i = text.find(b'"name"')
        if i > 0:
            text = text[: i + 9] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80"]) + text[i + 9 :]
    if rng.random() < p / 4:
        text = text + rng.choice([b"\n", b"   ", b"\x00", b"}", b"]", b" x", b"\n" * 1000])
    if rng.random() < p / 4:
        text = text[: rng.randint(0, len(text))]  # truncated
    return text


# -- nsys stats CSV ----------------------------------------------------------------------------

_API_HEADER = "Start (ns),Duration (ns),Name,Result,CorrID,Pid,Tid,T-Pri,Thread Name"
_GPU_HEADER = (
    "Start (ns),Duration (ns),CorrId,GrdX,GrdY,GrdZ,BlkX,BlkY,BlkZ,Reg/Trd,StcSMem (MB),"
    "DymSMem (MB),Bytes (MB),Throughput (MB/s),SrcMemKd,DstMemKd,Device,Ctx,GreenCtx,Strm,Name"
)


def _cell(rng: random.Random, good: str, p: float) -> str:
    if rng.random() >= p:
        return good
    return rng.choice(["", "NaN", "1e999", "-5", str(2**64), "abc", '"q,"', '"un', "\ufffd", "0"])


def csv_set(rng: random.Random, folder: Path, p: float) -> Path:
    """An nsys stats report set (api + gpu trace, sometimes sums), returns the file to read."""
    n = rng.randint(0, 40)
    pid = rng.choice(["4775", "1", "x"])
    t = 1_000_000
    api, gpu = [], []
    for i in range(n):
        t += rng.randint(0, 5000)
        name = rng.choice(
            [
                "cudaLaunchKernel_v7000",
                "cudaMemcpyAsync_v3020",
                "cuLaunchKernel",
                "cudaStreamSynchronize_v3020",
                "cudaGraphLaunch_v10000",
            ]
        )
        api.append(
            ",".join(
                _cell(rng, c, p)
                for c in [
                    str(t),
                    str(rng.randint(1, 900)),
                    name,
                    "0",
                    str(i + 1),
                    pid,
                    pid,
                    "20",
                    "python",
                ]
            )
        )
        if rng.random() < 0.8:
            kern = rng.random() < 0.6
            label = rng.choice(["Host-to-Device", "Device-to-Host", "Device-to-Device"])
            gpu.append(
                ",".join(
                    _cell(rng, c, p)
                    for c in [
                        str(t + 500),
                        str(rng.randint(1, 9000)),
                        str(i + 1),
                        "1" if kern else "",
                        "1" if kern else "",
                        "1" if kern else "",
                        "128" if kern else "",
                        "1" if kern else "",
                        "1" if kern else "",
                        "32" if kern else "",
                        "0.000" if kern else "",
                        "0.000" if kern else "",
                        "" if kern else "8.389",
                        "" if kern else "40684.749",
                        "" if kern else rng.choice(["Pinned", "Pageable", "Device", "Managed"]),
                        "" if kern else rng.choice(["Device", "Pinned"]),
                        rng.choice(["NVIDIA H100 NVL (0)", "NVIDIA H200 (1)", "weird"]),
                        "1",
                        "",
                        "7",
                        rng.choice(['"void gemm<float, 2>(float*)"', "ncclKernel", "k"])
                        if kern
                        else f"[CUDA memcpy {label}]",
                    ]
                )
            )
    prefix = rng.choice(["app", "run_rank0", "x y"])
    files = {"cuda_api_trace": [_API_HEADER, *api], "cuda_gpu_trace": [_GPU_HEADER, *gpu]}
    if rng.random() < 0.2:
        files["cuda_gpu_kern_sum"] = ["Time (%),Total Time (ns),Instances,Name", "100,5,1,k"]
    if rng.random() < p / 2:
        del files[rng.choice(list(files))]
    gz = rng.random() < 0.3
    for report, lines in files.items():
        text = "\n".join(lines) + rng.choice(["\n", "", "\r\n"])
        if rng.random() < p / 3:
            text = "nsys preamble line\n" * rng.randint(1, 3) + text
        data = text.encode("utf-8", "surrogatepass")
        if rng.random() < p / 4:
            data = data[: rng.randint(0, len(data))]
        name = f"{prefix}_{report}.csv"
        if gz and rng.random() < 0.8:
            data = gzip.compress(data, 1)
            name += ".gz"
            if rng.random() < p / 4:
                data = data[: rng.randint(2, len(data))]  # a corrupt sibling
        (folder / name).write_bytes(data)
    candidates = sorted(folder.iterdir())
    return rng.choice(candidates) if candidates else folder / f"{prefix}_cuda_api_trace.csv"


# -- sidecars ----------------------------------------------------------------------------------


def sidecar(rng: random.Random, p: float) -> bytes:
    """A capture metadata sidecar, valid or not."""
    doc: dict[str, Any] = {"label": maybe(rng, rng.choice(["baseline", "treatment"]), p)}
    for k in ("gpu", "driver_version", "torch_version", "nccl_version", "cc_mode"):
        if rng.random() < 0.6:
            doc[k] = maybe(rng, rng.choice(["NVIDIA H200", "on", "off", "2.5.1", "\ud800"]), p)
    if rng.random() < 0.5:
        doc["emulation"] = maybe(rng, {"platform": maybe(rng, "b200", p), "max_ctas": "16"}, p)
    if rng.random() < 0.5:
        doc["emulated_shim_mechanisms"] = [
            maybe(rng, "launch", p) for _ in range(rng.randint(0, 3))
        ]
    if rng.random() < 0.1:
        doc = nasty(rng)  # type: ignore[assignment]
    w = Writer(rng, "random")
    w.value(doc)
    text = w.text()
    if rng.random() < p / 3:
        text = text[: rng.randint(0, len(text))]
    return text


# -- special files -----------------------------------------------------------------------------

SPECIAL_KINDS = (
    "fifo",
    "fifo_sidecar",
    "dir_as_file",
    "dangling",
    "link_dev_zero",
    "link_dev_null",
    "socket",
    "unreadable",
    "link_loop",
    "csv_fifo_sibling",
)


def special(rng: random.Random, folder: Path, kind: str) -> Path:
    """A path that is not a plain trace file (or a trace beside one), of the given kind."""
    target = folder / rng.choice(
        ["trace.json", "trace.json.gz", "t.sqlite", "x_cuda_api_trace.csv"]
    )
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "fifo_sidecar":
        target = folder / "trace.json"
        target.write_bytes(
            b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":2}]}'
        )
        os.mkfifo(folder / "trace.meta.json")
    elif kind == "dir_as_file":
        target.mkdir()
        if rng.random() < 0.5:
            (target / "inner.json").write_bytes(b"{}")
    elif kind == "dangling":
        os.symlink(folder / "missing.json", target)
    elif kind == "link_dev_zero":
        os.symlink("/dev/zero", target)
    elif kind == "link_dev_null":
        os.symlink("/dev/null", target)
    elif kind == "socket":
        target = folder / "s.json"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(target))
        sock.close()
    elif kind == "unreadable":
        target.write_bytes(b'{"traceEvents":[]}')
        target.chmod(0)
    elif kind == "link_loop":
        os.symlink(folder / "b.json", folder / "a.json")
        os.symlink(folder / "a.json", folder / "b.json")
        target = folder / "a.json"
    elif kind == "csv_fifo_sibling":
        target = folder / "x_cuda_api_trace.csv"
        target.write_text(_API_HEADER + "\n1000,5,cudaLaunchKernel_v7000,0,1,1,1,20,p\n")
        os.mkfifo(folder / "x_cuda_gpu_trace.csv")
    return target


def is_special(path: Path) -> bool:
    try:
        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True
