"""Reading the user's files and writing outputs atomically (mvopt/files.py)."""

from __future__ import annotations

import os
import stat

import pytest

from mvopt.errors import InputFileError
from mvopt.files import read_text, write_atomic, write_text_atomic


def test_unreadable_files_raise_one_message_naming_them(tmp_path) -> None:
    binary = tmp_path / "ls.yaml"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(128, 256)))
    with pytest.raises(InputFileError, match=r"ls.yaml: cannot be read \(not UTF-8 text: byte 0x80 at offset 8\)"):
        read_text(binary)
    with pytest.raises(InputFileError, match=r"nope.yaml: cannot be read \(No such file or directory\)"):
        read_text(tmp_path / "nope.yaml")
    with pytest.raises(InputFileError, match="cannot be read"):
        read_text(tmp_path)                     # a folder


def test_the_error_type_is_the_callers(tmp_path) -> None:
    class Mine(InputFileError):
        pass

    with pytest.raises(Mine, match="cannot be read"):
        read_text(tmp_path / "missing", lambda why: Mine("x", None, why))


def test_writes_are_atomic_and_follow_the_umask(tmp_path) -> None:
    out = tmp_path / "out.txt"
    write_text_atomic(out, "first\n")
    assert out.read_text() == "first\n"
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask

    def broken(f) -> None:
        f.write("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(out, broken)
    assert out.read_text() == "first\n"                       # the old file, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]   # no temporary file left


def test_a_missing_folder_is_one_message(tmp_path) -> None:
    with pytest.raises(InputFileError, match=r"x.npz: cannot be written \(No such file or directory\)"):
        write_text_atomic(tmp_path / "nope" / "x.npz", "")


def test_links_devices_and_modes_are_respected(tmp_path) -> None:
    """A symbolic link is followed (the link stays), a device such as /dev/null is written in place
    (never replaced by a regular file), a replaced file keeps its permissions."""
    target = tmp_path / "real.txt"
    target.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    write_text_atomic(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    write_text_atomic(os.devnull, "discarded")
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    os.chmod(target, 0o600)
    write_text_atomic(target, "again")
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and target.read_text() == "again"
