"""Chunk layout of event frames: keep every column cut at the same rows, without copying.

A polars frame built piece by piece (a reader's parts, joins, a column added later) can end up
with columns cut into chunks at different rows: one column in 15 chunks, another in one. The
next operation that needs aligned chunks (a ``filter``, a ``select`` that casts) then copies
*every* column into one chunk first: for an 8 M-row nsys export that is a hidden copy of the
whole event frame (~700 MB) on top of the frame itself. :func:`align_chunks` cuts the columns
that differ at the rows of the most common layout instead: a column held in one chunk is
sliced (no copy); only a column with yet another multi-chunk layout is copied (that column
alone). :func:`like_chunks` cuts a new column at the rows of a frame's columns, so adding it
keeps the frame aligned.
"""

from __future__ import annotations

from collections import Counter

import polars as pl


def _cut(s: pl.Series, lengths: list[int]) -> pl.Series:
    """``s`` in chunks of ``lengths`` (zero-copy slices when ``s`` is one chunk)."""
    if s.chunk_lengths() == lengths:
        return s
    if s.n_chunks() > 1:
        s = s.rechunk()
    if len(lengths) <= 1:
        return s
    pieces, offset = [], 0
    for n in lengths:
        pieces.append(s.slice(offset, n))
        offset += n
    return pl.concat(pieces, rechunk=False)


def layout(df: pl.DataFrame) -> list[int]:
    """The chunk lengths to cut every column at: the multi-chunk layout most columns share
    (columns in one chunk are sliced to it for free), else one chunk."""
    if df.width == 0:
        return []
    counts = Counter(tuple(df.to_series(i).chunk_lengths()) for i in range(df.width))
    multi = [(n, lengths) for lengths, n in counts.items() if len(lengths) > 1]
    if not multi:
        return list(next(iter(counts)))
    return list(max(multi, key=lambda m: (m[0], len(m[1])))[1])


def align_chunks(df: pl.DataFrame) -> pl.DataFrame:
    """The same frame with every column cut at the same rows (see the module docstring)."""
    if df.width <= 1 or len(set(df.n_chunks("all"))) == 1 and _same(df):
        return df
    lengths = layout(df)
    return pl.DataFrame([_cut(df.to_series(i), lengths) for i in range(df.width)])


def _same(df: pl.DataFrame) -> bool:
    first = df.to_series(0).chunk_lengths()
    return all(df.to_series(i).chunk_lengths() == first for i in range(1, df.width))


def like_chunks(s: pl.Series, df: pl.DataFrame) -> pl.Series:
    """``s`` (one value per row of ``df``) cut at the rows of ``df``'s columns."""
    if df.width == 0 or s.len() != df.height:
        return s
    return _cut(s, layout(df))
