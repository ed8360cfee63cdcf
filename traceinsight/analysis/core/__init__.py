"""The plumbing every analysis shares: the config, results, inputs, specs, the registry and the runner."""
