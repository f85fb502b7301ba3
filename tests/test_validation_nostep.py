"""Failure class 6 on the device truth matrix: ``validation/tv_train_nostep`` (TUNE split).

A torchvision ResNet-18 training loop on an H200 with a pinned, multi-process DataLoader,
profiled by Kineto with ProfilerStep removed (only PyTorch's own DataLoader fetch and optimizer
annotations remain), launch toll + copy mechanisms emulated (validation/SPLIT.md). The pair is
captured by the ``capture`` helper into the main checkout's ``validation/`` folder; on a branch
without it the test is skipped (it runs once the folder is merged).

Before the fix: both runs' steps were their ~0.7 ms ``Optimizer.step#SGD.step`` windows and the
pair was refused ("only 39 % of the GPU kernels per step have the same names").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccdiag import api

PAIR = Path(__file__).resolve().parents[1] / "validation" / "tv_train_nostep"
FETCH = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"

pytestmark = pytest.mark.skipif(
    not (PAIR / "ground_truth.json").exists(), reason="validation/tv_train_nostep not captured"
)


def test_gpu_training_loop_steps_are_its_iterations():
    # act
    r = api.diagnose(PAIR / "baseline.json.gz", PAIR / "treatment.json.gz")
    truth = json.loads((PAIR / "ground_truth.json").read_text())
    lo, hi = truth["delta_ns_per_step"]["ci95"]
    # assert: one step per iteration (10 per file), from the fetch; the delta within the truth's CI
    assert r.baseline.step_marker == FETCH and r.treatment.step_marker == FETCH
    assert r.step_ns.n_steps == 10
    assert r.step_ns.significant
    assert lo <= r.step_ns.delta <= hi
