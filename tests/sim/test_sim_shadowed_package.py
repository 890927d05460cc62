"""`python -m sim` from a directory with its own `sim/` folder still runs this lab (issue 16: it imported the
folder as `sim`, found no simulators and said "lab is up (0 services)" with exit 0)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.lab import SIM_DIR, Lab, LabError, Service

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "inventory" / "sim" / "site.yml"


def _env() -> dict[str, str]:
    # As a user's shell: the project importable (installed or on PYTHONPATH), the working directory first.
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


@pytest.mark.parametrize("regular", [False, True], ids=["namespace-dir", "package-dir"])
def test_status_in_a_directory_with_its_own_sim_folder_lists_the_labs_simulators(tmp_path: Path,
                                                                                   regular: bool) -> None:
    (tmp_path / "sim").mkdir()
    if regular:
        (tmp_path / "sim" / "__init__.py").write_text("")
    done = subprocess.run([sys.executable, "-m", "sim", "status", "--json", "--site", str(SITE)], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-500:]
    assert {"redfish", "maas"} <= set(json.loads(done.stdout)), done.stdout


def test_a_lab_with_no_simulators_is_not_up(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="no simulators found"):
        Lab([], tmp_path / "run").up()


def test_simulators_import_this_package_whatever_directory_they_start_in(tmp_path: Path) -> None:
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "__init__.py").write_text("")
    seen = tmp_path / "seen"
    code = f"import sim, pathlib; pathlib.Path({str(seen)!r}).write_text(sim.__file__ or '')"
    svc = Service("probe", [sys.executable, "-c", code + "; import time; time.sleep(60)"],
                  probe=seen.exists, start_timeout_s=30, cwd=tmp_path)
    with Lab([svc], tmp_path / "run").running_lab():
        assert Path(seen.read_text()).parent == SIM_DIR
