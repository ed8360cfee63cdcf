"""Before/after comparison of two traces: step times, what changed where, and why."""
