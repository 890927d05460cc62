"""Refuse to install the NVIDIA driver while nouveau is loaded, saying what to do, in one read-only task.

The modprobe.d blacklist only keeps nouveau from loading at the next boot, and only once the initramfs
(which loads it early) is rebuilt with it: a host where nouveau is in /proc/modules holds the GPUs, and
the nvidia module will not bind them until that host reboots. The verdict is a pure function
(`verdict`), unit-tested in tests/ansible/test_nouveau.py (a test host shares the controller's kernel).
"""

from __future__ import annotations

from pathlib import Path

DOCUMENTATION = r"""
module: nvidia_driver_nouveau
short_description: Fail when the nouveau module is loaded, with the remediation
options:
  blacklist: {type: str, required: true, description: the modprobe.d file that blacklists nouveau}
author: bringup
"""

RETURN = r"""
loaded: {type: bool, description: whether nouveau is in /proc/modules (or built in)}
"""

PROC_MODULES = Path("/proc/modules")
SYS_MODULE = Path("/sys/module/nouveau")
MAX_BYTES = 1 << 20  # /proc/modules is a few KiB; bounded all the same


def nouveau_loaded(proc_modules: str) -> bool:
    """Whether /proc/modules (one module a line, its name first) lists nouveau."""
    return any(line.split(" ", 1)[0] == "nouveau" for line in proc_modules.splitlines())


def verdict(proc_modules: str | None, in_sys_module: bool, blacklist: str, blacklisted: bool) -> str | None:
    """The message that says what to fix when nouveau is loaded, else None. `proc_modules` is None on a kernel
    without loadable modules (no /proc/modules); `in_sys_module`: /sys/module/nouveau exists (loaded or built in)."""
    if proc_modules is None or not nouveau_loaded(proc_modules):
        if not in_sys_module:
            return None
        return ("nouveau is built into this kernel (/sys/module/nouveau, not a module in /proc/modules) and holds "
                "the GPUs: a modprobe.d blacklist cannot stop it. Boot with nouveau.modeset=0 "
                "modprobe.blacklist=nouveau on the kernel command line (GRUB_CMDLINE_LINUX), or a kernel that builds "
                "it as a module, then re-run")
    done = (f"{blacklist} blacklists it and the initramfs was rebuilt with it (update-initramfs -u)"
            if blacklisted else f"{blacklist} does not exist: blacklist nouveau there and run update-initramfs -u")
    return (f"nouveau is loaded (/proc/modules) and holds the GPUs: the NVIDIA driver cannot bind them until "
            f"nouveau is gone. {done}; drain the host and reboot it, then re-run (if nouveau is still loaded after "
            "the reboot, the initramfs in use was not rebuilt: check `lsinitramfs /boot/initrd.img-$(uname -r) | "
            "grep blacklist-nouveau`)")


def main() -> None:
    from ansible.module_utils.basic import AnsibleModule  # type: ignore[import-untyped]

    module = AnsibleModule(argument_spec={"blacklist": {"type": "str", "required": True}}, supports_check_mode=True)
    blacklist = module.params["blacklist"]
    text: str | None = None
    if PROC_MODULES.exists():
        try:
            with PROC_MODULES.open(encoding="utf-8", errors="replace") as handle:
                text = handle.read(MAX_BYTES)
        except OSError as err:
            module.fail_json(msg=f"cannot read {PROC_MODULES}: {err}")
    problem = verdict(text, SYS_MODULE.is_dir(), blacklist, Path(blacklist).is_file())
    if problem:
        module.fail_json(msg=problem, loaded=True)
    module.exit_json(changed=False, loaded=False)


if __name__ == "__main__":
    main()
