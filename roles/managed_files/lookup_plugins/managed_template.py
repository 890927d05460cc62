"""`lookup('managed_template', 'NAME.j2')`: the file's content rendered as `ansible.builtin.template` renders it.

The content a role hands to the `managed_files` module. `ansible.builtin.template` as a lookup deep-copies every
variable of the host before each file (ansible-core 2.19, plugins/lookup/template.py): with the site's variables
that was most of a no-op run's controller time for the roles that render several files per host. The
`template` action renders from a shallow copy of the same variables; this lookup renders from a shallow copy
too, with the builtin lookup's search path and template variables (`ansible_managed`, `template_path`, ...)
and the action's templating call, so a file renders to the same text.
"""

from __future__ import annotations

import os
from typing import Any

from ansible.errors import AnsibleError  # type: ignore[import-untyped]
from ansible.plugins.lookup import LookupBase  # type: ignore[import-untyped]
from ansible.template import generate_ansible_template_vars, trust_as_template  # type: ignore[import-untyped]

DOCUMENTATION = """
name: managed_template
short_description: Render a role template for the managed_files module
description:
  - Renders each named file from the role's templates/ with the host's variables, as the template action does.
options:
  _terms:
    description: Template file names, searched for as ansible.builtin.template searches.
    required: true
"""


class LookupModule(LookupBase):  # type: ignore[misc]
    def run(self, terms: list[str], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[str]:
        variables = variables or {}
        rendered = []
        for term in terms:
            path = self.find_file_in_search_path(variables, "templates", term)
            if not path:
                raise AnsibleError(f"the template file {term} could not be found for the lookup")
            data = trust_as_template(self._loader.get_text_file_contents(path))
            # For includes: the file's own folder, then the task's search path with each one's templates/ first.
            roots = variables.get("ansible_search_path", [])
            searchpath = [os.path.dirname(path)]
            searchpath += [d for root in roots for d in (os.path.join(root, "templates"), root)]
            local = dict(variables)  # shallow, as the template action copies
            template_vars = generate_ansible_template_vars(path=term, fullpath=path)
            if "ansible_managed" in local:  # the user's own wins, as with the template action
                template_vars.pop("ansible_managed", None)
            local.update(template_vars)
            templar = self._templar.copy_with_new_env(searchpath=searchpath, available_variables=local)
            rendered.append(templar.template(data, escape_backslashes=False))
        return rendered
