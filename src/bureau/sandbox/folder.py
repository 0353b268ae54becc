"""A trial's folder on the host, the inside paths it backs, and copies in and out of it.

Every runtime that keeps a trial on the host (bubblewrap, `--isolation none`) uses one layout::

    <root>/<sandbox-id>/workspace      the task's workdir (a private copy of environment/workspace)
    <root>/<sandbox-id>/logs/agent     /logs/agent
    <root>/<sandbox-id>/logs/artifacts /logs/artifacts (Harbor's: files the agent hands over)
    <root>/<sandbox-id>/logs/verifier  /logs/verifier
    <root>/<sandbox-id>/tests          /tests      (uploaded before the verifier runs)
    <root>/<sandbox-id>/solution       /solution   (uploaded before the oracle runs)
    <root>/<sandbox-id>/tmp, vtmp      /tmp of the agent-side phases, and of the verifier

The verifier gets a /tmp of its own because HOME is /tmp: a shared one would let the agent plant
a `~/.local` package or shell profile that the verifier's Python or bash then loads.

Copies treat the folder as hostile, because the agent wrote it: every path component is opened
with O_NOFOLLOW relative to its parent's descriptor, so a symlink the agent planted (say
`workspace/out -> /etc`) can neither redirect an upload onto the host nor leak a host file into
a download, even if the agent swaps a folder for a symlink while the copy runs. Uploads replace
a planted symlink instead of following it; downloads skip symlinks, FIFOs and devices.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox.base import Phase
from bureau.tasks.image import resolve_env_templates
from bureau.tasks.taskdir import TaskDir

LAYOUT = (
    "workspace", "logs/agent", "logs/artifacts", "logs/verifier", "tests", "solution", "tmp", "vtmp"
)  # fmt: skip
TMP_FOLDERS = ("tmp", "vtmp")
"""The sandbox's /tmp (also its /dev/shm) in the agent and verifier phases."""
TMP_MODE = 0o1777
"""As on any machine: every uid of the sandbox (the code tool's too) may create files there,
and only a file's owner may delete it."""
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK = 1 << 20


@dataclass(frozen=True)
class Mount:
    """One inside path of a command and the trial subfolder behind it."""

    inside: str
    sub: str
    writable: bool


def extra_sub(index: int) -> str:
    """The trial subfolder behind the `index`-th extra folder (see `TrialFolder`)."""
    return f"extra/{index}"


def phase_mounts(phase: Phase, workdir: str, extra: tuple[str, ...] = ()) -> list[Mount]:
    """What a command of `phase` sees of the trial folder (the table in `base`)."""
    mounts = [
        Mount(workdir, "workspace", True),
        *(Mount(inside, extra_sub(i), True) for i, inside in enumerate(extra)),
        Mount("/logs/agent", "logs/agent", phase != "verifier"),
        Mount("/logs/artifacts", "logs/artifacts", phase != "verifier"),
        Mount("/tmp", "vtmp" if phase == "verifier" else "tmp", True),
    ]
    if phase in ("verifier", "full"):
        mounts.append(Mount("/logs/verifier", "logs/verifier", True))
        mounts.append(Mount("/tests", "tests", phase == "full"))
    if phase in ("solution", "full"):
        mounts.append(Mount("/solution", "solution", phase == "full"))
    return mounts


def normalize_inside(path: str) -> str:
    if not path.startswith("/"):
        raise BureauSystemError(
            SystemErrorKind.upload_failed, f"{path!r} is not an absolute path inside the sandbox"
        )
    return "/" + posixpath.normpath(path).lstrip("/")


