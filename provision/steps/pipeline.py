"""The bring-up as one table: every step from `declared` to `golden`, what it takes and where it moves
hosts, the host facts it reads and writes, and each failure reason with what to do about it.

`provision steps` prints this table. Each step's code (provision/bmc/step.py, provision/maas/step.py,
provision/health/step.py, provision/golden/step.py, provision/firmware/step.py, provision/bios/step.py,
fabric/burnin/step.py, fabric/ports/step.py) names its spec from here, and the one runner
(provision/steps/runner.py) runs every one of them the same way.
"""

from __future__ import annotations

from provision.state.lifecycle import State
from provision.steps.spec import StepSpec

_BMC_REASONS = {
    "bmc_unreachable": "check the BMC's cabling, address and that it is powered (AC on)",
    "bmc_tls": "check bmc_tls in the site file (ca_bundle, or verify: false for self-signed iDRACs)",
    "bmc_auth": "check the credential the site file names for this BMC (account, password, lockout)",
    "bmc_timeout": "the BMC accepted the connection but did not answer: reset the iDRAC (racreset)",
    "bmc_error_5xx": "the BMC kept answering server errors: retry later or reset the iDRAC",
    "bmc_bad_response": "the BMC answered, but not with usable Redfish over HTTP (the detail says what: a bad "
    "status line or header, an oversized or unparseable body): check that the address is the BMC's and not "
    "another service or a proxy, then reset the iDRAC (racreset) or update its firmware",
}

_POWER_REASONS = {
    **_BMC_REASONS,
    "power_fault": "the server did not change power state: check PSUs and the iDRAC's lifecycle log",
}

# Made precise from the switches' view (provision/ethernet/triage.py) when the site has an Ethernet design.
_CABLE_REASONS = {
    "pxe_cable_unplugged": "the PXE NIC's MAC is on no switch and its designed port has no link: plug (reseat or "
    "replace) the cable into the port the evidence names, then `provision ethernet check`",
    "pxe_cable_misplaced": "the PXE NIC's MAC is learnt on another switch port than designed: move the cable (or "
    "swap the two crossed cables the evidence names), then `provision ethernet check`",
    "pxe_port_err_disabled": "the switch has error-disabled the PXE NIC's designed port (the evidence names the "
    "switch's cause, e.g. link-flap or BPDU guard): fix the cause (reseat or replace a flapping cable or optic), "
    "then re-enable the port (shutdown / no shutdown, or errdisable recovery) and `provision ethernet check`",
}

HARVEST = StepSpec(
    name="harvest-macs",
    run_by="provision harvest-macs",
    summary="ask every BMC for its NICs, serials and firmware; pick the PXE NIC",
    takes=(State.declared, State.bmc_reachable),
    moves_to=(State.bmc_reachable, State.macs_harvested),
    writes=("pxe_nic", "pxe_mac", "macs", "serial", "service_tag", "model", "redfish_system_id", "bios_version",
            "bmc_firmware"),
    reasons={
        **_BMC_REASONS,
        "no_pxe_nic": "enable a PXE device in the BIOS (PxeDev1) or fix the host class's pxe_nic",
        "duplicate_pxe_mac": "another host already holds this PXE MAC (the evidence names it): one of the two BMCs "
        "reports the other's NICs; check both BMCs' inventories, fix the wrong one, then harvest both again "
        "(neither gets a DHCP reservation meanwhile)",
        "pxe_nic_link_down": "check the PXE NIC's cable and switch port",
        **_CABLE_REASONS,
        "unexpected_hardware": "reseat or replace the missing part, or fix the host class's expectations",
    },
)

PXE = StepSpec(
    name="pxe-boot",
    run_by="provision pxe-boot",
    summary="arm a one-time PXE boot (If-Match ETag), power on (off first if on), verify the override",
    takes=(State.macs_harvested,),
    moves_to=(State.pxe_armed,),
    reads=("pxe_nic", "pxe_mac"),
    reasons={
        **_POWER_REASONS,
        "pxe_not_armed": "the BMC did not keep the boot override: check the iDRAC's job queue",
    },
    host_timeout_s=300.0,
)

POWER = StepSpec(
    name="power",
    run_by="provision power on|off|cycle|status",
    summary="power hosts through their BMCs (no lifecycle change)",
    takes=tuple(State),
    moves_to=(),
    reasons={
        **_POWER_REASONS,
    },
    host_timeout_s=300.0,
)

