"""The simulated-SSH-site fixture, shared with the health tests."""

from tests.health.conftest import sim_site_factory

__all__ = ["sim_site_factory"]
