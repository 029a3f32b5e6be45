"""A git revision's code beside this checkout's, for the benchmarks that time both (`--baseline REV`)."""
from __future__ import annotations
import subprocess, tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def worktree(rev: str):
    """A temporary git worktree of `rev`, sharing this checkout's `data/cache` (QM9 geometries and other downloads are
    not in git), removed afterwards; yields (its path, the full commit hash)."""
    full = subprocess.run(["git", "rev-parse", rev], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), full], cwd=ROOT, check=True, capture_output=True)
        try:
            if (ROOT / "data" / "cache").exists() and not (tree / "data" / "cache").exists():
                (tree / "data" / "cache").symlink_to(ROOT / "data" / "cache")
            yield tree, full
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False, capture_output=True)
