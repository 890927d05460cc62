"""The Slurm roles' pure parts, without test hosts: the munge key check, the handlers' conditions (the test hosts
run no init, so their playbook runs never reach them) and the slurm.conf node and partition lines from the
inventory (roles/slurm_conf/filter_plugins). The roles on real daemons: tests/ansible/test_slurm_roles.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.ansible.conftest import REPO
from tests.ansible.handler_conditions_eval import handlers_running

FILTERS = REPO / "roles" / "slurm_conf" / "filter_plugins" / "slurm_conf.py"


def test_the_key_check_names_a_missing_short_or_long_key(tmp_path: Path) -> None:
    """The lookup's checks (in a Python of its own: importing ansible-core here would patch this worker)."""
    for name, size in (("short", 16), ("long", 1025), ("fine", 32)):
        (tmp_path / name).write_bytes(b"k" * size)
        (tmp_path / name).chmod(0o600)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from munge_key_check import key_problem, MAKE; "
            "import os; [print(key_problem(p, os.path.getsize(p) if os.path.exists(p) else None, "
            "os.stat(p).st_mode & 0o7777 if os.path.exists(p) else None, False, 32, 1024)) for p in sys.argv[2:]]")
    done = subprocess.run([sys.executable, "-c", code, str(REPO / "roles/munge/lookup_plugins"),
                           *(str(tmp_path / n) for n in ("short", "long", "fine", "missing")), ""],
                          capture_output=True, text=True, timeout=60, check=True)
    short, long_, fine, missing, unset = done.stdout.split("\n")[:5]
    assert "holds 16 bytes; munged needs 32 to 1024" in short and "dd if=/dev/urandom" in short
    assert "holds 1025 bytes" in long_ and fine == ""
    assert "does not exist on the controller" in missing and unset.startswith("munge_key_file is not set")


def test_a_change_of_nodes_restarts_the_daemons_and_any_other_change_reconfigures_them() -> None:
    """The test hosts run no init, so the playbook runs never reach these conditions (services off there)."""
    def ctld(changed: list[str], manage: bool = True) -> tuple[str, dict[str, Any]]:
        return ("slurm_controller", {"slurm_controller_manage_services": manage,
                                     "slurm_conf_written": {"changed_files": changed}})

    def slurmd(changed: list[str], own: list[str]) -> tuple[str, dict[str, Any]]:
        return ("slurm_node", {"slurm_node_manage_services": True, "slurm_conf_written": {"changed_files": changed},
                               "slurm_node_files_written": {"changed_files": own}})

    assert handlers_running(ctld(["conf", "nodes"]), ctld(["conf"]), ctld(["topology"]), ctld(["nodes"], False),
                             slurmd(["nodes"], []), slurmd(["conf"], []), slurmd([], ["gres"]),
                             slurmd(["conf"], ["cgroup", "health_check"])) == [
        {"Restart slurmctld"}, {"Reconfigure Slurm"}, {"Reconfigure Slurm"}, set(),
        {"Restart slurmd"}, {"Reload slurmd"}, {"Restart slurmd"}, {"Restart slurmd"}]
    [munge_on, munge_off] = handlers_running(("munge", {"munge_manage_services": True}),
                                              ("munge", {"munge_manage_services": False}))
    assert (munge_on, munge_off) == ({"Restart munged"}, set())


# --- the node lines, pure ----------------------------------------------------------------------------------------


def _filters() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("slurm_conf_filters", FILTERS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_node_and_partition_lines_from_the_inventorys_nodes() -> None:
    f = _filters()
    nodes = {"b-02": {"address": "10.0.0.2", "class": "hgx", "gpus": 8, "gpu_type": "h100_80gb_hbm3"},
             "b-01": {"address": "10.0.0.1", "class": "hgx", "gpus": 8, "gpu_type": "h100_80gb_hbm3"},
             "c-01": {"address": "c-01", "class": "cpu", "gpus": 0, "gpu_type": ""}}
    # the class's first node (by name) among the candidates; a class without one gives no facts
    assert f.slurm_conf_fact_hosts(nodes, ["b-02", "b-01", "ctl"]) == {"hgx": "b-01"}
    hostvars = {"b-01": {"ansible_facts": {"processor_vcpus": 224, "memtotal_mb": 2_063_000}}}
    resources = f.slurm_conf_resources({"hgx": "b-01", "cpu": "c-01"}, hostvars, 8192)
    assert resources == {"hgx": {"CPUs": 224, "RealMemory": 2_054_808}}
    lines = f.slurm_conf_node_lines(nodes, resources, {"hgx": {"Weight": 10}}, {"b-02": {"Port": 17002}})
    assert lines == [
        "NodeName=b-01 NodeAddr=10.0.0.1 CPUs=224 RealMemory=2054808 Gres=gpu:h100_80gb_hbm3:8 Weight=10",
        "NodeName=b-02 NodeAddr=10.0.0.2 CPUs=224 RealMemory=2054808 Gres=gpu:h100_80gb_hbm3:8 Weight=10 Port=17002",
        "NodeName=c-01 NodeAddr=c-01"]
    parts = f.slurm_conf_partition_lines([{"name": "gpu", "classes": ["hgx"], "default": True, "max_time": "2-00"},
                                          {"name": "empty", "classes": ["none"]}], nodes)
    assert parts == ["PartitionName=gpu Nodes=b-01,b-02 Default=YES MaxTime=2-00 State=UP",
                     "PartitionName=empty Default=NO MaxTime=INFINITE State=UP"]
    with pytest.raises(f.SlurmConfError, match="Features='a b'"):
        f.slurm_conf_node_lines(nodes, {}, {}, {"c-01": {"Features": "a b"}})


def test_gres_types_from_gpu_models() -> None:
    from provision.site.slurm import gres_type

    assert gres_type("NVIDIA H200") == "h200"
    assert gres_type("NVIDIA H100 80GB HBM3") == "h100_80gb_hbm3"
    assert gres_type("nvidia  GH200 (480GB)") == "gh200_480gb"
    assert gres_type("A100-SXM4-40GB") == "a100_sxm4_40gb"
    assert gres_type("NVIDIA ") == ""
