"""Published CC costs per platform, each constant with its source.

Evidence tags follow ``../shared/reference/cc-cost-model.md``: [V] read in the primary source,
[D] derived from a paper's published raw data, [B] from the research brief (primary text not
located), [I] our inference. A constant tagged [B] or [I] is a best guess; the ground-truth file
of every emulated run records exactly what was injected, whatever its source.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Constant:
    """One injected cost with where it comes from."""

    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class Platform:
    """CC costs of one GPU generation, as injected by the emulator."""

    name: str
    launch_toll: Constant
    graph_launch_toll: Constant
    copy_toll: Constant
    copy_bandwidth: Constant
    collective_bandwidth_ratio: Constant
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form, for ground-truth files."""
        return asdict(self)


#: Native (CC off) copy cost of the H200 used for the sample traces, subtracted from the padding
#: so that an emulated copy costs toll + bytes / bandwidth in total.
NATIVE_H200 = {
    "copy_toll_ns": Constant(
        7_000,
        "ns",
        "H200 microbenchmark, ../shared/traces/h200_microbench.json: pinned copies "
        "of 32 B-64 KiB take 6.6-8.7 us end to end",
    ),
    "copy_bandwidth": Constant(54e9, "B/s", "same file: 16 MiB pinned H2D in 313 us (53.6 GB/s)"),
}

PLATFORMS: dict[str, Platform] = {
    "h100": Platform(
        name="h100",
        launch_toll=Constant(
            5_100,
            "ns",
            "[D] ISPASS'25 artifact fig12: cudaLaunchKernel median 10.0 us CC vs "
            "4.9 us off (H100 NVL, Intel TDX)",
        ),
        graph_launch_toll=Constant(
            5_100, "ns", "[I] no published per-graph-launch figure for H100; the kernel launch toll"
        ),
        copy_toll=Constant(
            19_800, "ns", "[D] ISPASS'25 fig4: pinned 64 B H2D 21.9 us CC vs 2.1 us off"
        ),
        copy_bandwidth=Constant(
            3.0e9, "B/s", "[D] ISPASS'25 fig4: pinned H2D peak 3.03 GB/s CC (43 GB/s off)"
        ),
        collective_bandwidth_ratio=Constant(
            1.0, "ratio", "[V] Hopper multi-GPU CC uses PPCIe: NVLink traffic is not encrypted"
        ),
        notes=(
            "Hopper full CC allows one GPU per VM; multi-GPU runs use PPCIe (plaintext NVLink).",
        ),
    ),
    "b200": Platform(
        name="b200",
        launch_toll=Constant(
            12_250, "ns", "[B] 2026 B200 CC study: kernel launch 3.45 us off -> 15.7 us CC"
        ),
        graph_launch_toll=Constant(
            89_000,
            "ns",
            "[B]+[I] same study: CUDA-graph decode step 2500 -> 2589 us; the whole "
            "+89 us is charged to the step's one cudaGraphLaunch (assumption)",
        ),
        copy_toll=Constant(
            35_000,
            "ns",
            "[B]+[I] same study: 7.21 GB/s at 1 MB and ~9.5 GB/s at 16-64 MB imply "
            "t0 ~ 35 us for t = t0 + n/BW",
        ),
        copy_bandwidth=Constant(9.6e9, "B/s", "[B] same study: 9.4-9.6 GB/s at 16-64 MB"),
        collective_bandwidth_ratio=Constant(
            156 / 185, "ratio", "[B] same study: NCCL all-reduce 185 -> 156 GB/s"
        ),
    ),
    "b300": Platform(
        name="b300",
        launch_toll=Constant(
            12_250, "ns", "[I] no published B300 per-launch toll; the B200 figure"
        ),
        graph_launch_toll=Constant(
            12_250,
            "ns",
            "[V] Phala: a CUDA graph of 96,000 matmuls runs at 1.0012x under CC, so "
            "graph launches pay no more than a kernel launch (assumption: the B200 toll)",
        ),
        copy_toll=Constant(
            330_000, "ns", "[V] Phala 'Serialized Bridge' blog: small crossings pay ~330 us"
        ),
        copy_bandwidth=Constant(
            0.203 * 54e9,
            "B/s",
            "[V] Phala: single-context H2D at 0.203x of CC off, applied to "
            "the H200's native 54 GB/s",
        ),
        collective_bandwidth_ratio=Constant(
            156 / 185, "ratio", "[I] no published B300 NCCL figure; the B200 ratio"
        ),
    ),
}


def get_platform(name: str) -> Platform:
    """Look up a platform by name (h100, b200, b300)."""
    try:
        return PLATFORMS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown platform {name!r}; choose from {', '.join(PLATFORMS)}") from None


def shim_env(platform: Platform, mechanisms: list[str], layer: str = "auto") -> dict[str, str]:
    """Environment variables that configure the LD_PRELOAD shim for a platform.

    Args:
        platform: the costs to inject.
        mechanisms: any of launch, copy, copy_pad, copy_sync (others are not the shim's).
        layer: auto | runtime | driver.

    Returns:
        The CCDIAG_EMU_* variables.
    """
    shim_mechs = [m for m in mechanisms if m in ("launch", "copy", "copy_pad", "copy_sync")]
    return {
        "CCDIAG_EMU_MECH": ",".join(shim_mechs) if shim_mechs else "none",
        "CCDIAG_EMU_LAUNCH_NS": str(int(platform.launch_toll.value)),
        "CCDIAG_EMU_GRAPH_NS": str(int(platform.graph_launch_toll.value)),
        "CCDIAG_EMU_COPY_TOLL_NS": str(int(platform.copy_toll.value)),
        "CCDIAG_EMU_COPY_BW": repr(float(platform.copy_bandwidth.value)),
        "CCDIAG_EMU_NATIVE_TOLL_NS": str(int(NATIVE_H200["copy_toll_ns"].value)),
        "CCDIAG_EMU_NATIVE_BW": repr(float(NATIVE_H200["copy_bandwidth"].value)),
        "CCDIAG_EMU_LAYER": layer,
    }
