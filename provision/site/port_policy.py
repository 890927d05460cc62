"""`PortPolicy`: which evidence condemns a link, and how much one run may disable.

The site file carries it as `fabric.port_policy`; every field has the default a site gets without one.
Event codes are UFM's (defaults: the list Imbue acted on, REFERENCE.md); the counter thresholds are rates
per hour between two sweeps.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel, ConfigDict, Field, model_validator

IMBUE_CODES = (110, 112, 113, 115, 116, 329, 702, 917, 918)
IMBUE_IGNORED = (64, 65, 66, 67, 328, 331, 332, 336, 395, 517, 527, 603, 604, 908, 1500, 1502)
LINK_WENT_DOWN = 329
PORT_UNHEALTHY = 702


class CounterThresholds(BaseModel):
    """A port whose counter grows faster than this (per hour) condemns its link; slower but growing: watch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    symbol_errors: float = Field(100.0, ge=0)
    link_downed: float = Field(0.5, ge=0)
    rcv_errors: float = Field(100.0, ge=0)


class PortPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    codes: tuple[int, ...] = Field(IMBUE_CODES, description="UFM event codes that count against a port")
    ignore: tuple[int, ...] = Field(IMBUE_IGNORED, description="codes known to say nothing about a port")
    skip_702_reasons: tuple[str, ...] = Field(("MANUAL",), description="702 'unhealthy due to X' reasons "
                                              "that are an operator's doing, not a fault")
    window_hours: float = Field(24.0, gt=0, description="events older than this are history")
    burst_events: int = Field(50, ge=2, description="this many events within burst_seconds are a UFM restart")
    burst_seconds: float = Field(1.0, gt=0)
    condemn_events: int = Field(1, ge=1, description="counted events on a link within the window that "
                                "disable it (Imbue: 1); fewer: watch")
    host_link_down_condemns: bool = Field(False, description="every 329 on a host's link counts, even one "
                                          "its host's restart explains; off: only the unexplained ones")
    host_flap_events: int = Field(2, ge=1, description="unexplained link-downs of one host link in the window "
                                  "that disable it (its cable or transceiver flapping); fewer: watch")
    host_together_seconds: float = Field(10.0, gt=0, description="every HCA of a host going down within this "
                                         "many seconds is the host restarting, not its cables")
    host_restart_seconds: float = Field(900.0, gt=0, description="link-downs up to this long after bringup reset "
                                        "or power-cycled the host (the state store's record) are that restart")
    counter_thresholds: CounterThresholds = CounterThresholds()
    clock_skew_seconds: float = Field(300.0, ge=0, description="events later than now + this are set apart")
    ufm_timezone: str = Field("UTC", description="zone of UFM's event.log timestamps (its server's local time)")
    max_uplink_percent: float = Field(25.0, gt=0, le=100, description="never disable more than this share "
                                      "of one switch's uplinks in a run without force")
    max_ports: int = Field(64, ge=1, description="never disable more than this many ports in a run without "
                           "force (both ends of a link count)")

    @model_validator(mode="after")
    def _codes_not_ignored(self) -> PortPolicy:
        both = sorted(set(self.codes) & set(self.ignore))
        if both:
            raise ValueError(f"codes {both} are both counted and ignored")
        return self

    @property
    def window(self) -> timedelta:
        return timedelta(hours=self.window_hours)
