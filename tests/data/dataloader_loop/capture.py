"""Capture the DataLoader training-loop pair in this folder (CPU, real torch.profiler traces).

A small convolutional classifier trained with SGD over ``DataLoader(TensorDataset)``, profiled
with a plain ``torch.profiler.profile()`` (no schedule, so no ``ProfilerStep#N`` annotations:
the common case). The only record_functions in the trace are PyTorch's own:
``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` around each batch fetch and
``Optimizer.zero_grad#SGD.zero_grad`` / ``Optimizer.step#SGD.step``.

The treatment is the same loop with ``--extra-us`` of host work per step (a spin between the
forward and the backward pass, outside any op: slower host code), set to about 20 % of the
baseline step::

    python tests/data/dataloader_loop/capture.py --out baseline.json.gz
    python tests/data/dataloader_loop/capture.py --out treatment.json.gz --extra-us 1500

torch 2.13.0+cpu; torchvision cannot be installed beside that wheel, hence the model below.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


def spin(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def scrub(doc: dict) -> None:
    """No machine-specific facts in a committed trace: host name, temporary paths."""
    for k in ("deviceProperties", "host_name", "hostname", "hostName", "traceName"):
        doc.pop(k, None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--extra-us", type=float, default=0.0)
    ap.add_argument("--workers", type=int, default=0)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    n = args.steps * args.batch
    data = TensorDataset(torch.randn(n, 3, 32, 32), torch.randint(0, 10, (n,)))
    loader = DataLoader(data, batch_size=args.batch, shuffle=True, num_workers=args.workers)
    net, loss_fn = model(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    for x, y in loader:  # warm-up pass, not profiled
        opt.zero_grad()
        loss_fn(net(x), y).backward()
        opt.step()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(net(x), y)
            spin(args.extra_us)
            loss.backward()
            opt.step()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        doc = json.loads(raw.read_text())
    scrub(doc)
    with gzip.open(args.out, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh, separators=(",", ":"))
    print(args.out, os.path.getsize(args.out), "bytes")


if __name__ == "__main__":
    main()
