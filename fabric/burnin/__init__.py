"""InfiniBand burn-in: stages planned from the fabric's real forwarding tables."""
