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
- ``flag_reads``    flags read back in the middle of a step (``if tensor:``) every few layers;
                    ``on_gpu=1`` keeps them on the GPU (``torch.where``): one readback a step.
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
from collections.abc import Callable
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
        self,
        blocks: int = 8,
        block_mib: float = 1.0,
        matmuls: int = 24,
        n: int = 2048,
        resident: int = 0,
        **_: Any,
    ) -> None:
        self.blocks, self.block_bytes, self.matmuls, self.n = (
            blocks,
            int(block_mib * 2**20),
            matmuls,
            n,
        )
        self.resident = bool(resident)  # the fix: KV stays on the GPU, no offload/restore copies

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
        if self.resident:
            torch.cuda.synchronize()
            return
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


# ------------------------------------------------------------------------------------ flag reads
class FlagReads:
    """A step that reads flags back in its middle and branches on them, as a dynamic loss
    scaler's found-inf check, an early-exit test or MoE routing counts do: every ``every``
    layers, ``if (h.abs().amax() > limit):`` (``aten::is_nonzero``: a device-to-host copy and a
    stream sync) halves the activations; the step's result is read back once at its end.

    ``on_gpu=1`` is the fix CP01 and ``ccdiag predict`` call ``fewer_sync_copies``: the flags
    stay on the GPU (``torch.where``) and the step's one readback is its result.
    """

    def __init__(
        self,
        layers: int = 24,
        every: int = 2,
        n: int = 2048,
        rows: int = 512,
        limit: float = 0.5,
        on_gpu: int = 0,
        **_: Any,
    ) -> None:
        self.layers, self.every, self.n, self.rows = layers, every, n, rows
        self.limit, self.on_gpu = limit, bool(on_gpu)

    def setup(self) -> None:
        g = torch.Generator(device="cpu").manual_seed(0)
        self.w = [
            (torch.randn(self.n, self.n, generator=g) / self.n**0.5).to(dev, torch.bfloat16)
            for _ in range(self.layers)
        ]
        self.x = torch.randn(self.rows, self.n, generator=g).to(dev, torch.bfloat16)
        self.result = 0.0

    @torch.no_grad()
    def step(self, i: int) -> None:
        h = self.x
        for j, w in enumerate(self.w):
            h = torch.tanh(h @ w)
            if j % self.every != self.every - 1:
                continue
            big = h.abs().amax() > self.limit
            if self.on_gpu:
                h = torch.where(big, h * 0.5, h)
            elif big:  # a flag read back in the middle of the step
                h = h * 0.5
        self.result = float(h.float().mean())  # the step's result, read back once


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


# ------------------------------------------------------------- third-party workload code (v3)
def _busy_ns(ns: int) -> None:
    """CPU work that does not hold the GIL: the shim's busy wait through ctypes, else a Python loop."""
    global _BUSY
    if _BUSY is None:
        import ctypes

        lib = ctypes.CDLL(None)
        fn = getattr(lib, "ccdiag_emu_busy_ns", None)
        if fn is not None:
            fn.argtypes = [ctypes.c_longlong]
        _BUSY = fn or False
    if _BUSY:
        _BUSY(ns)
        return
    t_end = time.perf_counter_ns() + ns
    while time.perf_counter_ns() < t_end:
        pass


_BUSY: Any = None


_IDS = {"bos_token_id": 1, "eos_token_id": 2}


def _decoder(d: int, n: int, h: int, v: int, **extra: Any) -> dict[str, Any]:
    """The fields most decoder configs share (width ``d``, ``n`` layers, ``h`` heads, a
    vocabulary of ``v``, a 4x FFN, 512 positions, the token ids) and an architecture's own."""
    return dict(
        vocab_size=v, hidden_size=d, intermediate_size=4 * d, num_hidden_layers=n,
        num_attention_heads=h, max_position_embeddings=512, **extra, **_IDS,
    )  # fmt: skip


