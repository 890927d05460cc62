"""InfiniBand HCAs from sysfs: ports ACTIVE at the expected rate and width, active port count, error
counters, firmware."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .check import FAST, Check, single
from .config import Expectations
from .errors import ParseError
from .outcome import CRITICAL, OK, WARN, Outcome
from .sysfs_dump import parse_dump

PROBE = "ib-sysfs"


@dataclass(frozen=True)
class IbPort:
    hca: str
    port: str
    state: str  # "ACTIVE", "DOWN", "INIT", "ARMED" (the word after "N: ")
    phys_state: str
    rate_gbps: float | None
    width: str | None  # "4X"
    link_layer: str
    fw_ver: str | None
    counters: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class IbInventory:
    hcas: tuple[str, ...]
    ports: tuple[IbPort, ...]


def _word(value: object) -> str:
    text = str(value or "")
    return text.split(":", 1)[1].strip() if ":" in text else text.strip()


def parse_inventory(text: str) -> IbInventory:
    fields, rows = parse_dump(text, "ib-sysfs", "ports")
    ports = []
    for row in rows:
        if not row.get("hca") or not row.get("port"):
            raise ParseError(f"ib-sysfs: row without hca/port: {row}")
        rate = re.match(r"^\s*([\d.]+) Gb/sec(?: \((\d+X)[^)]*\))?", str(row.get("rate") or ""))
        counters = row.get("counters") or {}
        ports.append(IbPort(
            hca=str(row["hca"]), port=str(row["port"]), state=_word(row.get("state")),
            phys_state=_word(row.get("phys_state")), rate_gbps=float(rate.group(1)) if rate else None,
            width=rate.group(2) if rate and rate.group(2) else None, link_layer=str(row.get("link_layer") or ""),
            fw_ver=row.get("fw_ver"),
            counters={k: v for k, v in counters.items() if isinstance(v, int)},
        ))
    hca_names = sorted({p.hca for p in ports})
    announced = int(fields.get("hcas", "0")) if fields.get("hcas", "0").isdigit() else -1
    if announced < len(hca_names):
        raise ParseError(f"ib-sysfs: header announces {announced} HCAs, ports name {len(hca_names)}")
    # An HCA with no ports directory still counts as present.
    hcas = tuple(hca_names + [f"<hca {i}>" for i in range(len(hca_names), announced)])
    return IbInventory(hcas, tuple(ports))


def _ib_ports(inv: IbInventory, exp: Expectations) -> list[IbPort]:
    return [p for p in inv.ports if p.link_layer == exp.ib.link_layer]


def parse_ib_ports(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "ib_ports"
    if rc != 0:
        raise ParseError(f"ib-sysfs exited {rc}")
    inv = parse_inventory(output)
    ports = _ib_ports(inv, exp)
    active = [p for p in ports if p.state == "ACTIVE"]
    want_active = exp.ib.active_ports if exp.ib.active_ports is not None else exp.ib.hca_count
    evidence = tuple(f"{p.hca}/{p.port}: {p.state} {p.phys_state} {p.rate_gbps} Gb/s {p.width}" for p in ports)
    if len(inv.hcas) < exp.ib.hca_count:
        return Outcome(name, CRITICAL, f"{len(inv.hcas)} of {exp.ib.hca_count} HCAs present", reason="ib_hca_missing",
                       evidence=evidence, remediation="Check `lspci -d 15b3:` and dmesg for mlx5_core errors; reseat "
                       "or replace the HCA; check the OFED/DOCA driver is loaded.")
    if len(active) < want_active:
        down = [f"{p.hca}/{p.port}: {p.state} ({p.phys_state})" for p in ports if p.state != "ACTIVE"]
        return Outcome(name, CRITICAL, f"{len(active)} of {want_active} IB ports ACTIVE", reason="ib_port_down",
                       evidence=tuple(down) + evidence,
                       remediation="A port in Polling has no peer (cable, transceiver or switch port), one in "
                       "INIT/ARMED waits for the subnet manager. See the switch side with `iblinkinfo` (or UFM's port "
                       "view and events), query the port with `ibportstate <lid> <port> query`, and check the cable "
                       "lands where the design says with `fabric validate --site <site file> --live`.")
    slow = [p for p in active if (exp.ib.rate_gbps and (p.rate_gbps or 0) < exp.ib.rate_gbps)
            or (exp.ib.width and p.width != exp.ib.width)]
    if slow:
        return Outcome(name, WARN, f"{len(slow)} IB port(s) below {exp.ib.rate_gbps} Gb/s {exp.ib.width or ''}".strip(),
                       reason="ib_rate_degraded",
                       evidence=tuple(f"{p.hca}/{p.port}: {p.rate_gbps} Gb/s {p.width}" for p in slow) + evidence,
                       remediation="A degraded link: reseat or replace the cable/transceiver; compare with the switch "
                       "side (iblinkinfo).")
    return Outcome(name, OK, f"{len(active)} IB port(s) ACTIVE across {len(inv.hcas)} HCA(s)", evidence=evidence,
                   metrics=(("ib_ports_active", float(len(active))),))


def parse_ib_counters(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "ib_counters"
    if rc != 0:
        raise ParseError(f"ib-sysfs exited {rc}")
    ports = _ib_ports(parse_inventory(output), exp)
    if not ports:
        raise ParseError("no IB ports to read counters from")
    missing = [p for p in ports if not any(k in p.counters for k in exp.ib.counter_max)]
    if missing:
        raise ParseError(f"no error counters under {missing[0].hca}/{missing[0].port}/counters")
    over = [(p, k, p.counters[k]) for p in ports for k, limit in exp.ib.counter_max.items()
            if p.counters.get(k, 0) > limit]
    if over:
        return Outcome(name, WARN, f"{len(over)} IB error counter(s) above the site's limits", reason="ib_errors",
                       evidence=tuple(f"{p.hca}/{p.port} {k}={v}" for p, k, v in over),
                       remediation="Clear the counters (`perfquery -x -R`), load the link (`ib_write_bw` against a "
                       "peer for a few minutes) and read them again (`perfquery -x`): counters that grow mean a bad "
                       "cable or transceiver; UFM (or `perfquery` on the switch's LID and port) shows the other end.")
    return Outcome(name, OK, f"error counters within limits on {len(ports)} port(s)")


def parse_ib_firmware(output: str, rc: int, exp: Expectations) -> Outcome:
    name = "ib_firmware"
    if rc != 0:
        raise ParseError(f"ib-sysfs exited {rc}")
    inv = parse_inventory(output)
    by_hca = {p.hca: p.fw_ver for p in inv.ports}
    if not by_hca:
        raise ParseError("no HCA reports a firmware version")
    odd = {h: v for h, v in by_hca.items() if v not in exp.ib.firmware}
    if odd:
        return Outcome(name, WARN, f"{len(odd)} HCA(s) not on the site's firmware", reason="ib_firmware_mismatch",
                       evidence=tuple(f"{h}: {v}, site allows {', '.join(exp.ib.firmware)}" for h, v in odd.items()),
                       remediation="Flash the pinned firmware (mlxfwmanager / flint) and reset the HCA (mlxfwreset).")
    return Outcome(name, OK, f"{len(by_hca)} HCA(s) on firmware {', '.join(sorted({str(v) for v in by_hca.values()}))}")


def _no_hcas(exp: Expectations) -> str | None:
    return None if exp.ib.hca_count > 0 else "site declares no InfiniBand HCA on this host"


def _no_firmware_pin(exp: Expectations) -> str | None:
    return _no_hcas(exp) or (None if exp.ib.firmware else "site pins no HCA firmware")


CHECKS = (
    Check("ib_ports", FAST, (PROBE,), single("ib_ports", PROBE, parse_ib_ports), _no_hcas),
    Check("ib_counters", FAST, (PROBE,), single("ib_counters", PROBE, parse_ib_counters), _no_hcas),
    Check("ib_firmware", FAST, (PROBE,), single("ib_firmware", PROBE, parse_ib_firmware), _no_firmware_pin),
)
