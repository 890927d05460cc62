"""nvidia_driver's Secure Boot check: the state from the EFI variable, and the refusal of unsigned modules."""

from __future__ import annotations

from tests.ansible.role_library import load

sb = load("nvidia_driver", "nvidia_driver_secure_boot")
# efivarfs: 4 bytes of attributes (NV+BS+RT = 0x06 here, little endian), then the value byte.
ON = b"\x06\x00\x00\x00\x01"
OFF = b"\x06\x00\x00\x00\x00"


def test_secure_boot_state_from_the_efi_variable() -> None:
    assert sb.secure_boot_state(True, ON) == "on"
    assert sb.secure_boot_state(True, OFF) == "off"
    assert sb.secure_boot_state(True, None) == "off"  # EFI without the variable: setup mode, not enforcing
    assert sb.secure_boot_state(False, None) == "no_efi"


def test_an_unsigned_module_under_secure_boot_fails_with_the_enrolment_to_do() -> None:
    message = sb.verdict("on", "", "nvidia", "6.8.0-49-generic")
    assert message is not None
    assert message.startswith("Secure Boot is on and the nvidia module built for kernel 6.8.0-49-generic is unsigned")
    assert "mokutil --import /var/lib/dkms/mok.pub" in message


def test_a_signed_module_or_secure_boot_off_passes() -> None:
    assert sb.verdict("on", "DKMS module signing key", "nvidia", "6.8.0") is None
    assert sb.verdict("off", "", "nvidia", "6.8.0") is None
    assert sb.verdict("no_efi", "", "nvidia", "6.8.0") is None
