"""Live GPU workloads for the sample pairs and for rehearsing CC on an ordinary GPU.

Each workload is a class with ``setup()`` and ``step(i)``; a step ends with a host
synchronization, so host wall time per step is the step time. Run one with
``python -m ccdiag.emulate.pairs <workload> ...`` (paired traces with ground truth) or from your
own script.

- ``decode``        a small decoder's decode loop (eager: ~18 kernel launches per layer; or one
                    CUDA graph per step) with the sampled tokens read back to pinned memory with
                    ``non_blocking=True`` and a stream sync, as serving engines do.
- ``kv_offload``    a copy-heavy KV-cache offload/restore loop: compute on the main stream while
                    KV blocks go device->host and host->device on a copy stream (pinned, non_blocking).
- ``async_readback`` an async-scheduling step: launch the forward, read back the logits'
                    argmax with ``non_blocking=True``, do the next step's CPU scheduling work
                    while the GPU runs, then sync — the overlap that CC revokes.
- ``ddp``           data-parallel training (NCCL all-reduce of gradient buckets, configurable
                    ``bucket_cap_mb``), with the input batch copied host->device each step.
- ``tp_decode``     tensor-parallel decode over all ranks (all-reduce after the attention and MLP
                    of each layer), captured in a CUDA graph as serving engines do.

Collective emulation: workloads that communicate take an ``emu_group`` (a second NCCL process
group over the same ranks with fewer CTAs, i.e. less NVLink bandwidth per collective) and use it
while ``collective_on`` is set.
"""

from __future__ import annotations

import os
import time
from typing import Any

import torch
import torch.nn.functional as F  # noqa: N812

dev = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def pinned(t: torch.Tensor) -> torch.Tensor:
    """Page-locked host memory when a GPU is present (plain memory on a CPU-only box)."""
    return t.pin_memory() if torch.cuda.is_available() else t


def sync() -> None:
    """Wait for the current stream (no-op without a GPU)."""
    if torch.cuda.is_available():
        torch.cuda.current_stream().synchronize()


# ---------------------------------------------------------------------------------------- decode
class Block(torch.nn.Module):
    """One pre-norm decoder layer with a KV cache (batch, T, d)."""

    def __init__(self, d: int, h: int) -> None:
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.o = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(
        self, x: torch.Tensor, kc: torch.Tensor, vc: torch.Tensor, pos: int
    ) -> torch.Tensor:
        b, _, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, -1)
        kc[:, pos] = k[:, 0]
        vc[:, pos] = v[:, 0]
        hd = d // self.h
        q = q.view(b, self.h, hd)
        keys = kc.view(b, kc.shape[1], self.h, hd)
        vals = vc.view(b, vc.shape[1], self.h, hd)
        a = (torch.einsum("bhd,bthd->bht", q, keys) / hd**0.5).softmax(-1)
        y = torch.einsum("bht,bthd->bhd", a, vals).reshape(b, 1, d)
        x = x + self.o(y)
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class TinyDecoder(torch.nn.Module):
    """Embedding, L blocks, LM head, greedy sampling."""

    def __init__(
        self,
        layers: int = 10,
        d: int = 512,
        h: int = 8,
        vocab: int = 32000,
        ctx: int = 256,
        batch: int = 8,
    ) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, d)
        self.blocks = torch.nn.ModuleList(Block(d, h) for _ in range(layers))
        self.head = torch.nn.Linear(d, vocab)
        self.kc = [torch.zeros(batch, ctx, d, device=dev) for _ in range(layers)]
        self.vc = [torch.zeros(batch, ctx, d, device=dev) for _ in range(layers)]

    def forward(self, tok: torch.Tensor, pos: int) -> torch.Tensor:
        x = self.emb(tok)
        for blk, kc, vc in zip(self.blocks, self.kc, self.vc):
            x = blk(x, kc, vc, pos)
        return self.head(x)[:, -1].argmax(-1, keepdim=True)


class Decode:
    """Decode loop, eager or CUDA graph, with a per-step pinned non_blocking token readback."""

    def __init__(self, mode: str = "eager", layers: int = 10, batch: int = 8, **_: Any) -> None:
        self.mode, self.layers, self.batch = mode, layers, batch

    def setup(self) -> None:
        torch.manual_seed(0)
        self.m = TinyDecoder(self.layers, batch=self.batch).to(dev).eval()
        self.tok = torch.zeros(self.batch, 1, dtype=torch.long, device=dev)
        self.host_tok = pinned(torch.empty(self.batch, 1, dtype=torch.long))
        if self.mode == "graph":
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.no_grad(), torch.cuda.stream(s):
                for _ in range(3):
                    self.out = self.m(self.tok, 7)
            torch.cuda.current_stream().wait_stream(s)
            self.g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(self.g):
                self.out = self.m(self.tok, 7)

    @torch.no_grad()
    def step(self, i: int) -> None:
        if self.mode == "graph":
            self.g.replay()
            self.tok.copy_(self.out)
        else:
            self.tok = self.m(self.tok, i % 200)
        self.host_tok.copy_(self.tok, non_blocking=True)
        sync()


