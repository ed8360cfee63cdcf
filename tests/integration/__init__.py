"""Integration tests: the recorded sample traces under ``sample_traces/`` and the third-party
traces beside the checkout (skipped without them)."""
