"""Make the embedded site's replay sets: the lent 2x H200 captures with 8 HDR HCAs, as the sim fabric has.

The lent machine has no InfiniBand, so the HCA part of every set is synthetic: the agent's own
collectors (`tools.health.collectors`) read a fake /sys tree (`fakesys.py`) with 8 ConnectX-6 HDR
HCAs at PCIe Gen4 x16, exactly as they would read a real one. Everything else is the captured set it
derives from. Run from the repository root:

    .venv/bin/python -m tests.tools.make_replay_hdr8
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from tests.tools.fakesys import FakeHca, FakePci, FakePort, make_ib, make_pci
from tools.health.collectors import ib_sysfs, pcie_links

REPLAY = Path(__file__).resolve().parents[1] / "fixtures" / "tools" / "replay"
HDR = "200 Gb/sec (4X HDR)"
BUSES = ("0c", "12", "45", "4b", "8c", "92", "c5", "cb")


def hcas(down: int | None = None) -> list[FakeHca]:
    out = []
    for i, bus in enumerate(BUSES):
        port = FakePort("1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)") if i == down else FakePort(rate=HDR)
        out.append(FakeHca(f"mlx5_{i}", f"0000:{bus}:00.0", fw_ver="20.39.2048", ports=[port]))
    return out


def functions() -> list[FakePci]:
    gen4 = "16.0 GT/s PCIe"
    return [
        FakePci(f"0000:{bus}:00.0", "0x15b3", "0x020700", "mlx5_core", speed=gen4, max_speed=gen4) for bus in BUSES
    ]


def make(base: str, target: str, down: int | None = None) -> None:
    src, dst = REPLAY / base, REPLAY / target
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_pci(root, functions())
        make_ib(root, hcas(down))
        ib_text, _ = ib_sysfs(root)
        hca_rows, _ = pcie_links(root)
    (dst / "ib-sysfs.out").write_text(ib_text)
    (dst / "ib-sysfs.rc").write_text("0\n")
    gpu_rows = [
        line for line in (src / "pcie-links.out").read_text().splitlines()
        if line.startswith("{") and '"kind": "gpu"' in line
    ]
    rows = gpu_rows + [line for line in hca_rows.splitlines() if line.startswith("{")]
    (dst / "pcie-links.out").write_text("\n".join([f"# pcie-links v1 devices={len(rows)}", *rows]) + "\n")


def main() -> None:
    for base in ("h200x2-healthy", "h200x2-xid79", "h200x2-pcie-x4", "h200x2-ecc-uncorrected"):
        make(base, base.replace("h200x2-", "hdr8-"))
    make("h200x2-healthy", "hdr8-ib-port-down", down=5)


if __name__ == "__main__":
    main()
