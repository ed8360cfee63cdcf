"""The plumbing every analysis shares: specs, inputs, the registry, the runner and the report."""
