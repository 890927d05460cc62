"""The sync at the end of the steps that move hosts in or out of golden (provision/slurm/after_step.py)."""

from __future__ import annotations

from provision.site.model import Site
from provision.slurm.after_step import sync_after_step
from tests.slurm.conftest import SlurmRig, needs_slurm

pytestmark = needs_slurm


def test_a_step_that_fails_a_golden_host_ends_with_it_drained(rig: SlurmRig) -> None:
    rig.set_all("golden")
    assert sync_after_step(rig.site, rig.store) == "slurm sync: no change"
    rig.store.mark("gpu-r2-04", "failed", reason="pcie_width_x4")
    assert sync_after_step(rig.site, rig.store) == "slurm sync: 1 drain"
    assert rig.node("gpu-r2-04")["state_flags"] == ["DRAIN"]


def test_a_slurm_that_cannot_be_reached_does_not_fail_the_step(rig: SlurmRig) -> None:
    rig.set_all("golden")
    rig.lab.stop_controller()
    line = sync_after_step(rig.site, rig.store)
    assert line is not None and line.startswith("slurm sync: not done (") and "provision slurm sync" in line


def test_a_site_that_wants_no_sync_after_steps_gets_none(rig: SlurmRig) -> None:
    assert rig.site.spec.slurm is not None
    spec = rig.site.spec.model_copy(update={"slurm": rig.site.spec.slurm.model_copy(
        update={"sync_after_steps": False})})
    assert sync_after_step(Site(spec=spec, path=rig.site.path), rig.store) is None