# ------------------------------------------------------------------------------------ kv offload
class KVOffload:
    """Compute on the main stream while KV blocks are offloaded and restored on a copy stream."""

    def __init__(
        self, blocks: int = 8, block_mib: float = 1.0, matmuls: int = 24, n: int = 2048, **_: Any
    ) -> None:
        self.blocks, self.block_bytes, self.matmuls, self.n = (
            blocks,
            int(block_mib * 2**20),
            matmuls,
            n,
        )

    def setup(self) -> None:
        numel = self.block_bytes // 2
        self.dev_kv = [
            torch.randn(numel, device=dev, dtype=torch.bfloat16) for _ in range(self.blocks)
        ]
        self.dev_in = [
            torch.empty(numel, device=dev, dtype=torch.bfloat16) for _ in range(self.blocks)
        ]
        self.host_out = [
            torch.empty(numel, dtype=torch.bfloat16).pin_memory() for _ in range(self.blocks)
        ]
        self.host_in = [
            torch.randn(numel, dtype=torch.bfloat16).pin_memory() for _ in range(self.blocks)
        ]
        self.a = torch.randn(self.n, self.n, device=dev, dtype=torch.bfloat16)
        self.b = torch.randn(self.n, self.n, device=dev, dtype=torch.bfloat16)
        self.copy_stream = torch.cuda.Stream()

    def step(self, i: int) -> None:
        c = self.a
        for _ in range(self.matmuls):
            c = torch.matmul(c, self.b).clamp_(-1, 1)
        self.copy_stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.copy_stream):
            for j in range(self.blocks):
                self.host_out[j].copy_(self.dev_kv[j], non_blocking=True)
                self.dev_in[j].copy_(self.host_in[j], non_blocking=True)
        torch.cuda.synchronize()


# ---------------------------------------------------------------------------- async readback
class AsyncReadback:
    """Forward, non_blocking readback of the sampled ids, then CPU scheduling work, then sync."""

    def __init__(
        self, cpu_us: float = 1500.0, matmuls: int = 16, n: int = 8192, rows: int = 512, **_: Any
    ) -> None:
        self.cpu_ns, self.matmuls, self.n, self.rows = int(cpu_us * 1000), matmuls, n, rows

    def setup(self) -> None:
        self.w = torch.randn(self.n, self.n, device=dev, dtype=torch.bfloat16) / self.n**0.5
        self.x = torch.randn(self.rows, self.n, device=dev, dtype=torch.bfloat16)
        self.host_ids = pinned(torch.empty(self.rows, dtype=torch.long))

    def step(self, i: int) -> None:
        x = self.x
        for _ in range(self.matmuls):
            x = torch.matmul(x, self.w).tanh_()
        self.host_ids.copy_(x.argmax(-1), non_blocking=True)
        t_end = time.perf_counter_ns() + self.cpu_ns  # the scheduler prepares the next batch
        while time.perf_counter_ns() < t_end:
            pass
        torch.cuda.current_stream().synchronize()


# ------------------------------------------------------------------------------------------- ddp
class DDPTrain:
    """DDP training of an MLP; gradients all-reduced in buckets through a comm hook."""

    def __init__(
        self,
        width: int = 4096,
        depth: int = 8,
        batch: int = 64,
        bucket_cap_mb: float = 25.0,
        **_: Any,
    ) -> None:
        self.width, self.depth, self.batch, self.bucket_cap_mb = width, depth, batch, bucket_cap_mb
        self.collective_on = False

    def setup(self) -> None:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        torch.manual_seed(0)
        layers: list[torch.nn.Module] = []
        for _ in range(self.depth):
            layers += [torch.nn.Linear(self.width, self.width), torch.nn.GELU()]
        model = torch.nn.Sequential(*layers).to(dev)
        self.ddp = DistributedDataParallel(model, bucket_cap_mb=self.bucket_cap_mb)
        self.plain_group = dist.group.WORLD
        self.emu_group = make_emulated_group()
        self.ddp.register_comm_hook(self, _allreduce_hook)
        self.opt = torch.optim.SGD(self.ddp.parameters(), lr=1e-4)
        self.host_x = torch.randn(self.batch, self.width).pin_memory()

    def step(self, i: int) -> None:
        x = self.host_x.to(dev, non_blocking=True)
        loss = self.ddp(x).square().mean()
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()


