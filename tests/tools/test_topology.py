from __future__ import annotations

import pytest

from tools.health.errors import ParseError
from tools.health.outcome import CRITICAL, OK, WARN
from tools.health.topology import parse_topo_check, parse_topology

from .conftest import expectations, realdata

pytestmark = pytest.mark.realdata

H200X8 = "nvidia-smi-topo-m__github-node-record__8xH200-EPYC9534-8xmlx5.txt"
B300 = "nvidia-smi-topo-m__github-issue-env__8xB300-SXM6-9NIC-ansi-residue.txt"
H200X2 = "h200x2-captured-2026-11-29/nvidia-smi-topo-m.txt"


def test_real_topologies_parse_including_ansi_residue() -> None:
    h200 = parse_topology(realdata(H200X8))
    assert len(h200.gpus) == 8 and len(h200.nics) == 8 and h200.nic_names["NIC4"] == "mlx5_4"
    assert h200.links[("GPU0", "NIC4")] == "PIX" and h200.links[("GPU3", "GPU7")] == "NV18"
    b300 = parse_topology(realdata(B300))
    assert len(b300.nics) == 9 and b300.nic_names["NIC8"] == "mlx5_bond_0"
    lent = parse_topology(realdata(H200X2))
    assert lent.gpus == ("GPU0", "GPU1") and lent.nics == () and lent.links[("GPU1", "GPU0")] == "NV18"


def test_every_pair_on_nvlink_and_nic_affinity() -> None:
    exp8 = expectations(gpu={"count": 8}, ib={"gpu_nic_affinity": True})
    assert parse_topo_check(realdata(H200X8), 0, exp8).status == OK
    assert parse_topo_check(realdata(H200X2), 0, expectations()).status == OK


def test_pair_over_pcie_is_critical() -> None:
    text = realdata(H200X2).replace("GPU0\t X \tNV18", "GPU0\t X \tSYS", 1)
    outcome = parse_topo_check(text, 0, expectations())
    assert (outcome.status, outcome.reason, outcome.evidence) == (CRITICAL, "nvlink_topology", ("GPU0-GPU1 via SYS",))


def test_gpu_without_a_near_nic_is_flagged_when_the_site_asks() -> None:
    text = realdata(H200X8).replace("GPU0\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNODE\tNODE\tSYS\tNODE\tPIX",
                                    "GPU0\t X \tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNV18\tNODE\tNODE\tSYS\tNODE\tNODE")
    exp8 = expectations(gpu={"count": 8}, ib={"gpu_nic_affinity": True})
    outcome = parse_topo_check(text, 0, exp8)
    assert (outcome.status, outcome.reason, outcome.evidence) == (WARN, "gpu_nic_affinity", ("GPU0",))


def test_truncated_matrix_is_refused() -> None:
    text = realdata(H200X8)
    with pytest.raises(ParseError):
        parse_topology(text.split("GPU5\t")[0])
