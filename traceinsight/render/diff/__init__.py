"""Views of a diff (two runs): one format-neutral view of its rows, and the terminal, Markdown and HTML renderings of it."""
