"""Build, load and control the LD_PRELOAD shim (``cc_shim.c``).

The shim is compiled with the system C compiler on first use and cached by the hash of its
source, so an edited shim is rebuilt and a stale one is never used.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("cc_shim.c")

#: Bits of ccdiag_emu_set_mask.
MASK = {"launch": 1, "copy_pad": 2, "copy_sync": 4}
MASK["copy"] = MASK["copy_pad"] | MASK["copy_sync"]


class ShimBuildError(RuntimeError):
    """The shim could not be compiled."""


def cache_dir() -> Path:
    """Where built artifacts live: $CCDIAG_CACHE or ~/.cache/ccdiag."""
    root = os.environ.get("CCDIAG_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "ccdiag"
    )
    return Path(root)


def build_shim(
    force: bool = False, out_dir: Path | None = None, driver_layer: bool = False
) -> Path:
    """Compile the shim (once per source version) and return the .so path.

    Args:
        force: rebuild even when a cached build exists.
        out_dir: where to put it (default: the cache folder).
        driver_layer: also interpose dlsym/cuGetProcAddress (experimental; see cc_shim.c).

    Returns:
        Path of ``libccdiag_cc_shim-<hash>.so``.
    """
    src = SOURCE.read_bytes()
    digest = hashlib.sha256(src + (b"driver" if driver_layer else b"")).hexdigest()[:12]
    dest_dir = out_dir or cache_dir()
    dest = dest_dir / f"libccdiag_cc_shim-{digest}.so"
    if dest.exists() and not force:
        return dest
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        raise ShimBuildError("no C compiler found (install gcc, or set CC)")
    dest_dir.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(f".{os.getpid()}.tmp")
    cmd = [
        cc,
        "-O2",
        "-Wall",
        "-Wno-unused-function",
        "-shared",
        "-fPIC",
        str(SOURCE),
        "-o",
        str(tmp),
        "-ldl",
        "-lpthread",
    ]
    if driver_layer:
        cmd.insert(1, "-DCCDIAG_DRIVER_LAYER")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ShimBuildError(f"{' '.join(cmd)} failed:\n{proc.stderr.strip()}")
    tmp.replace(dest)
    return dest


class ShimControl:
    """Run-time control of a shim loaded into this process (through LD_PRELOAD)."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(None)
        try:
            self._set = lib.ccdiag_emu_set_mask
            self._get = lib.ccdiag_emu_get_mask
            self._mark = lib.ccdiag_emu_mark_step
            self._cur = lib.ccdiag_emu_current_step
            self._dump = lib.ccdiag_emu_dump
        except AttributeError:
            raise RuntimeError("the ccdiag CC shim is not loaded (LD_PRELOAD)") from None
        self._set.argtypes = [ctypes.c_int]
        self._dump.argtypes = [ctypes.c_char_p]

    @staticmethod
    def loaded() -> bool:
        """Whether the shim is preloaded into this process."""
        return hasattr(ctypes.CDLL(None), "ccdiag_emu_set_mask")

    def set_mechanisms(self, names: list[str]) -> None:
        """Enable exactly these shim mechanisms (launch, copy, copy_pad, copy_sync)."""
        mask = 0
        for n in names:
            mask |= MASK.get(n, 0)
        self._set(mask)

    def mask(self) -> int:
        """The enabled mechanism bits."""
        return int(self._get())

    def mark_step(self) -> None:
        """Start the counters of the next step."""
        self._mark()

    def current_step(self) -> int:
        """Index of the current counter step."""
        return int(self._cur())

    def counters(self) -> dict:
        """The shim's counters (config, calls, per-step injected costs)."""
        path = cache_dir() / f"shim-counters-{os.getpid()}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        if self._dump(str(path).encode()) != 0:
            raise RuntimeError(f"shim could not write {path}")
        try:
            return json.loads(path.read_text())
        finally:
            path.unlink(missing_ok=True)


def maybe_control() -> ShimControl | None:
    """A ShimControl when the shim is preloaded, else None."""
    return ShimControl() if ShimControl.loaded() else None