MAAS_DEPLOY = StepSpec(
    name="maas-deploy",
    run_by="provision maas deploy",
    summary="enlist PXE-armed hosts in MAAS with their MACs and BMC, commission, deploy the OS",
    takes=(State.pxe_armed, State.enlisted, State.commissioned),
    moves_to=(State.enlisted, State.commissioned, State.deployed),
    reads=("pxe_mac", "macs"),
    writes=("maas_system_id", "os_address"),
    reasons={
        "no_harvested_mac": "run `provision harvest-macs` for the host, then deploy again",
        "maas_identity_mismatch": "MAAS has a machine of this host's name without its harvested PXE MAC (the "
        "evidence names both): rename or delete that machine in MAAS, or harvest again if it really is this server",
        "credential_unresolved": "fix the BMC credential the site file names for the host (env variable or vault "
        "entry)",
        "maas_enlist_rejected": "read MAAS's field errors: a MAC or hostname already in MAAS under another machine "
        "must be deleted there or fixed in the site file",
        **_CABLE_REASONS,
        "maas_commissioning_failed": "read the commissioning/testing script results in MAAS (machine > "
        "Commissioning), fix the hardware, then deploy again",
        "maas_deploy_failed": "read the installation log in MAAS (machine > Logs), then deploy again: the host is "
        "released and redeployed",
        "maas_release_failed": "MAAS could not release the machine after a failed deployment (power off or disk "
        "erasure failed): read its events in MAAS, mark it fixed there, then deploy again",
        "maas_power_error": "MAAS could not power the machine through its BMC: check the power parameters MAAS "
        "holds and that MAAS's rack controller reaches the BMC",
        "maas_state_conflict": "the machine's MAAS status does not allow this step: bring it to Ready in MAAS "
        "(mark fixed, exit rescue mode, wait for erasing, or commission it), then deploy again",
        "maas_timeout": "MAAS did not finish within the host deadline: look at the machine's events in MAAS, then "
        "deploy again with a longer --timeout if it was only slow",
        "maas_unreachable": "check that the MAAS region answers (URL, network, TLS); a request whose answer was "
        "lost may have taken effect: deploy again, it picks the host up where MAAS has it",
        "maas_error": "read the detail: MAAS refused or garbled the answer",
    },
    concurrency=32,
    host_timeout_s=1800.0,
)

CONFIGURE = StepSpec(
    name="site.yml",
    run_by="ansible-playbook playbooks/site.yml, recorded by `provision record HOST configured`",
    summary="the GPU-host roles: driver, fabric manager, container runtime, DCGM, ZFS, OFED, GPUDirect RDMA",
    takes=(State.deployed,),
    moves_to=(State.configured,),
    reasons={
        "site_unreachable_over_ssh": "the host stopped answering over SSH during site.yml: check that it is up and "
        "its network, then run the playbook again (--limit HOST)",
        "site_*": "a role's task failed (the reason names it): read the failed task and its message in the "
        "host's history, fix it, then run the playbook again (--limit HOST)",
    },
)

HEALTH = StepSpec(
    name="health",
    run_by="provision health --level fast|long",
    summary="the node agent over SSH on every host; a verdict per host (unknown is never healthy)",
    takes=(State.configured, State.healthy, State.burned_in, State.golden),
    moves_to=(State.healthy,),
    reads=("os_address",),
    reasons={
        "ssh_refused": "start sshd on the host or fix its address in the site file",
        "ssh_connect_timeout": "the host does not answer on SSH: check that it booted and its network",
        "ssh_host_key_mismatch": "the host's SSH key changed: if it was reinstalled, remove its old key from the "
        "site's known_hosts; otherwise investigate",
        "ssh_auth_failed": "install the controller's SSH key on the host (the site's ssh settings)",
        "ssh_disconnected": "the session dropped mid-check: run the health check again",
        "ssh_bad_response": "what answers on the host's SSH port does not speak SSH (a bad banner, malformed "
        "packets): check that the address and port are the host's sshd and not another service, then its sshd",
        "health_timeout": "the agent did not finish in time: look for a hung GPU or disk, or raise the timeout",
        "controller_error": "a bug in the controller: run again with BRINGUP_DEBUG=1 and report it",
    },
    concurrency=64,
    host_timeout_s=300.0,
)

BURN_IN = StepSpec(
    name="burn-in",
    run_by="fabric burnin run --plan P --site S (judged by fabric burnin judge)",
    summary="ib_write_bw over every routed IB link at full rate (stages from the real LFTs); a host whose every "
    "HCA link passed is burned in",
    takes=(State.healthy, State.burned_in),
    moves_to=(State.burned_in,),
    writes=("hca_guids",),
    reasons={
        "burnin_link_failed": "a link of this host's HCAs ran below the site's floor or its error counters rose: "
        "reseat or replace the cable/transceiver named (the port plan has it as evidence source burnin), then "
        "burn in again",
    },
    concurrency=256,
    host_timeout_s=60.0,
)

PORTS = StepSpec(
    name="ports",
    run_by="fabric ports apply --apply, fabric ports reenable LINK --repaired (after they change the port ledger)",
    summary="a host whose HCA link the port ledger has down fails (ib_port_disabled); once the link is "
    "re-enabled it goes back to configured, to earn healthy, burned_in and golden again",
    takes=(State.deployed, State.configured, State.healthy, State.burned_in, State.golden),
    moves_to=(State.configured,),
    reasons={
        "ib_port_disabled": "a link of this host's HCAs is out of service (the evidence names it and its port "
        "ledger row): `fabric ports ticket LINK` is the datacenter ticket; once the cable or transceiver is "
        "replaced, `fabric ports reenable LINK --repaired`, then health and burn-in earn golden again",
    },
    concurrency=512,
    host_timeout_s=30.0,
)

