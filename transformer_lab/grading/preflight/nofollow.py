"""Copying a student's files without ever following a symbolic link.

A submission may hold symlinks (to ``solutions/``, the gradebook, a mode-600 file outside the
course), FIFOs (an ``open`` blocks the grader forever) or devices. Every read here opens the
file with ``O_NOFOLLOW | O_NONBLOCK`` relative to an already opened folder and checks with
``fstat`` that it is a regular file, so a link swapped in after a check is refused as well.
Used by pre-flight (submission -> staging) and by the sandbox (working folder -> kernel).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

__all__ = ["copy_without_links", "read_regular_file", "open_regular", "kind_of"]

# Folders never copied (editor and Python caches).
SKIP_DIRS = (".ipynb_checkpoints", "__pycache__")
MAX_DEPTH = 8  # folder nesting copied at most
MAX_FILES = 2000  # files copied at most

_NOFOLLOW_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def kind_of(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def open_regular(path, dir_fd: int | None = None) -> int:
    """An fd of ``path`` if it is a regular file, opened without following a symlink.

    O_NOFOLLOW refuses a symlink even if it replaced the file after a check; O_NONBLOCK keeps
    a FIFO from blocking the grader; fstat then refuses anything but a regular file.
    """
    fd = os.open(path, _NOFOLLOW_READ, dir_fd=dir_fd)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(f"{os.fspath(path)} is {kind_of(mode)}")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_regular_file(path, dir_fd: int | None = None) -> bytes:
    """The bytes of ``path`` if it is a regular file (never through a symlink); else OSError."""
    with os.fdopen(open_regular(path, dir_fd), "rb") as fh:
        return fh.read()


def copy_without_links(src: Path, dest: Path, skip_suffixes: tuple[str, ...] = ()) -> list[str]:
    """Copy the regular files and folders of ``src`` into ``dest`` (which must exist).

    No symlink is followed, at any depth: symlinks, FIFOs, devices and sockets are not copied
    and each is named in the returned notes; folders in ``SKIP_DIRS`` and files ending in one of
    ``skip_suffixes`` are left out silently. Files are created anew (mode 0644) in ``dest``.
    """
    copier = _Copier(skip_suffixes)
    root_fd = os.open(src, _NOFOLLOW_DIR)
    try:
        copier.walk(root_fd, Path(dest), "", 0)
    finally:
        os.close(root_fd)
    return copier.notes


class _Copier:
    """One copy's walk: what was copied, and a note for everything that was not."""

    def __init__(self, skip_suffixes: tuple[str, ...]) -> None:
        self.skip_suffixes = skip_suffixes
        self.notes: list[str] = []
        self.copied = 0

    def walk(self, src_fd: int, target: Path, rel: str, depth: int) -> None:
        for name in sorted(os.listdir(src_fd)):
            shown = rel + name
            try:
                mode = os.stat(name, dir_fd=src_fd, follow_symlinks=False).st_mode
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                if name not in SKIP_DIRS:
                    self._folder(src_fd, name, target, shown, depth)
            elif stat.S_ISREG(mode):
                if not name.endswith(self.skip_suffixes):
                    self._file(src_fd, name, target, shown)
            else:
                self.notes.append(f"{shown} not copied: it is {kind_of(mode)} (never followed)")

    def _folder(self, src_fd: int, name: str, target: Path, shown: str, depth: int) -> None:
        if depth >= MAX_DEPTH:
            self.notes.append(f"{shown}/ not copied: nested deeper than {MAX_DEPTH} folders")
            return
        try:
            fd = os.open(name, _NOFOLLOW_DIR, dir_fd=src_fd)
        except OSError as exc:
            self.notes.append(f"{shown}/ not copied: {exc.strerror or exc}")
            return
        try:
            (target / name).mkdir(mode=0o755)
            self.walk(fd, target / name, shown + "/", depth + 1)
        finally:
            os.close(fd)

    def _file(self, src_fd: int, name: str, target: Path, shown: str) -> None:
        if self.copied >= MAX_FILES:
            self.notes.append(f"{shown} not copied: more than {MAX_FILES} files")
            return
        try:
            fd = open_regular(name, src_fd)
        except OSError as exc:
            self.notes.append(f"{shown} not copied: {exc.strerror or exc}")
            return
        with os.fdopen(fd, "rb") as fin:
            out = os.open(
                target / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644
            )
            with os.fdopen(out, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            times = os.fstat(fin.fileno())
        os.utime(target / name, ns=(times.st_atime_ns, times.st_mtime_ns))
        self.copied += 1
