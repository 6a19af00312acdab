"""Atomic writes leave files readable like any other file the user makes (mkstemp's 0600 is not kept)."""

import os
import stat

from accelbench.run.io import atomic_write_json, atomic_write_text


def test_atomic_write_honours_umask(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.txt", "x")
        atomic_write_json(tmp_path / "b.json", {"a": 1})
    finally:
        os.umask(old)
    for name in ("a.txt", "b.json"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644, name


def test_atomic_write_leaves_no_temporary_files(tmp_path):
    atomic_write_text(tmp_path / "a.txt", "x")
    atomic_write_text(tmp_path / "a.txt", "y")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    assert (tmp_path / "a.txt").read_text() == "y"
