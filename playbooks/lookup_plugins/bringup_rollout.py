"""Lookup `bringup_rollout`: the site's `rollout` settings (provision/site/rollout.py) for play keywords.

Ansible templates `serial` and the other play keywords with play and extra variables only, never inventory ones,
so `bringup_rollout` from the inventory cannot reach them. This lookup reads the site the run's `bringup_state`
inventory reads (`ansible_inventory_sources`, resolved as the plugin resolves them), else `$BRINGUP_SITE`, else
the embedded site (a static inventory export), and returns the named setting:

    serial: "{{ lookup('bringup_rollout', 'batches') }}"
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleLookupError  # type: ignore[import-untyped]
from ansible.plugins.lookup import LookupBase  # type: ignore[import-untyped]

from provision.ansible_inventory.sources import default_site, sites_of_sources
from provision.errors import BringupError
from provision.site import load_site

DOCUMENTATION = r"""
name: bringup_rollout
short_description: the site's rollout settings (apt proxy, batches, max_fail_percentage, forks)
description:
  - Reads the site of the run's bringup_state inventory (else $BRINGUP_SITE, else the embedded site).
options:
  _terms:
    description: Setting names (apt_proxy, batches, max_fail_percentage, forks); none returns them all.
    required: false
"""


class LookupModule(LookupBase):  # type: ignore[misc]
    def run(self, terms: list[Any], variables: dict[str, Any] | None = None, **kwargs: Any) -> list[Any]:
        sources = list((variables or {}).get("ansible_inventory_sources") or [])
        sites = sites_of_sources(str(s) for s in sources) or [default_site()]
        if len(sites) > 1:
            raise AnsibleLookupError(f"bringup_rollout: the inventory reads {len(sites)} sites "
                                     f"({', '.join(map(str, sites))}); one run rolls out one site")
        try:
            rollout = load_site(sites[0]).spec.rollout.as_vars()
        except BringupError as exc:
            raise AnsibleLookupError(f"bringup_rollout: {exc}") from exc
        if not terms:
            return [rollout]
        unknown = [t for t in terms if t not in rollout]
        if unknown:
            raise AnsibleLookupError(f"bringup_rollout: no setting {unknown} (known: {', '.join(rollout)})")
        # Each value wrapped in a list: a list value (batches) stays one item, as lookup() returns it.
        return [rollout[t] for t in terms]
