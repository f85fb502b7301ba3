"""Errors that end a command with exit status 2 and one readable line."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad input: the CLI prints ``ccdiag: error: <file>: <problem>`` and exits 2.

    Args:
        path: the offending file (only its name is shown unless ``show_path``).
        problem: one line saying what is wrong and, where possible, what to do.
    """

    #: Longest problem text kept (a message echoing a huge field must stay one readable line).
    MAX_PROBLEM = 240

    def __init__(self, path: str | Path | None, problem: str) -> None:
        self.path = None if path is None else Path(path)
        text = " ".join(str(problem).split())
        if len(text) > self.MAX_PROBLEM:
            text = text[: self.MAX_PROBLEM - 3] + "..."
        self.problem = text
        super().__init__(self.line())

    def line(self) -> str:
        """The one-line message."""
        if self.path is None:
            return self.problem
        return f"{self.path.name}: {self.problem}"


class PairMismatchError(InputError):
    """Baseline and treatment are not the same workload."""
