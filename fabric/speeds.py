"""InfiniBand link widths and speeds: normalising the spellings each tool uses and ranking them."""

from __future__ import annotations

# Lane signalling rate in Gb/s as iblinkinfo prints it, in increasing order of capability.
SPEED_GBPS: dict[str, float] = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.3125,
    "FDR": 14.0625,
    "EDR": 25.78125,
    "HDR": 53.125,
    "NDR": 106.25,
    "XDR": 212.5,
}
SPEED_RANK: dict[str, int] = {name: rank for rank, name in enumerate(SPEED_GBPS)}
WIDTH_LANES: dict[str, int] = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}

_GBPS_TO_SPEED = {f"{gbps:g}": name for name, gbps in SPEED_GBPS.items()}


def normalise_width(token: str) -> str | None:
    """'4x', '4X', 'IB_4x', '4' -> '4X'; None when it is not a width."""
    t = token.strip().upper().removeprefix("IB_")
    if not t.endswith("X"):
        t += "X"
    return t if t in WIDTH_LANES else None


def normalise_speed(token: str) -> str | None:
    """'HDR', 'hdr', 'IB_HDR', '53.125', '53.125 Gbps' -> 'HDR'; None when unknown."""
    t = token.strip().upper().removeprefix("IB_")
    if t in SPEED_RANK:
        return t
    t = t.removesuffix("GBPS").removesuffix("GB/S").strip()
    try:
        return _GBPS_TO_SPEED.get(f"{float(t):g}")
    except ValueError:
        return None


def width_below(seen: str | None, expected: str | None) -> bool:
    """True only when both are known and `seen` is narrower (an unknown side is for `rate_unknown`)."""
    return seen is not None and expected is not None and WIDTH_LANES.get(seen, 0) < WIDTH_LANES[expected]


def speed_below(seen: str | None, expected: str | None) -> bool:
    """True only when both are known and `seen` is slower (an unknown side is for `rate_unknown`)."""
    return seen is not None and expected is not None and SPEED_RANK.get(seen, -1) < SPEED_RANK[expected]
