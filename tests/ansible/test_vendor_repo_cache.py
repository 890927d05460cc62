"""Every vendor repository goes through the site's apt cache: with rollout.apt_proxy set, roles/vendor_repo writes an
https:// repository as apt-cacher-ng's remapping http://HTTPS///host/path (the cache fetches it over HTTPS and keeps
the packages for the next host: apt-cacher-ng's README, section 8.2), leaves an http:// one as it is, and writes
the https URL itself when the site has no cache.

The role's definition is rendered by Ansible itself in a child process (`ansible all -m debug` over three local
hosts, one per case, about 3 s): the pytest process does not import Ansible (it patches sys.intern, which
torch.compile on the same worker refuses).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ROLE = REPO / "roles/vendor_repo"
DOCKER = "https://download.docker.com/linux/debian"
CACHE = {"apt_proxy": "http://ctl-01:3142"}


def _sources(cases: dict[str, dict[str, object]], tmp_path: Path) -> dict[str, str]:
    """vendor_repo's .sources content per case (host variables over the role's defaults and vars)."""
    role_vars = {**yaml.safe_load((ROLE / "defaults/main.yml").read_text()),
                 **yaml.safe_load((ROLE / "vars/main.yml").read_text()),
                 "vendor_repo_name": "docker", "vendor_repo_suite": "bookworm", "vendor_repo_components": ["stable"],
                 "ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": role_vars, "hosts": cases}}))
    done = subprocess.run(
        [str(BIN / "ansible"), "all", "-i", str(inventory), "-o", "-m", "ansible.builtin.debug",
         "-a", "var=vendor_repo_sources_content"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
             "ANSIBLE_GATHERING": "explicit", "ANSIBLE_INVENTORY_ENABLED": "ansible.builtin.yaml"}, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    rendered = {}
    for line in done.stdout.splitlines():
        host, _, payload = line.partition(" | SUCCESS => ")
        if payload:
            rendered[host] = json.loads(payload)["vendor_repo_sources_content"]
    assert set(rendered) == set(cases), done.stdout
    return rendered


def _uris(content: str) -> str:
    return next(line.split(": ", 1)[1] for line in content.splitlines() if line.startswith("URIs: "))


def test_an_https_vendor_repository_goes_through_the_site_s_apt_cache_and_only_then(tmp_path: Path) -> None:
    rendered = _sources({"cached": {"vendor_repo_url": DOCKER, "bringup_rollout": CACHE},
                         "direct": {"vendor_repo_url": DOCKER, "bringup_rollout": {"apt_proxy": ""}},
                         "plain_http": {"vendor_repo_url": "http://127.0.1.250:8080/cuda/", "bringup_rollout": CACHE},
                         "no_site_rollout": {"vendor_repo_url": DOCKER}}, tmp_path)
    assert _uris(rendered["cached"]) == "http://HTTPS///download.docker.com/linux/debian"
    assert _uris(rendered["direct"]) == DOCKER
    assert _uris(rendered["no_site_rollout"]) == DOCKER
    assert _uris(rendered["plain_http"]) == "http://127.0.1.250:8080/cuda/"
    # the repository is still trusted only through its own key, cached or not
    assert all("Signed-By: /etc/apt/keyrings/docker.asc" in content for content in rendered.values())
