"""Load a site file: YAML → validated `Site`, or one `SiteError` listing every problem with its path.

Problems are reported as `file:line: racks[2].hosts[5].bmc.address: not an IP address or hostname`.
Line numbers are only worked out when something is wrong, so the fast path (a 511-host site loaded by
every CLI command) pays for libyaml's parse and pydantic's validation and nothing else.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from provision.errors import SiteError
from provision.site.bounded import MAX_SITE_BYTES, InputRefused, load_yaml, read_text
from provision.site.cache import (
    PARSED,
    content_key,
    drop_cached,
    index_hosts,
    read_cached,
    write_cached,
    write_index,
)
from provision.site.model import Site, SiteSpec
from provision.site.named_secrets import hold_site_secrets
from provision.site.paths import resolve_site_path
from provision.site.switches import switch_problems
from provision.state.redact import is_secret_name

_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_MESSAGES = {
    "missing": "required field is missing",
    "extra_forbidden": "unknown field (check its spelling)",
}


def render_path(loc: tuple[int | str, ...]) -> str:
    """`('racks', 2, 'hosts', 5, 'bmc', 'address')` → `racks[2].hosts[5].bmc.address`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


_INLINE_SECRET = (
    "an inline secret is not accepted (its value is not repeated here): reference it as "
    "{env: VARIABLE} or {vault: FILE, key: NAME}"
)


