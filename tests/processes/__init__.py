"""Tests that start processes: the CLI in a subprocess, the MCP server, a headless browser,
the process-pool engine, a copy of the package run as a program."""
