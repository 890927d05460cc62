"""`GET /ufmRest/app/smconf` of the simulated UFM: its OpenSM's configuration, as NVIDIA's UFM Enterprise REST
API Guide gives it ("SM Configuration REST API", v6.16-v6.22): one object of opensm.conf's keys with
`routing_engine_active`; `?param_name=<key>` answers that key alone, 400 for a key OpenSM does not have.

The simulated UFM is the SM of the ibsim fabric (the real `opensm -o -R <engines>`, `sim.ufm.fabricview`):
`routing_engine` is what it asks OpenSM for, `routing_engine_active` the engine its last sweep's log says
configured the switches (an ftree request that fell back says minhop), absent when the log does not say.
Other keys are the guide's example values, where UFM keeps its files.
"""

from __future__ import annotations

from typing import Any

from fabric.burnin.engine import RoutingEngine

_FIXED: dict[str, Any] = {  # the guide's example answer
    "sm_priority": 15, "sminfo_polling_timeout": 5000, "polling_retry_number": 4, "max_wire_smps": 8,
    "transaction_timeout": 200, "exit_on_fatal": True, "log_file": "/opt/ufm/files/log/opensm.log",
    "dump_files_dir": "/opt/ufm/files/log/", "lfts_file": "/opt/ufm/files/conf/opensm/lfts.conf",
}


def sm_config(asked: str, engine: RoutingEngine | None, query: dict[str, list[str]]) -> tuple[int, Any]:
    """(status, JSON answer) of `GET /ufmRest/app/smconf` with `query`."""
    conf = dict(_FIXED, routing_engine=asked)
    if engine is not None and engine.used is not None:
        conf["routing_engine_active"] = engine.used
    if "param_name" not in query:
        return 200, conf
    key = query["param_name"][0]
    if key not in conf:
        return 400, {"error": f"unknown SM configuration key {key[:64]!r}"}
    return 200, {key: conf[key]}
