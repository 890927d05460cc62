"""Read the Secure Boot state and refuse unsigned NVIDIA modules it would keep from loading, in one task.

Secure Boot is the EFI variable SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c (efivarfs: 4 bytes of
attributes, then 1 byte, 1 = on); no /sys/firmware/efi means a legacy BIOS boot (no Secure Boot). With
Secure Boot on, the kernel (lockdown) loads only modules signed by a key it trusts: DKMS signs with its MOK
(/var/lib/dkms/mok.pub) once that key is enrolled. The verdict is a pure function (`verdict`), unit-tested
in tests/ansible/test_secure_boot.py.
"""

from __future__ import annotations

from pathlib import Path

DOCUMENTATION = r"""
module: nvidia_driver_secure_boot
short_description: Fail when Secure Boot is on and the nvidia module is unsigned
options:
  kernel: {type: str, required: true, description: the kernel whose nvidia module counts}
  module: {type: str, default: nvidia, description: the module to look at}
author: bringup
"""

RETURN = r"""
secure_boot: {type: str, description: "on, off or no_efi"}
signer: {type: str, description: the module's signer (modinfo -F signer), empty when unsigned}
"""

EFI = Path("/sys/firmware/efi")
SECURE_BOOT_VAR = EFI / "efivars" / "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"


def secure_boot_state(efi_present: bool, var: bytes | None) -> str:
    """on / off / no_efi from the EFI directory's presence and the efivarfs file's bytes (None: absent)."""
    if not efi_present:
        return "no_efi"
    return "on" if var is not None and len(var) >= 5 and var[4] == 1 else "off"


def verdict(state: str, signer: str, module: str, kernel: str) -> str | None:
    """The message that says what to fix when the module would not load, else None."""
    if state != "on" or signer.strip():
        return None
    return (f"Secure Boot is on and the {module} module built for kernel {kernel} is unsigned: the kernel will "
            "refuse to load it. Enroll DKMS's signing key (mokutil --import /var/lib/dkms/mok.pub, reboot and "
            "confirm the enrolment on the console), then `dkms autoinstall` to sign the modules; or turn Secure "
            "Boot off in the firmware setup")


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(argument_spec={"kernel": {"type": "str", "required": True},
                                          "module": {"type": "str", "default": "nvidia"}},
                           supports_check_mode=True)
    try:
        var: bytes | None = SECURE_BOOT_VAR.read_bytes()[:64]
    except OSError:
        var = None
    state = secure_boot_state(EFI.is_dir(), var)
    name, kernel = module.params["module"], module.params["kernel"]
    rc, out, _err = module.run_command(["modinfo", "-k", kernel, "--field", "signer", name])
    signer = out.strip() if rc == 0 else ""
    problem = verdict(state, signer, name, kernel)
    if problem:
        module.fail_json(msg=problem, secure_boot=state, signer=signer)
    module.exit_json(changed=False, secure_boot=state, signer=signer)


if __name__ == "__main__":
    main()
