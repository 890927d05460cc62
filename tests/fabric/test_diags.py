"""How the product reaches a site's infiniband-diags tools (fabric/diags.py): the announcement's prefix,
environment and attachment points go into every tool run; an announcement that is malformed, too large or
whose serving process is gone is one DiscoveryError naming the file, never a traceback or a silent default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fabric.diags import Attachment, Diags
from fabric.errors import DiscoveryError


def _announce(tmp_path: Path, doc: object) -> Path:
    path = tmp_path / "site.ib-diags.json"
    path.write_text(json.dumps(doc))
    return path


def test_prefix_environment_and_attachment_point_reach_the_tool(tmp_path: Path) -> None:
    path = _announce(tmp_path, {"prefix": ["env"], "env": {"FABRIC": "plane-a"}, "pid": os.getpid(),
                                "attach": [{"label": "hca-a", "guid": "0x1", "args": ["-C", "mlx5_0", "-P", "1"],
                                            "env": {"PORT": "1"}}]})
    diags = Diags.from_file(path)
    [point] = diags.attachments or ()
    assert diags.argv(["perfquery", "-l", "7"], point) == ["env", "perfquery", "-C", "mlx5_0", "-P", "1", "-l", "7"]
    proc = diags.run_sync(["sh", "-c", 'echo "$FABRIC $PORT $0"'], 10, Attachment("p", None, env={"PORT": "2"}))
    assert proc.stdout == "plane-a 2 sh\n"


@pytest.mark.parametrize("doc, why", [
    ([1], "not a JSON object"),
    ({"prefix": "sudo"}, "prefix is not a list"),
    ({"env": {"A": 1}}, "env is not a mapping of strings to strings"),
    ({"attach": [{"guid": "0x1"}]}, "an attachment point is not an object with a label"),
    ({"pid": "x"}, "invalid literal for int"),
])
def test_a_malformed_announcement_is_one_error_naming_the_file(tmp_path: Path, doc: object, why: str) -> None:
    path = _announce(tmp_path, doc)
    with pytest.raises(DiscoveryError, match=f"the fabric tools' announcement {path} is unreadable: .*{why}"):
        Diags.from_file(path)


def test_an_announcement_whose_process_is_gone_says_so(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    path = _announce(tmp_path, {"pid": int(gone)})
    with pytest.raises(DiscoveryError, match=f"announced in {path} are not running \\(pid {gone} is gone\\)"):
        Diags.from_file(path)


def test_an_oversized_announcement_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text('{"env": {"A": "' + "x" * (5 * 1024 * 1024) + '"}}')
    with pytest.raises(DiscoveryError, match="larger than the 4 MiB limit"):
        Diags.from_file(path)


def test_without_an_announcement_the_tools_are_this_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BRINGUP_IB_DIAGS", raising=False)
    assert Diags.for_site(None) == Diags()
    monkeypatch.setenv("BRINGUP_IB_DIAGS", str(_announce(tmp_path, {"prefix": ["x"]})))
    assert Diags.for_site(None).prefix == ("x",)
