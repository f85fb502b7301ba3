"""Terminal layouts shared by the CLI's views (rich)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.table import Table
from rich.text import Text

#: The console width from which a table's sentences stand beside its numbers.
WIDE_FROM = 130


class SentenceTable:
    """A table whose rows end in a sentence (a finding, a fix's text): the sentence is the last
    column on a console at least ``wide_from`` columns wide, else a ``label: sentence`` line
    under the table, whole (in a column of a pipe's 80 it wraps a word per line, or the table
    runs past the edge and is cut). Decided when rendered, at the width it is rendered to.

    ``make``: a new table with every column but the sentence's; ``rows``: (cells, the first
    one the label; the sentence or None; the row's style or None); ``no_wrap``: the columns
    that never wrap (the numbers). Sentences are plain text, never markup: they quote names
    read from traces.
    """

    def __init__(
        self,
        make: Callable[[], Table],
        sentence_head: str,
        rows: Sequence[tuple[Sequence[RenderableType], str | None, str | None]],
        *,
        wide_from: int = WIDE_FROM,
        no_wrap: Sequence[int] = (),
    ) -> None:
        self.make, self.head, self.rows = make, sentence_head, rows
        self.wide_from, self.no_wrap = wide_from, no_wrap

    def table(self, wide: bool) -> Table:
        t = self.make()
        if wide:
            t.add_column(self.head)
        for i in self.no_wrap:
            t.columns[i].no_wrap = True
        for cells, sentence, style in self.rows:
            t.add_row(*cells, *([Text(sentence or "")] if wide else []), style=style)
        return t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        wide = options.max_width >= self.wide_from
        yield self.table(wide)
        if not wide:
            for cells, sentence, _ in self.rows:
                if sentence:
                    yield Text(f"  {cells[0]}: {sentence}")  # no markup: names from traces
