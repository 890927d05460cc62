"""nvidia_driver's nouveau check (library/nvidia_driver_nouveau.py): refused while /proc/modules lists it.

The test hosts are chroots sharing the controller's kernel, so they cannot have nouveau loaded: the verdict
is tested here on /proc/modules lines in the kernel's format (name size refcount users state address).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
BLACKLIST = "/etc/modprobe.d/blacklist-nouveau.conf"


def _module() -> ModuleType:
    path = REPO / "roles/nvidia_driver/library/nvidia_driver_nouveau.py"
    spec = importlib.util.spec_from_file_location("nvidia_driver_nouveau", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


nv = _module()
WITH_NOUVEAU = ("nouveau 3096576 0 - Live 0x0000000000000000\n"
                "drm_ttm_helper 12288 1 nouveau, Live 0x0000000000000000\n")
WITHOUT = ("nvidia_drm 122880 0 - Live 0x0000000000000000\n"
           "nvidia 11321344 1 nvidia_drm, Live 0x0000000000000000 (POE)\n")


def test_a_loaded_nouveau_is_refused_with_the_reboot_to_do() -> None:
    message = nv.verdict(WITH_NOUVEAU, BLACKLIST, True)
    assert message is not None and message.startswith("nouveau is loaded (/proc/modules)")
    assert "update-initramfs -u" in message and "reboot it" in message
    missing = nv.verdict(WITH_NOUVEAU, BLACKLIST, False)
    assert missing is not None and f"{BLACKLIST} does not exist" in missing


def test_no_nouveau_passes_even_when_a_module_names_it_as_a_user() -> None:
    assert nv.verdict(WITHOUT, BLACKLIST, True) is None
    assert nv.verdict("", BLACKLIST, False) is None
    # Only the first field is the module's name: "nouveau," in another module's users column does not count.
    assert nv.verdict("drm_ttm_helper 12288 1 nouveau, Live 0x0\n", BLACKLIST, True) is None
