"""The report's number formatting: ccdiag's one unit formatter, :mod:`ccdiag.units`."""

from __future__ import annotations

from ccdiag.units import bandwidth, duration, number, quantity, share, size

__all__ = ["bandwidth", "duration", "number", "quantity", "share", "size"]
