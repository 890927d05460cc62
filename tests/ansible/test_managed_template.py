"""roles/managed_files/lookup_plugins/managed_template.py renders a template to the same text as ansible-core's
`ansible.builtin.template` lookup (which it replaces in the roles because that lookup deep-copies every host
variable for each file): `ansible_managed` and the template variables, a user's own `ansible_managed`, an
include from the templates folder, inventory and play variables, trailing newlines, a missing file's error.

One ansible-playbook run on an `ansible_connection: local` host comparing the two lookups in assert tasks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOOKUPS = REPO / "roles" / "managed_files" / "lookup_plugins"

TEMPLATES = {
    "managed.j2": "# {{ ansible_managed }}\npath={{ template_path | basename }} host={{ template_host }}\n",
    "vars.j2": "{% for k in site_list %}{{ k }}={{ site_map[k] }}\n{% endfor %}{{ play_value }}\n\n\n",
    "include.j2": "top\n{% include 'part.j2' %}\nend",
    "part.j2": "part {{ inventory_hostname }}",
    "escapes.j2": "{{ 'a\\\\nb' }} {{ \"tab\\there\" }} {% raw %}{{ kept }}{% endraw %}\n",
}

PLAYBOOK = """
- name: managed_template against ansible.builtin.template
  hosts: all
  gather_facts: false
  vars:
    play_value: "{{ site_map['b'] | upper }}"
  tasks:
    - name: The same text, file by file
      ansible.builtin.assert:
        that: lookup('managed_template', item) == lookup('ansible.builtin.template', item)
        fail_msg: "{{ item }}: {{ lookup('managed_template', item) | to_json }} != {{ lookup('ansible.builtin.template', item) | to_json }}"
      loop: [managed.j2, vars.j2, include.j2, escapes.j2]
    - name: A user's ansible_managed wins in both
      ansible.builtin.assert:
        that:
          - lookup('managed_template', 'managed.j2') == lookup('ansible.builtin.template', 'managed.j2')
          - lookup('managed_template', 'managed.j2').startswith('# mine')
      vars:
        ansible_managed: mine
    - name: The rendered text keeps the trailing newlines of the file
      ansible.builtin.assert:
        that: lookup('managed_template', 'vars.j2').endswith('TEXT\\n\\n\\n')
    - name: A missing file is an error naming it
      ansible.builtin.debug:
        msg: "{{ lookup('managed_template', 'missing.j2') }}"
      register: missing
      ignore_errors: true
    - name: The error names the file
      ansible.builtin.assert:
        that: missing is failed and 'missing.j2' in missing.msg
"""


def test_managed_template_renders_what_the_builtin_template_lookup_renders(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    for name, text in TEMPLATES.items():
        (tmp_path / "templates" / name).write_text(text)
    (tmp_path / "inventory.yml").write_text(
        "all:\n  hosts:\n    h1:\n      ansible_connection: local\n"
        "      site_list: [a, b]\n      site_map: {a: '{{ 1 + 1 }}', b: text}\n")
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"), "ANSIBLE_LOOKUP_PLUGINS": str(LOOKUPS),
           "ANSIBLE_PYTHON_INTERPRETER": sys.executable, "ANSIBLE_LOCAL_TEMP": str(tmp_path / "tmp"),
           "ANSIBLE_HOME": str(tmp_path / "home"), "ANSIBLE_NOCOLOR": "1"}
    done = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "inventory.yml"),
                           str(tmp_path / "play.yml")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=180, check=False)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "ok=5" in out and "failed=0" in out and "ignored=1" in out, out[-4000:]