GOLDEN = StepSpec(
    name="golden",
    run_by="provision health (promotes), provision golden (writes the hostfile)",
    summary="healthy and burned in (or healthy alone where the site does not require burn-in)",
    takes=(State.healthy, State.burned_in),
    moves_to=(State.golden,),
)

_AFTER_BASELINE = (State.macs_harvested, State.pxe_armed, State.enlisted, State.commissioned, State.deployed,
                   State.configured)
_DRIFT_REASONS = {
    "firmware_drift": "a component runs another version than its host class's baseline (the evidence names the "
    "component, the version seen and the one wanted): `provision firmware plan` then `provision firmware apply`, "
    "or fix the baseline if the site changed its mind",
    "bios_drift": "a BIOS attribute differs from its host class's baseline (the evidence names it, the value seen "
    "and the one wanted): `provision bios plan` then `provision bios apply`",
}
_APPLY_REASONS = {
    **_BMC_REASONS,
    **_DRIFT_REASONS,
    "firmware_image_mismatch": "the image file's SHA-256 is not the one the site file pins: fetch the image again "
    "from the vendor and check it, or fix the pin; no BMC was told of it",
    "firmware_update_refused": "the BMC refused the update (SimpleUpdate or the multipart push; the evidence has "
    "its status and message: 400 a parameter or image it does not accept, 501 no such action), or offers neither, or "
    "only SimpleUpdate on a site without firmware_rollout.image_url: fix that, or update by the vendor's own tool",
    "firmware_update_failed": "the BMC's update task ended in Exception/Killed/Cancelled (the evidence has its "
    "messages): read the BMC's log, then apply again",
    "firmware_task_timeout": "the update task did not end before the site's firmware_rollout.task_timeout_s: look "
    "at the task on the BMC (it may still be running), then apply again",
    "firmware_task_off_bmc": "the BMC named a task monitor outside itself (another host or scheme): never "
    "followed; report it to the vendor",
    "bmc_did_not_return": "the BMC did not answer again within firmware_rollout.bmc_return_timeout_s after its own "
    "update: check it on the console (it may be rolling back), then inventory again",
    "firmware_version_unchanged": "the task completed but the component still reports its old version after the "
    "reboot: the image may not apply to this hardware or needs another reset (AC cycle); check, then apply again",
    "bios_setting_refused": "the BMC refused a BIOS attribute or value (the evidence has its message): check the "
    "attribute registry's name and allowed values, fix the baseline, then apply again",
    "bios_not_applied": "after the reboot the BIOS still shows other values than were set: the BMC may need "
    "another reset or keeps a pending job; check Bios/Settings, then apply again",
    "reboot_timeout": "the host did not power back on after the update: check it on the console",
}

FIRMWARE_INVENTORY = StepSpec(
    name="firmware-inventory",
    run_by="provision firmware inventory",
    summary="read every BMC's FirmwareInventory and BIOS attributes, judge them against the host class's baseline; "
    "a host off it fails (firmware_drift, bios_drift), a drifted host back on it re-enters the flow",
    takes=(State.declared, State.bmc_reachable, *_AFTER_BASELINE, State.healthy, State.burned_in, State.golden),
    moves_to=(State.bmc_reachable, *_AFTER_BASELINE),
    reasons={**_BMC_REASONS, **_DRIFT_REASONS},
    concurrency=128,
    host_timeout_s=120.0,
)

FIRMWARE_APPLY = StepSpec(
    name="firmware-apply",
    run_by="provision firmware apply",
    summary="SimpleUpdate from the controller's image server, each task followed to its end, a reboot within the "
    "site's limits, a read-back; canary first, then batches; an updated host goes back to configured for health "
    "and burn-in",
    takes=(*_AFTER_BASELINE, State.healthy, State.burned_in, State.golden),
    moves_to=_AFTER_BASELINE,
    reasons={**_APPLY_REASONS},
    concurrency=16,
    host_timeout_s=7200.0,
)

BIOS_APPLY = StepSpec(
    name="bios-apply",
    run_by="provision bios apply",
    summary="the baseline's BIOS attributes PATCHed to Bios/Settings with the apply time the BMC supports, a "
    "reboot within the site's limits, a read-back; canary first, then batches",
    takes=(*_AFTER_BASELINE, State.healthy, State.burned_in, State.golden),
    moves_to=_AFTER_BASELINE,
    reasons={**_APPLY_REASONS},
    concurrency=16,
    host_timeout_s=3600.0,
)

# The lifecycle in the order a host goes through it (power is a tool, not a stage).
PIPELINE: tuple[StepSpec, ...] = (HARVEST, PXE, MAAS_DEPLOY, CONFIGURE, HEALTH, BURN_IN, GOLDEN)
BASELINE_STEPS: tuple[StepSpec, ...] = (FIRMWARE_INVENTORY, FIRMWARE_APPLY, BIOS_APPLY)
ALL_STEPS: tuple[StepSpec, ...] = (*PIPELINE, POWER, PORTS, *BASELINE_STEPS)


def remediation_for(reason: str | None) -> str:
    """What to do about a failure reason, from whichever step declares it."""
    return next((text for spec in ALL_STEPS if (text := spec.remediation(reason))), "")
