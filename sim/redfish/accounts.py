"""The AccountService of a simulated iDRAC: the service, its one configured account and the predefined roles.

URIs and ids follow iDRAC9 (`/redfish/v1/AccountService/Accounts/2` is the factory `root` account; the
roles are the three DSP0266 predefines, with the privileges its "Roles" clause gives them). A real iDRAC also
lists its 15 other account slots, empty and disabled; the simulator lists only the account the site's credential names.
"""

from __future__ import annotations

from sim.redfish.tree import V1, Json, collection, ref

ACCOUNT_SERVICE = f"{V1}/AccountService"
ACCOUNTS = f"{ACCOUNT_SERVICE}/Accounts"
ROLES = f"{ACCOUNT_SERVICE}/Roles"
ACCOUNT_ID = "2"
ROLE_PRIVILEGES = {
    "Administrator": ["Login", "ConfigureManager", "ConfigureUsers", "ConfigureSelf", "ConfigureComponents"],
    "Operator": ["Login", "ConfigureSelf", "ConfigureComponents"],
    "ReadOnly": ["Login", "ConfigureSelf"],
}


def account_resources(username: str) -> dict[str, Json]:
    """Every resource under /redfish/v1/AccountService, by path."""
    account = f"{ACCOUNTS}/{ACCOUNT_ID}"
    out: dict[str, Json] = {
        ACCOUNT_SERVICE: {
            "@odata.context": f"{V1}/$metadata#AccountService.AccountService",
            "@odata.id": ACCOUNT_SERVICE,
            "@odata.type": "#AccountService.v1_5_0.AccountService",
            "Accounts": ref(ACCOUNTS),
            "Description": "BMC User Accounts",
            "Id": "AccountService",
            "LocalAccountAuth": "Enabled",
            "Name": "Account Service",
            "Roles": ref(ROLES),
            "ServiceEnabled": True,
            "Status": {"Health": "OK", "State": "Enabled"},
        },
        ACCOUNTS: collection(ACCOUNTS, "ManagerAccount", "Accounts Collection", [account]),
        account: {
            "@odata.context": f"{V1}/$metadata#ManagerAccount.ManagerAccount",
            "@odata.id": account,
            "@odata.type": "#ManagerAccount.v1_4_0.ManagerAccount",
            "AccountTypes": ["Redfish"],
            "Description": "User Account",
            "Enabled": True,
            "Id": ACCOUNT_ID,
            "Links": {"Role": ref(f"{ROLES}/Administrator")},
            "Locked": False,
            "Name": "User Account",
            "Password": None,  # write-only: always null when read
            "RoleId": "Administrator",
            "UserName": username,
        },
        ROLES: collection(ROLES, "Role", "Roles Collection", [f"{ROLES}/{r}" for r in ROLE_PRIVILEGES]),
    }
    for role, privileges in ROLE_PRIVILEGES.items():
        out[f"{ROLES}/{role}"] = {
            "@odata.context": f"{V1}/$metadata#Role.Role",
            "@odata.id": f"{ROLES}/{role}",
            "@odata.type": "#Role.v1_2_0.Role",
            "AssignedPrivileges": privileges,
            "Description": f"{role} User Role",
            "Id": role,
            "IsPredefined": True,
            "Name": role,
            "RoleId": role,
        }
    return out
