"""Link data rates per direction as the industry names them (4X HDR = 200 Gb/s, 4X NDR = 400 Gb/s)."""

from __future__ import annotations

LANE_GBPS = {"SDR": 2.0, "DDR": 4.0, "QDR": 8.0, "FDR10": 10.0, "FDR": 13.64, "EDR": 25.0, "HDR": 50.0,
             "NDR": 100.0, "XDR": 200.0}
LANES = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}


def line_rate_gbps(width: str | None, speed: str | None) -> float | None:
    if width is None or speed is None:
        return None
    lanes, lane = LANES.get(width.upper()), LANE_GBPS.get(speed.upper())
    return None if lanes is None or lane is None else lanes * lane
