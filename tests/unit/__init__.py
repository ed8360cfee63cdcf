"""Unit tests: small hand-made traces and in-memory inputs, fast."""
