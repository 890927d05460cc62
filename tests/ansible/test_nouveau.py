"""nvidia_driver's nouveau check (library/nvidia_driver_nouveau.py): refused while /proc/modules lists it.

The test hosts are chroots sharing the controller's kernel (which has no loadable modules, so the role's
check runs there and passes): a loaded nouveau cannot be planted on them, so the verdict is tested here on /proc/modules lines in the kernel's format (name size refcount users state address).
"""

from __future__ import annotations

from tests.ansible.role_library import load

BLACKLIST = "/etc/modprobe.d/blacklist-nouveau.conf"

nv = load("nvidia_driver", "nvidia_driver_nouveau")
WITH_NOUVEAU = ("nouveau 3096576 0 - Live 0x0000000000000000\n"
                "drm_ttm_helper 12288 1 nouveau, Live 0x0000000000000000\n")
WITHOUT = ("nvidia_drm 122880 0 - Live 0x0000000000000000\n"
           "nvidia 11321344 1 nvidia_drm, Live 0x0000000000000000 (POE)\n")


def test_a_loaded_nouveau_is_refused_with_the_reboot_to_do() -> None:
    message = nv.verdict(WITH_NOUVEAU, True, BLACKLIST, True)
    assert message is not None and message.startswith("nouveau is loaded (/proc/modules)")
    assert "update-initramfs -u" in message and "reboot it" in message
    missing = nv.verdict(WITH_NOUVEAU, True, BLACKLIST, False)
    assert missing is not None and f"{BLACKLIST} does not exist" in missing


def test_no_nouveau_passes_even_when_a_module_names_it_as_a_user() -> None:
    assert nv.verdict(WITHOUT, False, BLACKLIST, True) is None
    assert nv.verdict("", False, BLACKLIST, False) is None
    # Only the first field is the module's name: "nouveau," in another module's users column does not count.
    assert nv.verdict("drm_ttm_helper 12288 1 nouveau, Live 0x0\n", False, BLACKLIST, True) is None


def test_a_built_in_nouveau_fails_with_the_kernel_command_line_to_set() -> None:
    # The test hosts' (and this controller's) kernel has no /proc/modules: the role's check passes there.
    assert nv.verdict(None, False, BLACKLIST, True) is None
    builtin = nv.verdict(None, True, BLACKLIST, True)
    assert builtin is not None and builtin.startswith("nouveau is built into this kernel")
    assert "modprobe.blacklist=nouveau" in builtin
    assert nv.verdict(WITHOUT, True, BLACKLIST, True) == builtin  # in /sys/module, not in /proc/modules
