"""MAAS region API simulator."""
