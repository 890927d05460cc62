"""provision package."""
