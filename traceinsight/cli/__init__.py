"""Thin typer commands: parse arguments, call the library, hand the result to a renderer."""
