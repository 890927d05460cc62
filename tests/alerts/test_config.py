"""The monitoring roles' configuration, rendered by Ansible from each role's defaults (and with receivers
set), checked by the tools that run it: `promtool check config` (which also checks the rules it loads) and
`amtool check-config`, and its routing tree with `amtool config routes test`; the rules file alone with
`promtool check rules`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.alerts.promtool import REPO, RULES

PLAYBOOK = REPO / "tests" / "alerts" / "render_configs.yml"
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"


def _render(out: Path, **overrides: object) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    extra = {"render_out": str(out), "prometheus_server_rules_dir": str(RULES.parent), **overrides}
    done = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(PLAYBOOK), "-e", json.dumps(extra)],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return out


def _tool(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("monitoring")
    hooks = {"alertmanager_webhook_urls": ["https://chat.example.net/hooks/bringup"],
             "alertmanager_critical_webhook_urls": ["https://pager.example.net/v2/enqueue"]}
    return _render(base / "defaults"), _render(base / "receivers", **hooks)


@pytest.mark.tools("promtool")
def test_the_rules_file_passes_promtool_check_rules() -> None:
    done = _tool("promtool", "check", "rules", str(RULES))
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr


@pytest.mark.tools("promtool")
def test_rendered_prometheus_config_passes_promtool_check_config_with_its_rules(rendered: tuple[Path, Path]) -> None:
    config = rendered[0] / "prometheus.yml"
    done = _tool("promtool", "check", "config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 1 rule files found" in done.stdout + done.stderr
    doc = yaml.safe_load(config.read_text())
    jobs = {j["job_name"]: j for j in doc["scrape_configs"]}
    assert sorted(jobs) == ["bringup", "dcgm", "node", "prometheus", "training"]
    assert jobs["node"]["file_sd_configs"][0]["files"] == ["/var/lib/prometheus/bringup-targets/node.json"]
    assert jobs["training"]["params"] == {"collect[]": ["textfile"]} and jobs["training"]["honor_labels"]


@pytest.mark.tools("amtool")
def test_rendered_alertmanager_config_passes_amtool_check_config_without_and_with_receivers(
        rendered: tuple[Path, Path]) -> None:
    for directory in rendered:
        done = _tool("amtool", "check-config", str(directory / "alertmanager.yml"))
        assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
    with_hooks = yaml.safe_load((rendered[1] / "alertmanager.yml").read_text())
    assert [r["name"] for r in with_hooks["receivers"]] == ["bringup", "bringup-critical"]


@pytest.mark.tools("amtool")
@pytest.mark.parametrize(("labels", "without", "with_pager"), [
    (["severity=critical", "alertname=GpuHardwareXid", "host=gpu-r1-03"], "bringup", "bringup-critical"),
    (["severity=warning", "alertname=HostFailedStage", "host=gpu-r1-03"], "bringup", "bringup")])
def test_alertmanager_routes_critical_alerts_to_the_pager_only_when_one_is_configured(
        rendered: tuple[Path, Path], labels: list[str], without: str, with_pager: str) -> None:
    got = [_tool("amtool", "config", "routes", "test", f"--config.file={d / 'alertmanager.yml'}", *labels)
           for d in rendered]
    assert [(g.returncode, g.stdout.strip()) for g in got] == [(0, without), (0, with_pager)]


def test_the_targets_service_runs_provision_metrics_targets_into_the_directory_prometheus_reads(
        rendered: tuple[Path, Path]) -> None:
    unit = (rendered[0] / "bringup-scrape-targets.service").read_text()
    assert ("ExecStart=/opt/bringup/venv/bin/provision metrics targets --site /etc/bringup/site.yml "
            "--out /var/lib/prometheus/bringup-targets --node-port 9100 --dcgm-port 9400") in unit
    assert "Environment=BRINGUP_METRICS_DIR=/var/lib/node_exporter/textfile_collector" in unit
