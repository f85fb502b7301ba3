"""``ledger.align._cells`` codes each gap's (key, prev_key) cell without sorting the gaps: the
same codes as the reference below (``np.unique`` over the pairs), for any keys and gaps."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ccdiag.ledger.align import _cells


def _reference(kc: np.ndarray, pc: np.ndarray, keys: list[str]) -> np.ndarray:
    names = [*keys, "start"]
    uniq, inv = np.unique(kc * len(names) + pc, return_inverse=True)
    text = [f"{names[p // len(names)]}|{names[p % len(names)]}" for p in uniq.tolist()]
    code = {t: i for i, t in enumerate(dict.fromkeys(text))}
    return np.array([code[t] for t in text], dtype=np.int64)[inv.reshape(-1)]


@settings(max_examples=200, deadline=None)
@given(nk=st.integers(1, 40), n=st.integers(1, 3000), seed=st.integers(0, 2**31))
def test_cells_equal_the_sorting_reference(nk: int, n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    keys = [f"runtime:{i:02d}" for i in range(nk)]
    kc, pc = rng.integers(0, nk + 1, n), rng.integers(0, nk + 1, n)
    assert (_cells(kc, pc, keys) == _reference(kc, pc, keys)).all()
