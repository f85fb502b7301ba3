import ctypes

import numpy as np
import torch

dev = torch.device("cuda")
x = torch.randn(1024, 1024, device=dev)
pageable = torch.randn(1024, 1024)
pinned = torch.empty(1024, 1024).pin_memory()
static = torch.randn(256, 256, device=dev)
side = torch.cuda.Stream()
side.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(side):
    for _ in range(2):
        y = (static @ static).relu_()
torch.cuda.current_stream().wait_stream(side)
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph):
    y = (static @ static).relu_() + 1
torch.cuda.synchronize()
for step in range(10):
    torch.cuda.nvtx.range_push("step")
    x = (x @ x).tanh_()
    x.copy_(pageable, non_blocking=True)
    pinned.copy_(x, non_blocking=True)
    graph.replay()
    torch.cuda.current_stream().synchronize()
    torch.cuda.nvtx.range_pop()
rng = torch.cuda.nvtx.range_start("unified memory")
try:
    import cupy as cp

    n = 16 << 20
    mem = cp.cuda.malloc_managed(4 * n)
    a = cp.ndarray((n,), dtype=cp.float32, memptr=mem)
    a.fill(1.0)
    cp.cuda.Device().synchronize()
    host = np.ctypeslib.as_array((ctypes.c_float * n).from_address(mem.ptr))
    host[::1024] += 1.0
    a *= 2
    z = cp.zeros(1 << 20, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    print("unified memory part ran")
except Exception as exc:  # no CuPy, or managed memory refused
    print("no unified-memory part:", exc)
torch.cuda.nvtx.range_end(rng)
torch.cuda.synchronize()