def _message(error: Any) -> str:
    kind = error.get("type", "")
    field = next((part for part in reversed(error.get("loc", ())) if isinstance(part, str)), "")
    if isinstance(error.get("input"), str | int | float) and is_secret_name(field):
        return _INLINE_SECRET  # whatever pydantic says would quote the value
    if kind in _MESSAGES:
        return _MESSAGES[kind]
    text = str(error.get("msg", "invalid"))
    for prefix in ("Value error, ", "Assertion failed, "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    if kind in {"string_type", "int_type", "int_parsing", "dict_type", "list_type", "bool_type"}:
        text = f"{text} (got {error.get('input')!r})"
    return text


def _line_of(root: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the deepest node along `loc` that exists in the YAML document."""
    node = root
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    child = value
                    line = key.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


def _cross_checks(spec: SiteSpec) -> list[tuple[tuple[int | str, ...], str]]:
    """Problems that span several entries: duplicates and references to undeclared names."""
    problems: list[tuple[tuple[int | str, ...], str]] = []
    names = Counter(rack.name for rack in spec.racks)
    hostnames: Counter[str] = Counter()
    bmc_endpoints: Counter[tuple[str, int]] = Counter()
    for rack in spec.racks:
        for host in rack.hosts:
            hostnames[host.hostname] += 1
            bmc_endpoints[(host.bmc.address, host.bmc.port)] += 1

    for r, rack in enumerate(spec.racks):
        if names[rack.name] > 1:
            problems.append((("racks", r, "name"), f"rack name {rack.name!r} is used by more than one rack"))
        occupied: dict[int, str] = {}
        for h, host in enumerate(rack.hosts):
            at: tuple[int | str, ...] = ("racks", r, "hosts", h)
            if host.rack != rack.name:
                problems.append(
                    ((*at, "rack"), f"says rack {host.rack!r} but is listed under rack {rack.name!r}")
                )
            if hostnames[host.hostname] > 1:
                problems.append(((*at, "hostname"), f"host name {host.hostname!r} is declared more than once"))
            if bmc_endpoints[(host.bmc.address, host.bmc.port)] > 1:
                problems.append(
                    (
                        (*at, "bmc", "address"),
                        f"BMC {host.bmc.address}:{host.bmc.port} is shared with another host",
                    )
                )
            if host.host_class not in spec.host_classes:
                known = ", ".join(sorted(spec.host_classes)) or "none declared"
                problems.append(((*at, "class"), f"unknown host class {host.host_class!r} (known: {known})"))
            if host.bmc.credential not in spec.credentials:
                known = ", ".join(sorted(spec.credentials)) or "none declared"
                problems.append(
                    ((*at, "bmc", "credential"), f"unknown credential {host.bmc.credential!r} (known: {known})")
                )
            if host.u > rack.height_u:
                problems.append(((*at, "u"), f"U{host.u} is above the top of a {rack.height_u}U rack"))
            elif host.u in occupied:
                problems.append(((*at, "u"), f"U{host.u} is already taken by {occupied[host.u]}"))
            else:
                occupied[host.u] = host.hostname
    return problems + switch_problems(spec.switches, spec.credentials) + _slurm_problems(spec)


def _slurm_problems(spec: SiteSpec) -> list[tuple[tuple[int | str, ...], str]]:
    if spec.slurm is None:
        return []
    problems: list[tuple[tuple[int | str, ...], str]] = []
    hosts = {host.hostname for rack in spec.racks for host in rack.hosts}
    if spec.slurm.controller not in hosts:
        problems.append((("slurm", "controller"), f"{spec.slurm.controller!r} is not a host of the site"))
    for p, partition in enumerate(spec.slurm.partitions):
        for c, name in enumerate(partition.classes):
            if name not in spec.host_classes:
                known = ", ".join(sorted(spec.host_classes)) or "none declared"
                problems.append((("slurm", "partitions", p, "classes", c),
                                 f"unknown host class {name!r} (known: {known})"))
    return problems


def _file_checks(spec: SiteSpec, directory: Path) -> list[tuple[tuple[int | str, ...], str]]:
    problems: list[tuple[tuple[int | str, ...], str]] = []
    if spec.fabric is not None and not (directory / spec.fabric.design).is_file():
        problems.append((("fabric", "design"), f"cabling design file not found: {spec.fabric.design}"))
    if spec.bmc_tls.ca_bundle is not None and not (directory / spec.bmc_tls.ca_bundle).is_file():
        problems.append((("bmc_tls", "ca_bundle"), f"CA bundle not found: {spec.bmc_tls.ca_bundle}"))
    if spec.maas is not None and spec.maas.ca_bundle is not None and not (directory / spec.maas.ca_bundle).is_file():
        problems.append((("maas", "ca_bundle"), f"CA bundle not found: {spec.maas.ca_bundle}"))
    for name, cred in spec.credentials.items():
        if cred.password.vault is not None and not (directory / cred.password.vault).is_file():
            problems.append(
                (("credentials", name, "password", "vault"), f"vault file not found: {cred.password.vault}")
            )
    return problems


def _parse(text: str, file: Path) -> tuple[Any, str | None]:
    """YAML → Python (and its JSON for the cache, None when it came from the cache), through a JSON
    cache keyed on the file's content.

    libyaml's parse of a 511-host site costs ~100 ms of Python object construction, a JSON load of the
    same data ~5 ms; every CLI command loads the site, so the parsed form is kept beside the state
    store. The key is the content's hash, so an edited file is always parsed again. The caller writes
    the cache only once the file has passed validation: nothing of a rejected file (an inline password)
    is copied to disk.
    """
    key = content_key(text)
    try:
        return read_cached(file, key, PARSED), None
    except (OSError, ValueError):
        pass
    data = load_yaml(text)  # refuses a document whose aliases expand past the bound, before building it
    try:
        return data, json.dumps(data)
    except (TypeError, ValueError):
        return data, None  # values JSON cannot hold (dates...): validation will say what is wrong


def load_site(path: Path | str) -> Site:
    """Read and validate a site file. Raises `SiteError` with every problem found."""
    file = resolve_site_path(Path(path))
    shown = str(file)
    try:
        text = read_text(file, limit=MAX_SITE_BYTES, what="site file")
    except FileNotFoundError:
        raise SiteError(shown, ["file not found"]) from None
    except InputRefused as exc:
        raise SiteError(shown, [str(exc)]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SiteError(shown, [f"cannot read: {exc}"]) from None
    try:
        data, blob = _parse(text, file)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SiteError(shown, [f"{where}not valid YAML: {problem}"]) from None
    except InputRefused as exc:
        raise SiteError(shown, [str(exc)]) from None
    if not isinstance(data, dict):
        raise SiteError(shown, ["expected a mapping at the top level (name:, racks:, ...)"])

    problems: list[tuple[tuple[int | str, ...], str]]
    try:
        spec = SiteSpec.model_validate(data)
    except ValidationError as exc:
        problems = [(tuple(err["loc"]), _message(err)) for err in exc.errors()]
    else:
        problems = _cross_checks(spec) + _file_checks(spec, file.parent)
        if not problems:
            site = Site(spec=spec, path=file.resolve())
            hold_site_secrets(data, file.parent)  # every credential it names is masked in what we write
            if blob is not None:
                write_cached(file, content_key(text), PARSED, blob)
            write_index(file, content_key(text), site.name, index_hosts(site))
            return site
    drop_cached(file, content_key(text), PARSED)  # one an older bringup left for this rejected content

    root = yaml.compose(text, Loader=_SafeLoader)
    rendered = []
    for loc, message in problems:
        line = _line_of(root, loc)
        prefix = f"line {line}: " if line is not None else ""
        rendered.append(f"{prefix}{render_path(loc)}: {message}")
    raise SiteError(shown, rendered)

