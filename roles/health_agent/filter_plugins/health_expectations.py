"""`bringup_health_expectations`: the health agent's expectations for a host, from its inventory host vars.

    {{ hostvars[inventory_hostname] | bringup_health_expectations(inventory_hostname, level='fast', overlay={}) }}

It runs the renderer the controller runs (provision.health.agent_expectations), so the role and
`provision health` write one schema; ansible-playbook runs from the project's virtual environment, where
`provision` is installed. It imports nothing from Ansible (whose templating patches the interpreter), so
tests call it in-process; Ansible reports the FactsError it raises with the template that failed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from provision.health.agent_expectations import FactsError, facts_from_host_vars, render_agent_expectations


def bringup_health_expectations(
    host_vars: Mapping[str, Any], hostname: str, level: str = "fast", overlay: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    try:
        return render_agent_expectations(facts_from_host_vars(host_vars), hostname=hostname, level=level,
                                         overlay=overlay)
    except FactsError as exc:
        raise FactsError(f"bringup_health_expectations for {hostname}: {exc}") from None


class FilterModule:
    def filters(self) -> dict[str, Callable[..., Any]]:
        return {"bringup_health_expectations": bringup_health_expectations}
