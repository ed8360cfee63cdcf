"""One module per analysis section; each exposes ``render_terminal(result) -> rich renderable``."""