def _allreduce_hook(state, bucket):  # type: ignore[no-untyped-def]  # DDP rejects non-GradBucket annotations
    import torch.distributed as dist

    group = (
        state.emu_group
        if (state.collective_on and state.emu_group is not None)
        else state.plain_group
    )
    world = dist.get_world_size(group)
    buf = bucket.buffer().div_(world)
    fut = dist.all_reduce(buf, group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


#: CTAs per collective in the emulated group. Fewer CTAs move fewer bytes per microsecond over
#: NVLink; ``python -m ccdiag.emulate.calibrate`` measures which value gives the platform's
#: bandwidth ratio on this machine and prints it for $CCDIAG_EMU_MAX_CTAS.
EMU_MAX_CTAS = int(os.environ.get("CCDIAG_EMU_MAX_CTAS", "2"))


def make_emulated_group(max_ctas: int | None = None) -> Any:
    """A second NCCL group over all ranks, throttled to ``max_ctas`` CTAs; None if unsupported."""
    import torch.distributed as dist

    try:
        opts = dist.ProcessGroupNCCL.Options()
        opts.config.max_ctas = max_ctas or EMU_MAX_CTAS
        opts.config.min_ctas = 1
        return dist.new_group(backend="nccl", pg_options=opts)
    except (AttributeError, RuntimeError, TypeError) as exc:
        print(f"ccdiag: collective emulation unavailable ({exc}); collectives run unthrottled")
        return None


# ------------------------------------------------------------------------------------- tp decode
class TPDecode:
    """Tensor-parallel decode (Megatron-style column/row split) in a CUDA graph, all ranks."""

    def __init__(self, layers: int = 8, d: int = 4096, batch: int = 16, **_: Any) -> None:
        self.layers, self.d, self.batch = layers, d, batch
        self.collective_on = False

    def setup(self) -> None:
        import torch.distributed as dist

        self.world = dist.get_world_size() if dist.is_initialized() else 1
        self.emu_group = make_emulated_group() if self.world > 1 else None
        torch.manual_seed(0)
        d, w, dt = self.d, self.world, torch.bfloat16
        self.wqkv = [
            torch.randn(d, 3 * d // w, device=dev, dtype=dt) * 0.01 for _ in range(self.layers)
        ]
        self.wo = [torch.randn(d // w, d, device=dev, dtype=dt) * 0.01 for _ in range(self.layers)]
        self.wup = [
            torch.randn(d, 4 * d // w, device=dev, dtype=dt) * 0.01 for _ in range(self.layers)
        ]
        self.wdown = [
            torch.randn(4 * d // w, d, device=dev, dtype=dt) * 0.01 for _ in range(self.layers)
        ]
        self.x = torch.randn(self.batch, d, device=dev, dtype=dt)
        self.graphs = (
            {flag: self._capture(flag) for flag in (False, True)}
            if w > 1
            else {False: self._capture(False)}
        )

    def _forward(self, throttled: bool) -> torch.Tensor:
        import torch.distributed as dist

        group = self.emu_group if throttled and self.emu_group is not None else None
        x = self.x
        for i in range(self.layers):
            h = torch.matmul(x, self.wqkv[i])[:, : self.d // self.world]
            a = torch.matmul(h, self.wo[i])
            if self.world > 1:
                dist.all_reduce(a, group=group)
            x = F.layer_norm(x + a, (self.d,))
            m = torch.matmul(F.gelu(torch.matmul(x, self.wup[i])), self.wdown[i])
            if self.world > 1:
                dist.all_reduce(m, group=group)
            x = F.layer_norm(x + m, (self.d,))
        return x

    def _capture(self, throttled: bool) -> torch.cuda.CUDAGraph:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                self._forward(throttled)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.out = self._forward(throttled)
        return g

    def step(self, i: int) -> None:
        self.graphs[self.collective_on and self.world > 1].replay()
        torch.cuda.current_stream().synchronize()


WORKLOADS = {
    "decode": Decode,
    "kv_offload": KVOffload,
    "async_readback": AsyncReadback,
    "ddp": DDPTrain,
    "tp_decode": TPDecode,
}
