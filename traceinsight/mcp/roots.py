"""The roots a client may read under: every path a tool is given resolves (links followed)
to a file or folder inside one of them, or the call is refused before anything is read."""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from traceinsight.errors import UsageError

# A glob names at most this many files: a pattern is a request, not a way to list a disk.
MAX_GLOB_FILES = 512


@dataclass(frozen=True)
class Roots:
    """Absolute, resolved folders. Relative paths given to tools are taken from the first."""

    folders: tuple[Path, ...]

    @classmethod
    def of(cls, folders: list[str] | None) -> Roots:
        chosen = folders or [os.getcwd()]
        resolved: list[Path] = []
        for folder in chosen:
            path = Path(folder).expanduser().resolve()
            if not path.is_dir():
                raise UsageError(f"--root {folder}: not a directory")
            resolved.append(path)
        return cls(tuple(resolved))

    def describe(self) -> str:
        return ", ".join(str(f) for f in self.folders)

    def _inside(self, path: Path) -> bool:
        return any(path == root or path.is_relative_to(root) for root in self.folders)

    def _absolute(self, text: str) -> Path:
        if "\x00" in text:
            raise UsageError("a path cannot hold a NUL character")
        path = Path(text).expanduser()
        return path if path.is_absolute() else self.folders[0] / path

    def check(self, text: str) -> Path:
        """The resolved path ``text`` names, which must exist under a root."""
        path = self._absolute(text).resolve()
        if not self._inside(path):
            raise UsageError(f"{text}: outside the roots this server may read ({self.describe()})")
        if not path.exists():
            raise UsageError(f"{text}: no such file or directory")
        return path

    def expand(self, text: str) -> list[Path]:
        """A path, or a glob's matches (each under a root, at most ``MAX_GLOB_FILES``)."""
        if not any(c in text for c in "*?["):
            return [self.check(text)]
        pattern = str(self._absolute(text))
        matches = sorted(glob.iglob(pattern))
        if not matches:
            raise UsageError(f"{text}: no file matches")
        if len(matches) > MAX_GLOB_FILES:
            raise UsageError(f"{text}: matches more than {MAX_GLOB_FILES} files")
        return [self.check(m) for m in matches]
