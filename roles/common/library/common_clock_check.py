#!/usr/bin/python
"""Refuse a host whose clock is too far from the controller's, in one task.

The controller's time is templated into the task's arguments just before the module is sent, and the
host's clock is read when the module runs, so the skew includes at most the transfer (milliseconds).
The comparison is a pure function (`skew_problem`), unit-tested in tests/ansible/test_helper_modules.py.
"""

from __future__ import annotations

import time

DOCUMENTATION = r"""
module: common_clock_check
short_description: Fail when the host's clock is further than a limit from the controller's
options:
  controller_epoch: {type: float, required: true, description: "the controller's time (now(utc=true).timestamp())"}
  max_skew_s: {type: float, required: true, description: the largest skew allowed, in seconds}
  host: {type: str, required: true, description: the host's name (in the message)}
author: bringup
"""

RETURN = r"""
skew_s: {type: float, description: host clock minus controller clock, in seconds}
"""


def skew_problem(host: str, host_epoch: float, controller_epoch: float, max_skew_s: float) -> str | None:
    """The message that says what to fix when the skew is over the limit, else None."""
    skew = host_epoch - controller_epoch
    if abs(skew) <= max_skew_s:
        return None
    return (f"the clock of {host} is {round(skew)} s away from the controller's (limit {max_skew_s:g} s); apt "
            "would reject repository metadata as not yet valid or expired. Set the time (chronyc makestep, or "
            "date -s then hwclock --systohc, and check the BMC/RTC clock), then re-run")


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(
        argument_spec={
            "controller_epoch": {"type": "float", "required": True},
            "max_skew_s": {"type": "float", "required": True},
            "host": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    now = time.time()
    problem = skew_problem(params["host"], now, params["controller_epoch"], params["max_skew_s"])
    if problem:
        module.fail_json(msg=problem, skew_s=now - params["controller_epoch"])
    module.exit_json(changed=False, skew_s=now - params["controller_epoch"])


if __name__ == "__main__":
    main()
