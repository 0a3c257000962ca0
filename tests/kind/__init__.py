"""The kind tier: a package, so its package-scoped engine ends with the tier, not the session."""