class TrialFolder:
    """The host side of one sandbox; `owner` is the (uid, gid) that the sandbox runs as.

    `extra` are further writable folders at absolute inside paths, each backed by
    `extra/<index>`: a separate verifier gets the agent's workdir there, so that artifacts land
    at the paths the agent wrote them, as in Harbor.
    """

    def __init__(
        self,
        path: Path,
        workdir: str,
        owner: tuple[int, int] | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.path = path
        self.workdir = normalize_inside(workdir)
        self.owner = owner
        self.extra = tuple(normalize_inside(inside) for inside in extra)
        # Longest first, so /logs/agent wins over /logs.
        roots = {
            **{inside: extra_sub(i) for i, inside in enumerate(self.extra)},
            self.workdir: "workspace",
            "/logs": "logs",
            "/logs/agent": "logs/agent",
            "/logs/artifacts": "logs/artifacts",
            "/logs/verifier": "logs/verifier",
            "/tests": "tests",
            "/solution": "solution",
        }
        self.transfer_roots = sorted(roots.items(), key=lambda item: -len(item[0]))

    def create(self) -> None:
        for sub in (*LAYOUT, *(extra_sub(i) for i in range(len(self.extra)))):
            folder = self.path / sub
            folder.mkdir(parents=True, exist_ok=True)
            for made in (folder, folder.parent):
                if self.owner is not None and made != self.path:
                    os.chown(made, *self.owner)
            if sub in TMP_FOLDERS:
                os.chmod(folder, TMP_MODE)

    def host_dir(self, sub: str) -> Path:
        return self.path / sub

    def resolve(self, inside: str) -> tuple[Path, list[str]]:
        """The trial subfolder behind `inside` and the path components below it."""
        norm = normalize_inside(inside)
        for root, sub in self.transfer_roots:
            if norm == root or norm.startswith(root.rstrip("/") + "/"):
                return self.path / sub, [p for p in norm[len(root) :].split("/") if p]
        choices = ", ".join(sorted(root for root, _ in self.transfer_roots))
        raise BureauSystemError(
            SystemErrorKind.upload_failed,
            f"{inside} is outside the paths a sandbox exchanges files through ({choices})",
        )

    def copy_in(self, src: Path, inside: str, *, deadline: float | None = None) -> None:
        """Copy a host file, or a folder's contents, to `inside` (created as needed)."""
        root, parts = self.resolve(inside)
        if not src.exists():
            raise FileNotFoundError(f"{src} does not exist")
        if src.is_dir():
            fd = self._open_dirs(root, parts)
            try:
                self._copy_tree_in(src, fd, deadline)
            finally:
                os.close(fd)
            return
        if not parts:
            raise BureauSystemError(
                SystemErrorKind.upload_failed, f"{inside} is a folder; give the file's own path"
            )
        fd = self._open_dirs(root, parts[:-1])
        try:
            self._copy_file_in(src, fd, parts[-1])
        finally:
            os.close(fd)

    def copy_out(self, inside: str, dest: Path) -> None:
        """Copy a file, or a folder's contents, from `inside` to `dest` on the host."""
        root, parts = self.resolve(inside)
        try:
            fd = os.open(root, _DIR_FLAGS)
            for part in parts[:-1]:
                fd = _step(fd, part, create=False, owner=None)
        except OSError as exc:
            raise FileNotFoundError(f"{inside} does not exist in the sandbox ({exc})") from exc
        try:
            if not parts:
                _copy_tree_out(fd, dest)
                return
            try:
                st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError as exc:
                raise FileNotFoundError(f"{inside} does not exist in the sandbox") from exc
            if stat.S_ISDIR(st.st_mode):
                child = _step(os.dup(fd), parts[-1], create=False, owner=None)
                try:
                    _copy_tree_out(child, dest)
                finally:
                    os.close(child)
            elif stat.S_ISREG(st.st_mode):
                dest.parent.mkdir(parents=True, exist_ok=True)
                _copy_file_out(fd, parts[-1], dest)
            else:
                raise BureauSystemError(
                    SystemErrorKind.upload_failed,
                    f"{inside} is not a regular file or folder (symlinks are not followed)",
                )
        finally:
            os.close(fd)

    def _open_dirs(self, root: Path, parts: list[str]) -> int:
        fd = os.open(root, _DIR_FLAGS)
        for part in parts:
            fd = _step(fd, part, create=True, owner=self.owner)
        return fd

    def _copy_tree_in(self, src: Path, dir_fd: int, deadline: float | None) -> None:
        with os.scandir(src) as entries:
            for entry in entries:
                if deadline is not None and time.monotonic() > deadline:
                    raise TimeoutError(f"copying {src} ran past its deadline")
                if entry.is_dir(follow_symlinks=False):
                    child = _step(os.dup(dir_fd), entry.name, create=True, owner=self.owner)
                    try:
                        self._copy_tree_in(Path(entry.path), child, deadline)
                    finally:
                        os.close(child)
                elif entry.is_symlink():
                    _remove_entry(dir_fd, entry.name)
                    os.symlink(os.readlink(entry.path), entry.name, dir_fd=dir_fd)
                    if self.owner is not None:
                        os.chown(entry.name, *self.owner, dir_fd=dir_fd, follow_symlinks=False)
                elif entry.is_file(follow_symlinks=False):
                    self._copy_file_in(Path(entry.path), dir_fd, entry.name)

    def _copy_file_in(self, src: Path, dir_fd: int, name: str) -> None:
        _remove_entry(dir_fd, name)
        mode = src.stat().st_mode & 0o777
        out = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=dir_fd
        )
        try:
            with open(src, "rb") as source:
                while chunk := source.read(_CHUNK):
                    os.write(out, chunk)
            os.fchmod(out, mode)
            if self.owner is not None:
                os.fchown(out, *self.owner)
        finally:
            os.close(out)


