"""Every credential a site names is held for masking when the site is read, resolved or not by the command
(provision/site/named_secrets.py), and the state store masks the held ones in what other packages' tables
bind (provision/state/redact.py: masked_writes), a JSON document staying one."""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from provision.site import load_site
from provision.site.index import load_index
from provision.site.named_secrets import hold_recorded_site_secrets, hold_site_secrets
from provision.state import StateStore, secret_values
from provision.state.redact import mask_stored
from tests.sites import copy_sim_site

BMC = "Named-bmc-pass-0042"
UFM = "Named-ufm-pass-0043"
KEY = "NamedConsumer01:NamedToken0002:NamedTokenSecret00000003"


def _document(**extra: object) -> dict[str, object]:
    return {"name": "t", "maas": {"url": "http://m/MAAS/", "api_key": {"env": "T_MAAS_KEY"}},
            "credentials": {"bmc": {"username": "root", "password": {"env": "T_BMC"}},
                            "ufm": {"username": "admin", "password": {"env": "T_UFM"}},
                            "unset": {"username": "x", "password": {"env": "T_NOT_SET"}}, **extra},
            "racks": [{"name": "r1", "hosts": [{"hostname": "h", "bmc": {"credential": "bmc"}}]}]}


def test_every_credential_the_site_names_is_held_in_each_form_it_travels_in(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setenv("T_BMC", BMC)
    monkeypatch.setenv("T_UFM", UFM)
    monkeypatch.setenv("T_MAAS_KEY", KEY)
    monkeypatch.delenv("T_NOT_SET", raising=False)
    monkeypatch.delenv("ANSIBLE_VAULT_PASSWORD_FILE", raising=False)
    document = _document(vaulted={"username": "v", "password": {"vault": "v.yml", "key": "k"}})
    assert hold_site_secrets(document, tmp_path) == 3  # the unset variable and the unreadable vault skipped
    text = " ".join([BMC, UFM, KEY, *KEY.split(":"), base64.b64encode(f"root:{BMC}".encode()).decode(),
                     base64.b64encode(f"admin:{UFM}".encode()).decode(), json.dumps({"p": BMC})])
    masked = secret_values.mask(text)
    assert all(s not in masked for s in (BMC, UFM, *KEY.split(":"))), masked
    assert "Basic" not in masked and masked.count("********") >= 8
    assert capsys.readouterr() == ("", "")  # nothing said about any of them


def test_a_vault_entry_the_site_names_is_held_when_the_vault_can_be_read(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    tool = Path(sys.executable).parent / "ansible-vault"
    assert tool.is_file(), f"{tool} is missing: run ./bringup test, which installs deps/python/ansible.txt"
    (tmp_path / "vault-pass").write_text("vault-test-password\n")
    monkeypatch.setenv("ANSIBLE_VAULT_PASSWORD_FILE", str(tmp_path / "vault-pass"))
    (tmp_path / "v.yml").write_text("k: Vaulted-pass-0044\n")
    subprocess.run([str(tool), "encrypt", str(tmp_path / "v.yml")], check=True, capture_output=True)
    held = hold_site_secrets({"credentials": {"v": {"username": "u", "password": {"vault": "v.yml", "key": "k"}}}},
                             tmp_path)
    assert held == 1 and secret_values.mask("x Vaulted-pass-0044 x") == "x ******** x"


def test_reading_a_site_holds_its_credentials_on_the_index_fast_path_and_from_a_stores_record(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BRINGUP_SIM_BMC_PASSWORD", BMC)
    site = copy_sim_site(tmp_path / "sim")
    load_site(site)  # validates, leaves the index and the parsed cache
    assert secret_values.mask(BMC) == "********"
    secret_values.forget_all()
    load_index(site)  # `provision status`'s path: no validation, no pydantic
    assert secret_values.mask(BMC) == "********"
    secret_values.forget_all()
    assert hold_recorded_site_secrets({"site_file": str(site)}) >= 1
    assert secret_values.mask(BMC) == "********"
    assert hold_recorded_site_secrets({"site_file": str(tmp_path / "gone.yml")}) == 0


def test_a_broken_site_document_holds_what_it_can_and_raises_nothing(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    monkeypatch.setenv("T_BMC", BMC)
    weird = {"credentials": {"a": {"username": 3, "password": {"env": "T_BMC"}}, "b": {"password": {"env": "1x"}},
                             "c": [{"env": "T_BMC", "extra": 1}], "d": None}, "racks": "no"}
    assert hold_site_secrets(weird, tmp_path) == 1  # the one well-formed reference (its username is no string)
    (tmp_path / "bad.yml").write_text("[: not yaml")
    assert hold_recorded_site_secrets({"site_file": str(tmp_path / "bad.yml")}) == 0


def test_the_store_masks_held_secrets_in_what_other_packages_tables_bind(tmp_path: Path) -> None:
    secret_values.hold(BMC, username="root")
    secret_values.hold("73519284")  # a secret that looks like a number
    store = StateStore(tmp_path / "s.db")
    evidence = json.dumps([{"text": f"echo {BMC}", "code": 735192840, "basic": base64.b64encode(
        f"root:{BMC}".encode()).decode()}])
    with store.transaction() as db:
        db.execute("CREATE TABLE IF NOT EXISTS t (a TEXT, b TEXT, n INTEGER)")
        db.execute("INSERT INTO t VALUES (?, ?, ?)", (f"why: {BMC}", evidence, 7))
        db.executemany("INSERT INTO t VALUES (:a, :b, :n)", ({"a": f"{BMC}!", "b": "73519284", "n": i} for i in range(2)))
        db.execute("INSERT INTO t VALUES (?, ?, ?)", ("plain", json.dumps({"port": 73519284}), 9))
    store.close()
    with sqlite3.connect(tmp_path / "s.db") as raw:
        rows = raw.execute("SELECT a, b, n FROM t ORDER BY rowid").fetchall()
    assert rows[0][0] == "why: ********" and rows[0][2] == 7
    assert json.loads(rows[0][1]) == [{"text": "echo ********", "code": 735192840, "basic": "********"}]
    assert rows[1] == ("********!", "********", 0) and rows[2][2] == 1
    assert json.loads(rows[3][1]) == {"port": 73519284}  # a number is never masked: the document stays JSON
    assert all(BMC.encode() not in p.read_bytes() for p in tmp_path.glob("s.db*"))


def test_mask_stored_keeps_text_without_a_held_secret_as_it_is() -> None:
    secret_values.hold(UFM)
    for text in ('{"b": 1,  "a": [2]}', "[1, 2", "no secret here", ""):
        assert mask_stored(text) == text
    assert mask_stored(f"[1, \"{UFM}\"") == "[1, \"********\""  # not JSON after all: masked as text
    assert yaml.safe_load(mask_stored(json.dumps({"k": UFM}, indent=4))) == {"k": "********"}


def test_history_shows_an_event_already_holding_an_echoed_credential_masked(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An event written before this masking (straight into the database): `provision history` resolves no
    credential, yet masks the ones the site names, in its JSON and its table."""
    from provision.cli import main

    monkeypatch.setenv("BRINGUP_SIM_BMC_PASSWORD", BMC)
    for name in ("BRINGUP_STATE_DB", "BRINGUP_SITE"):
        monkeypatch.delenv(name, raising=False)
    site = copy_sim_site(tmp_path / "sim")
    db = tmp_path / "state.db"
    assert main(["status", "--site", str(site), "--db", str(db), "--json"]) == 0
    host = load_site(site).hosts()[0].hostname
    secret_values.forget_all()
    with sqlite3.connect(db) as raw:
        raw.execute("INSERT INTO events (ts, host, from_state, to_state, command, reason, evidence, actor) VALUES "
                    "(2.0, ?, 'declared', 'failed', 'harvest-macs', 'bmc_auth', ?, 'old')",
                    (host, json.dumps({"body": f"401: bad password {BMC} for root"})))
    capsys.readouterr()
    assert main(["history", host, "--site", str(site), "--db", str(db), "--json"]) == 0
    assert main(["history", host, "--site", str(site), "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "bad password ********" in out and BMC not in out


def test_peer_text_shown_or_exported_has_held_secrets_masked() -> None:
    from provision.state.peer_text import csv_cell, shown

    secret_values.hold(UFM)
    assert shown(f"\x1b]0;{UFM}\x07") == "\\x1b]0;********\\x07"
    assert csv_cell(f"={UFM}") == "'=********"
