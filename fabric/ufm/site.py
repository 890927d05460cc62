"""The site's UFM client, built from its `fabric.ufm` section (credential resolved from the environment or
the vault when called)."""

from __future__ import annotations

from fabric.ufm.client import UfmClient
from provision.site.credentials import login
from provision.site.model import Site


def site_client(site: Site, job_timeout_s: float | None = None) -> UfmClient | None:
    """The client of the site's UFM; None when the site has no UFM."""
    fabric = site.spec.fabric
    ufm = fabric.ufm if fabric is not None else None
    if ufm is None:
        return None
    ca = site.directory / ufm.ca_bundle if ufm.ca_bundle else None
    return UfmClient(str(ufm.url), login(site, ufm.credential), verify=ufm.verify_tls, ca_bundle=ca,
                     timeout_s=ufm.timeout_s, job_timeout_s=job_timeout_s or ufm.job_timeout_s, auth=ufm.auth)