def task_workdir(task: TaskDir) -> str:
    return task.config.environment.workdir


def verifier_workdir(task: TaskDir) -> str:
    """The separate verifier's working directory: its image's WORKDIR, else the task's."""
    image = task.verifier_image
    return (image.workdir if image is not None else None) or task.config.environment.workdir


def verifier_extra(task: TaskDir) -> tuple[str, ...]:
    """The separate verifier's further folders: the agent's workdir, where artifacts go back
    to the paths the agent wrote them (none when it is the verifier's own workdir or inside
    it, or holds it)."""
    agent, own = normalize_inside(task_workdir(task)), normalize_inside(verifier_workdir(task))
    nested = agent == own or agent.startswith(own + "/") or own.startswith(agent + "/")
    return () if nested else (agent,)


def provide_image(
    folder: TrialFolder, task: TaskDir, deadline: float | None, *, verifier: bool = False
) -> dict[str, str]:
    """Fill a new trial folder as the task's image would be, and return the image's variables.

    The workspace convention (`environment/workspace/` into the workdir) comes first, then what
    the Dockerfile copies and the folders its RUN mkdir makes; the variables are the
    Dockerfile's ENV, then `[environment].env` (templates read from the host's environment).
    `verifier`: the separate verifier's image (tests/Dockerfile) instead of the agent's.
    """
    plan = task.verifier_image if verifier else task.image
    if not verifier and task.workspace_dir.is_dir():
        folder.copy_in(task.workspace_dir, folder.workdir, deadline=deadline)
    if plan is not None:
        for copy in plan.copies:
            if copy.source.resolve() == task.workspace_dir.resolve() and (
                normalize_inside(copy.target) == folder.workdir
            ):
                continue  # the convention above already copied it
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"copying {copy.source} ran past its deadline")
            folder.copy_in(copy.source, copy.target, deadline=deadline)
        for made in plan.folders:
            root, parts = folder.resolve(made)
            os.close(folder._open_dirs(root, parts))
    try:
        env = resolve_env_templates(task.config.environment.env, dict(os.environ))
    except KeyError as exc:
        raise BureauSystemError(
            SystemErrorKind.sandbox_start_failed, f"[environment.env] {exc.args[0]}"
        ) from None
    return {**(plan.env if plan is not None else {}), **env}


def _step(parent_fd: int, name: str, *, create: bool, owner: tuple[int, int] | None) -> int:
    """Open folder `name` under `parent_fd` without following a symlink; closes `parent_fd`."""
    try:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except FileNotFoundError:
            if not create:
                raise
        except OSError as exc:
            if not create or exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            # A symlink or a file where a folder goes: replace it, never follow it.
            os.unlink(name, dir_fd=parent_fd)
        os.mkdir(name, 0o755, dir_fd=parent_fd)
        child = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        if owner is not None:
            os.fchown(child, *owner)
        return child
    finally:
        os.close(parent_fd)


def _remove_entry(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except IsADirectoryError as exc:
        raise BureauSystemError(
            SystemErrorKind.upload_failed, f"cannot replace folder {name!r} with a file"
        ) from exc


def _copy_tree_out(dir_fd: int, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for name in os.listdir(dir_fd):
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(st.st_mode):
            child = _step(os.dup(dir_fd), name, create=False, owner=None)
            try:
                _copy_tree_out(child, dest / name)
            finally:
                os.close(child)
        elif stat.S_ISREG(st.st_mode):
            _copy_file_out(dir_fd, name, dest / name)


def _copy_file_out(dir_fd: int, name: str, dest: Path) -> None:
    # O_NONBLOCK: a FIFO swapped in after the stat must not hang the host.
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return
        if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
            dest.unlink()
        with open(dest, "wb") as out:
            while chunk := os.read(fd, _CHUNK):
                out.write(chunk)
        dest.chmod(st.st_mode & 0o755)
    finally:
        os.close(fd)
