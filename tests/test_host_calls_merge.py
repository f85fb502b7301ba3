"""``ccdiag.ledger.host.merge_copy_syncs``: a copy call and the host-blocking sync right after it
on the same thread are one blocking copy (Nsight Systems traces, which have no issuing op)."""

from __future__ import annotations

import polars as pl

from ccdiag.ledger.host import SYNC_AFTER_COPY_NS, merge_copy_syncs


def _api(rows: list[tuple]) -> pl.DataFrame:
    cols = ["rank", "pid", "tid", "name", "cls", "start_ns", "dur_ns", "external_id"]
    return pl.DataFrame(rows, schema=cols, orient="row").with_columns(
        pl.col("external_id").cast(pl.Int64)
    )


def test_a_copy_and_the_driver_sync_an_interposer_leaves_beside_it_are_one_call() -> None:
    api = _api([
        (0, 1, 7, "cudaGraphLaunch_v10000", "launch", 0, 100, None),
        (0, 1, 7, "cudaMemcpyAsync_v3020", "copy", 1_000, 15_000, None),
        (0, 1, 7, "cuStreamSynchronize", "sync", 16_900, 638_000, None),
        (0, 1, 7, "cudaEventRecord", "other", 700_000, 500, None),
    ])  # fmt: skip
    out = merge_copy_syncs(api)
    assert out["name"].to_list() == [
        "cudaGraphLaunch_v10000", "cudaMemcpyAsync_v3020", "cudaEventRecord",
    ]  # fmt: skip
    assert out["dur_ns"].to_list() == [100, 16_900 + 638_000 - 1_000, 500]
    assert out["synced"].to_list() == [False, True, False]


def test_only_an_adjacent_blocking_sync_on_the_same_thread_without_an_op_merges() -> None:
    far = 15_000 + SYNC_AFTER_COPY_NS + 1
    api = _api([
        (0, 1, 7, "cudaMemcpyAsync", "copy", 0, 15_000, None),
        (0, 1, 7, "cudaStreamSynchronize", "sync", far, 10_000, None),  # too late
        (0, 1, 7, "cudaMemcpyAsync", "copy", 100_000, 5_000, None),
        (0, 1, 8, "cudaStreamSynchronize", "sync", 105_500, 9_000, None),  # another thread
        (0, 1, 7, "cudaMemcpyAsync", "copy", 200_000, 5_000, 42),  # Kineto: the op ends it
        (0, 1, 7, "cudaStreamSynchronize", "sync", 205_500, 9_000, 42),
        (0, 1, 7, "cudaMemcpyAsync", "copy", 300_000, 5_000, None),
        (0, 1, 7, "cudaStreamWaitEvent", "sync", 305_500, 9_000, None),  # does not block the host
    ])  # fmt: skip
    out = merge_copy_syncs(api)
    assert out.height == api.height
    assert out["dur_ns"].to_list() == api["dur_ns"].to_list()
    assert not out["synced"].any()


def test_the_row_order_is_kept_across_threads() -> None:
    api = _api([
        (0, 1, 8, "cudaLaunchKernel", "launch", 50, 10, None),
        (0, 1, 7, "cudaMemcpyAsync", "copy", 0, 100, None),
        (0, 1, 8, "cudaLaunchKernel", "launch", 60, 10, None),
        (0, 1, 7, "cudaDeviceSynchronize", "sync", 150, 1_000, None),
    ])  # fmt: skip
    out = merge_copy_syncs(api)
    assert out["start_ns"].to_list() == [50, 0, 60]
    assert out["dur_ns"].to_list() == [10, 1_150, 10]