#: Each ``HFGenerate`` architecture: its ``transformers`` config and model classes and the
#: config's fields from the model's width, layers, heads and vocabulary (``d, n, h, v``).
HF_ARCHS: dict[str, tuple[str, str, Callable[[int, int, int, int], dict[str, Any]]]] = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", lambda d, n, h, v: dict(
        vocab_size=v, hidden_size=d, intermediate_size=4 * d, num_hidden_layers=n,
        num_attention_heads=h, num_key_value_heads=h, max_position_embeddings=512)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", lambda d, n, h, v: dict(
        vocab_size=v, n_embd=d, n_layer=n, n_head=h, n_positions=512, **_IDS)),
    # Pythia-style: parallel residual, partial rotary, fused QKV
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, rotary_pct=0.25, use_parallel_residual=True)),
    # OPT: learned positions (offset 2), ReLU FFN, pre-LayerNorm
    "opt": ("OPTConfig", "OPTForCausalLM", lambda d, n, h, v: dict(
        vocab_size=v, hidden_size=d, word_embed_proj_dim=d, ffn_dim=4 * d, num_hidden_layers=n,
        num_attention_heads=h, max_position_embeddings=512, pad_token_id=0, **_IDS)),
    # BLOOM: ALiBi attention biases, fused QKV, embedding LayerNorm
    "bloom": ("BloomConfig", "BloomForCausalLM", lambda d, n, h, v: dict(
        vocab_size=v, hidden_size=d, n_layer=n, n_head=h, **_IDS, pad_token_id=0)),
    # GPT-J: partial rotary, attention and MLP in parallel
    "gptj": ("GPTJConfig", "GPTJForCausalLM", lambda d, n, h, v: dict(
        vocab_size=v, n_embd=d, n_layer=n, n_head=h, n_positions=512, rotary_dim=d // h // 2,
        **_IDS)),
    # Mistral: grouped-query attention, sliding window, SiLU FFN
    "mistral": ("MistralConfig", "MistralForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1), sliding_window=64)),
    # Qwen2: biased QKV projections, grouped-query attention
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1))),
    # StarCoder: multi-query attention, learned positions
    "gpt_bigcode": ("GPTBigCodeConfig", "GPTBigCodeForCausalLM", lambda d, n, h, v: dict(
        vocab_size=v, n_embd=d, n_layer=n, n_head=h, n_positions=512, multi_query=True, **_IDS)),
    # Phi: partial rotary, attention and MLP in parallel, GELU
    "phi": ("PhiConfig", "PhiForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, partial_rotary_factor=0.5)),
    # Falcon: multi-query attention, parallel attention / MLP
    "falcon": ("FalconConfig", "FalconForCausalLM", lambda d, n, h, v: dict(
        vocab_size=v, hidden_size=d, num_hidden_layers=n, num_attention_heads=h,
        multi_query=True, parallel_attn=True, new_decoder_architecture=False, alibi=False,
        bias=False, **_IDS)),
    # Gemma: GeGLU FFN, RMSNorm scaled by 1 + w, embeddings scaled by sqrt(d), tied embeddings
    "gemma": ("GemmaConfig", "GemmaForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1), head_dim=d // h, pad_token_id=0)),
    # StarCoder2: grouped-query attention, biased projections, LayerNorm, GELU FFN
    "starcoder2": ("Starcoder2Config", "Starcoder2ForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1))),
    # GPT-Neo: global and local (windowed) attention in alternate layers, learned positions
    "gpt_neo": ("GPTNeoConfig", "GPTNeoForCausalLM", lambda d, n, h, v: dict(
        vocab_size=v, hidden_size=d, num_layers=n, num_heads=h, intermediate_size=4 * d,
        max_position_embeddings=512, window_size=64,
        attention_types=[[["global", "local"], n // 2]] + ([[["global"], 1]] if n % 2 else []),
        **_IDS)),
    # StableLM: partial rotary (a quarter of each head), LayerNorm, grouped-query attention
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1), partial_rotary_factor=0.25)),
    # OLMo: LayerNorm without parameters, SwiGLU FFN, rotary, no biases
    "olmo": ("OlmoConfig", "OlmoForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=h, pad_token_id=0)),
    # Cohere (Command-R): attention and MLP in parallel, LayerNorm, logits scaled, GQA
    "cohere": ("CohereConfig", "CohereForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1), logit_scale=0.0625, pad_token_id=0)),
    # Qwen3: RMSNorm on the queries and keys of each head, grouped-query attention
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1), head_dim=d // h, pad_token_id=0)),
    # Granite: scaled embeddings, residuals, attention and logits (muP-style multipliers)
    "granite": ("GraniteConfig", "GraniteForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1), embedding_multiplier=12.0,
        residual_multiplier=0.22, attention_multiplier=0.015625, logits_scaling=8.0,
        pad_token_id=0)),
    # XGLM (fairseq-style): sinusoidal positions, scaled embeddings, pre-LayerNorm, GELU FFN
    "xglm": ("XGLMConfig", "XGLMForCausalLM", lambda d, n, h, v: dict(
        vocab_size=v, d_model=d, ffn_dim=4 * d, num_layers=n, attention_heads=h,
        max_position_embeddings=512, pad_token_id=0, **_IDS)),
    # CodeGen: fused QKV split over mp_num shards, partial rotary, attention and MLP in parallel
    "codegen": ("CodeGenConfig", "CodeGenForCausalLM", lambda d, n, h, v: dict(
        vocab_size=v, n_embd=d, n_layer=n, n_head=h, n_positions=512, n_ctx=512,
        rotary_dim=d // h // 2, **_IDS)),
    # Phi-3: fused QKV and gate/up projections, SwiGLU, RMSNorm, grouped-query attention
    "phi3": ("Phi3Config", "Phi3ForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1), pad_token_id=0)),
    # BioGPT: learned positions, scaled embeddings, pre-LayerNorm, GELU FFN
    "biogpt": ("BioGptConfig", "BioGptForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, pad_token_id=0)),
    # Mixtral: sparse mixture of experts (4 experts, 2 per token), grouped-query attention
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1), num_local_experts=4,
        num_experts_per_tok=2, pad_token_id=0)),
    # Gemma 2: local sliding-window layers alternating with global ones, attention and final
    # logit soft-capping, pre- and post-norms around each block, GeGLU FFN; a window of 8
    # tokens, shorter than the prompt, so the local layers' cache slides
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", lambda d, n, h, v: _decoder(
        d, n, h, v, num_key_value_heads=max(h // 2, 1), head_dim=d // h, sliding_window=8,
        pad_token_id=0)),
    # encoder-decoder: cross-attention, relative position buckets
    "t5": ("T5Config", "T5ForConditionalGeneration", lambda d, n, h, v: dict(
        vocab_size=v, d_model=d, d_kv=d // h, d_ff=4 * d, num_layers=n, num_decoder_layers=n,
        num_heads=h, pad_token_id=0, eos_token_id=2, decoder_start_token_id=0)),
}  # fmt: skip


class HFGenerate:
    """Hugging Face ``transformers`` ``model.generate()``: greedy eager decode, random weights.

    A small Llama (GPT-2, GPT-NeoX, OPT, BLOOM, GPT-J, Mistral, Qwen2, GPT-BigCode, Phi, Falcon,
    Gemma, StarCoder2, GPT-Neo, StableLM, OLMo, Cohere, Qwen3, Granite, XGLM, CodeGen, the
    mixture of experts Mixtral, Gemma 2, or the encoder-decoder T5: :data:`HF_ARCHS`) built
    from a config (no download); one step is one ``generate()`` call of ``new_tokens`` tokens after a
    ``prompt``-token prefill (``min_new_tokens`` pins the length), ending with a host sync.
    """

    def __init__(
        self,
        arch: str = "llama",
        layers: int = 6,
        d: int = 256,
        heads: int = 4,
        vocab: int = 4096,
        batch: int = 4,
        prompt: int = 16,
        new_tokens: int = 4,
        **_: Any,
    ) -> None:
        self.arch, self.layers, self.d, self.heads, self.vocab = arch, layers, d, heads, vocab
        self.batch, self.prompt, self.new_tokens = batch, prompt, new_tokens

    def setup(self) -> None:
        import transformers

        torch.manual_seed(0)
        if self.arch not in HF_ARCHS:  # (an unknown name once meant a Llama, silently)
            raise ValueError(f"unknown arch {self.arch!r}; known: {', '.join(sorted(HF_ARCHS))}")
        config, model_cls, fields = HF_ARCHS[self.arch]
        cfg = getattr(transformers, config)(**fields(self.d, self.layers, self.heads, self.vocab))
        model = getattr(transformers, model_cls)(cfg)
        self.model = model.to(dev).eval()
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(3, self.vocab, (self.batch, self.prompt), generator=g).to(dev)
        self.mask = torch.ones_like(self.ids)

    @torch.no_grad()
    def step(self, i: int) -> None:
        self.out = self.model.generate(
            input_ids=self.ids,
            attention_mask=self.mask,
            max_new_tokens=self.new_tokens,
            min_new_tokens=self.new_tokens,
            do_sample=False,
            pad_token_id=0,
        )
        sync()


class _RandomImages(torch.utils.data.Dataset):
    """Random uint8 images and labels (a stand-in for a decoded image folder; no download).

    uint8 as a decoder hands them over (``PILToTensor``); the loop converts and normalizes them
    on the GPU, as fast input pipelines do.
    """

    def __init__(self, n: int, size: int, classes: int) -> None:
        self.n, self.size, self.classes = n, size, classes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        g = torch.Generator().manual_seed(i)
        img = torch.randint(0, 256, (3, self.size, self.size), generator=g, dtype=torch.uint8)
        return img, i % self.classes


class _RandomTokens(torch.utils.data.Dataset):
    """Random token ids, attention masks and labels (a stand-in for a tokenized text set)."""

    def __init__(self, n: int, seq: int, vocab: int, classes: int) -> None:
        self.n, self.seq, self.vocab, self.classes = n, seq, vocab, classes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(i)
        return {
            "input_ids": torch.randint(0, self.vocab, (self.seq,), generator=g),
            "attention_mask": torch.ones(self.seq, dtype=torch.long),
            "labels": torch.tensor(i % self.classes),
        }


class _LoaderLoop:
    """A training loop fed by a pinned-memory DataLoader; no host sync inside a step.

    Like most training loops, a step does not wait for the GPU (the host runs ahead, the
    CUDA queue and the pinned batches in flight bound it); ``block_boundary()`` (called by the
    ablation driver between phase blocks) synchronizes so that each block starts from an empty
    queue.
    """

    loader: Any
    batch: int
    workers: int

    def _start(self, data: torch.utils.data.Dataset) -> None:
        """The pinned DataLoader over ``data`` (``self.batch``, ``self.workers``) and its iterator."""
        self.loader = torch.utils.data.DataLoader(
            data,
            batch_size=self.batch,
            num_workers=self.workers,
            pin_memory=torch.cuda.is_available(),
            persistent_workers=self.workers > 0,
            prefetch_factor=4 if self.workers > 0 else None,
            drop_last=True,
        )
        self.it = iter(self.loader)

    def _next(self) -> Any:
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            return next(self.it)

    def block_boundary(self) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()


class TVTrain(_LoaderLoop):
    """torchvision ResNet training: ``DataLoader(pin_memory=True, num_workers=N)``, ``.to(non_blocking=True)``.

    ``amp=1``: mixed precision as the PyTorch recipe writes it (``torch.autocast`` float16 and a
    ``GradScaler``): the scaler's ``step`` reads its found-inf flag back with ``.item()`` every
    step, a blocking device-to-host copy after the backward pass.
    """

    def __init__(
        self,
        model: str = "resnet18",
        batch: int = 256,
        size: int = 160,
        workers: int = 6,
        classes: int = 100,
        amp: int = 0,
        **_: Any,
    ) -> None:
        self.arch, self.batch, self.size, self.workers, self.classes = (
            model,
            batch,
            size,
            workers,
            classes,
        )
        self.amp = bool(amp)

    def _vision_model(self) -> torch.nn.Module:
        import torchvision

        torch.manual_seed(0)
        return getattr(torchvision.models, self.arch)(num_classes=self.classes).to(dev)

    def setup(self) -> None:
        self.model = self._vision_model()
        self.model.train()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.loss = torch.nn.CrossEntropyLoss()
        self._start(_RandomImages(self.batch * 100_000, self.size, self.classes))
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp and torch.cuda.is_available())

    def step(self, i: int) -> None:
        x, y = self._next()
        x = x.to(dev, non_blocking=True)
        y = y.to(dev, non_blocking=True)
        x = (x.float() / 255.0 - 0.45) / 0.225
        if self.amp:
            with torch.autocast(dev.type, dtype=torch.float16):
                loss = self.loss(self.model(x), y)
            self.opt.zero_grad(set_to_none=True)
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)  # reads the found-inf flag back: .item()
            self.scaler.update()
            return
        loss = self.loss(self.model(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


class TVEval(TVTrain):
    """torchvision inference (evaluation) loop: pinned ``DataLoader``, ``.to(non_blocking=True)``,
    predictions read back with ``.cpu()`` every batch (a blocking D2H copy: each step ends synced).

    The pattern of a validation pass or offline batch inference; a small, launch-heavy model by
    default (MobileNetV3: depthwise convolutions, squeeze-excitation, hardswish).
    """

    def __init__(
        self,
        model: str = "mobilenet_v3_small",
        batch: int = 128,
        size: int = 160,
        workers: int = 4,
        classes: int = 100,
        **_: Any,
    ) -> None:
        super().__init__(model, batch, size, workers, classes)

    def setup(self) -> None:
        self.model = self._vision_model()
        self.model.eval()
        self._start(_RandomImages(self.batch * 100_000, self.size, self.classes))
        self.correct = 0

    @torch.inference_mode()
    def step(self, i: int) -> None:
        x, y = self._next()
        xd = x.to(dev, non_blocking=True)
        xd = (xd.float() / 255.0 - 0.45) / 0.225
        pred = self.model(xd).argmax(1).cpu()  # blocking D2H readback
        self.correct += int((pred == y).sum())


class TVDetect(_LoaderLoop):
    """torchvision object detection inference (Faster R-CNN with a MobileNetV3-FPN backbone,
    random weights): pinned ``DataLoader``, ``.to(non_blocking=True)``, detections read back with
    ``.cpu()``. Its post-processing is data-dependent: the region proposals' top-k and NMS, the
    per-class score filter (``nonzero``) and NMS of the detection head each read a size back to
    the host, so a step makes several small blocking device-to-host copies inside the forward,
    not one at its end. ``score_thresh`` is low so random weights still leave detections.
    """

    def __init__(
        self,
        model: str = "fasterrcnn_mobilenet_v3_large_320_fpn",
        batch: int = 8,
        size: int = 320,
        workers: int = 4,
        classes: int = 91,
        score_thresh: float = 0.001,
        **_: Any,
    ) -> None:
        self.arch, self.batch, self.size, self.workers = model, batch, size, workers
        self.classes, self.score_thresh = classes, score_thresh

    def setup(self) -> None:
        import torchvision

        torch.manual_seed(0)
        build = getattr(torchvision.models.detection, self.arch)
        self.model = build(
            weights=None,
            weights_backbone=None,
            num_classes=self.classes,
            box_score_thresh=self.score_thresh,
        )
        self.model = self.model.to(dev).eval()
        self._start(_RandomImages(self.batch * 100_000, self.size, self.classes))
        self.found = 0

    @torch.inference_mode()
    def step(self, i: int) -> None:
        x, _ = self._next()
        xd = x.to(dev, non_blocking=True).float() / 255.0
        out = self.model(list(xd))
        self.found += sum(int(o["boxes"].cpu().shape[0]) for o in out)  # blocking D2H readbacks


class HFBertTrain(_LoaderLoop):
    """Hugging Face BERT sequence-classification fine-tuning, random weights, pinned DataLoader."""

    def __init__(
        self,
        layers: int = 4,
        d: int = 256,
        heads: int = 4,
        vocab: int = 8192,
        seq: int = 128,
        batch: int = 32,
        workers: int = 2,
        **_: Any,
    ) -> None:
        self.layers, self.d, self.heads, self.vocab = layers, d, heads, vocab
        self.seq, self.batch, self.workers = seq, batch, workers

    def setup(self) -> None:
        import transformers

        torch.manual_seed(0)
        cfg = transformers.BertConfig(
            vocab_size=self.vocab,
            hidden_size=self.d,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            intermediate_size=4 * self.d,
            max_position_embeddings=512,
            num_labels=4,
        )
        self.model = transformers.BertForSequenceClassification(cfg).to(dev).train()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self._start(_RandomTokens(self.batch * 100_000, self.seq, self.vocab, 4))

    def step(self, i: int) -> None:
        batch = {k: v.to(dev, non_blocking=True) for k, v in self._next().items()}
        out = self.model(**batch)
        out.loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


class Serving:
    """A serving decode loop with asynchronous scheduling (vLLM-style), eager or CUDA graph.

    Step i: launch the forward (graph replay or eager), read the sampled tokens back to pinned
    memory, do the CPU scheduling work for the next step (``cpu_us``; a busy wait that releases
    the GIL), then take step i-1's tokens. ``readback``:

    - ``async``: ``copy_(non_blocking=True)`` on a side stream right after the launch, so the
      scheduling work overlaps the forward; under CC that copy blocks the main thread;
    - ``sync``: a blocking readback before the scheduling work (no overlap, CC or not);
    - ``drain``: a worker thread issues the side-stream copy and waits for it, the main thread
      only hands it the step and later takes the result.
    """

    def __init__(
        self,
        mode: str = "graph",
        readback: str = "async",
        cpu_us: float = 600.0,
        layers: int = 10,
        batch: int = 8,
        **_: Any,
    ) -> None:
        if readback not in ("async", "sync", "drain"):
            raise ValueError(f"readback must be async, sync or drain, not {readback!r}")
        self.mode, self.readback, self.cpu_ns = mode, readback, int(cpu_us * 1000)
        self.layers, self.batch = layers, batch

    def setup(self) -> None:
        import queue
        import threading

        self.dec = Decode(self.mode, self.layers, self.batch)
        self.dec.setup()
        self.host = [pinned(torch.empty(self.batch, 1, dtype=torch.long)) for _ in range(2)]
        cuda = torch.cuda.is_available()
        self.side = torch.cuda.Stream() if cuda else None
        self.ready = [torch.cuda.Event() if cuda else None for _ in range(2)]
        self.done = [torch.cuda.Event() if cuda else None for _ in range(2)]
        self.tokens: list[int] = []
        self._pending = False
        if self.readback == "drain":
            self.todo: queue.Queue = queue.Queue()
            self.results: queue.Queue = queue.Queue()
            self.worker = threading.Thread(target=self._drain, daemon=True, name="readback")
            self.worker.start()

    def _forward(self, i: int) -> torch.Tensor:
        d = self.dec
        if self.mode == "graph":
            d.g.replay()
            d.tok.copy_(d.out)
        else:
            d.tok = d.m(d.tok, i % 200)
        return d.tok

    def _copy_on_side(self, slot: int, tok: torch.Tensor) -> None:
        if self.side is None:
            self.host[slot].copy_(tok)
            return
        self.side.wait_event(self.ready[slot])
        with torch.cuda.stream(self.side):
            self.host[slot].copy_(tok, non_blocking=True)
            self.done[slot].record(self.side)
        tok.record_stream(self.side)

    def _drain(self) -> None:
        while True:
            item = self.todo.get()
            if item is None:
                return
            slot, tok = item
            self._copy_on_side(slot, tok)
            if self.done[slot] is not None:
                self.done[slot].synchronize()
            self.results.put(slot)

    def _take(self, slot: int) -> None:
        self.tokens.append(int(self.host[slot][0, 0]))
        del self.tokens[:-64]

    @torch.no_grad()
    def step(self, i: int) -> None:
        slot = i % 2
        tok = self._forward(i)
        if self.ready[slot] is not None:
            self.ready[slot].record()
        if self.readback == "sync":
            self.host[slot].copy_(tok)  # blocking D2H on the main stream
            _busy_ns(self.cpu_ns)
            self._take(slot)
            return
        if self.readback == "async":
            self._copy_on_side(slot, tok)
            _busy_ns(self.cpu_ns)  # schedule step i+1 while the GPU runs step i
            if i > 0 and self.done[1 - slot] is not None:
                self.done[1 - slot].synchronize()
            if i > 0:
                self._take(1 - slot)
            if i == 0 or self.side is None:
                self._sync_first(slot)
            return
        self.todo.put((slot, tok))
        _busy_ns(self.cpu_ns)
        if self._pending:
            self._take(self.results.get())  # step i-1's tokens
        self._pending = True

    def _sync_first(self, slot: int) -> None:
        if self.done[slot] is not None:
            self.done[slot].synchronize()

    def block_boundary(self) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()


def options(items: list[str]) -> dict[str, Any]:
    """Workload options from ``key=value`` strings (``--kw``): a decimal number becomes a float,
    digits an int, anything else stays a string."""
    kw = dict(item.split("=", 1) for item in items)
    return {
        k: (
            float(v)
            if v.replace(".", "", 1).isdigit() and "." in v
            else int(v)
            if v.isdigit()
            else v
        )
        for k, v in kw.items()
    }


WORKLOADS = {
    "hf_generate": HFGenerate,
    "tv_train": TVTrain,
    "tv_eval": TVEval,
    "tv_detect": TVDetect,
    "hf_bert_train": HFBertTrain,
    "serving": Serving,
    "decode": Decode,
    "kv_offload": KVOffload,
    "async_readback": AsyncReadback,
    "flag_reads": FlagReads,
    "ddp": DDPTrain,
    "tp_decode": TPDecode,
}
