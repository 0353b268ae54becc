"""The read-only system that every bubblewrap command sees, as bwrap arguments.

Built from pieces rather than binding `/`: /usr and the /bin, /lib, /sbin links into it; a short
list of /etc files (name service, dynamic linker, certificates, time zone; never shadow, sudoers
or resolv.conf); the Python installation (`sys.base_prefix`, a pyenv version here, bound alone,
not the /root home it lives in) and the project's venv (`sys.prefix`), both at their own paths
so the venv's symlinks and `pyvenv.cfg` keep working; and of the `bureau` package only
`SANDBOX_PACKAGE_ENTRIES`, so an agent can import the tool servers but cannot read the graders,
the oracles or the world generator (an editable install exposes the source tree otherwise).

bwrap creates missing parents of mount points with mode 0700, which the sandbox's unprivileged
uid could not traverse; every parent is therefore created explicitly with mode 0755.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

import bureau
from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox.folder import normalize_inside

# What of `bureau` the sandbox's Python can import: the tool servers and what they import.
SANDBOX_PACKAGE_ENTRIES = ("__init__.py", "py.typed", "errors.py", "tools")
_ETC_FILES = (
    "hosts", "nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
    "alternatives", "ssl", "ca-certificates", "mime.types", "fonts", "protocols", "services",
    "os-release", "debian_version", "magic", "magic.mime",
)  # fmt: skip
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_RESERVED = ("/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc", "/proc", "/dev", "/tmp", "/var",
             "/logs", "/tests", "/solution")  # fmt: skip
_UNAVAILABLE_HINT = (
    "install it with `apt-get install bubblewrap util-linux` (`make` does so as root), or pass "
    "`--isolation none` to run commands directly on this machine without any isolation (unsafe)"
)


def default_root() -> Path:
    return Path(os.environ.get("BUREAU_SANDBOX_ROOT") or Path(tempfile.gettempdir()) / "bureau-sbx")


def sandbox_python() -> str:
    """The interpreter to run inside a sandbox: this venv's, bound at the same path."""
    return str(Path(sys.prefix) / "bin" / "python3")


def find_tool(name: str, given: str | None = None) -> str:
    """The path of a program the local runtime needs; `sandbox_unavailable` if it is missing."""
    found = given if given and os.access(given, os.X_OK) else shutil.which(given or name)
    if found is None:
        what = "bubblewrap (bwrap)" if name == "bwrap" else f"{name} (util-linux)"
        raise BureauSystemError(
            SystemErrorKind.sandbox_unavailable,
            f"{what} was not found, and the local runtime needs it to isolate trials; "
            + _UNAVAILABLE_HINT,
        )
    return found


def _under(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip("/") + "/")


def python_trees() -> list[str]:
    """Folders of the Python installation and the venv, outside /usr, outermost first."""
    trees: list[str] = []
    for prefix in sorted({sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix}):
        if not _under(prefix, "/usr") and not any(_under(prefix, t) for t in trees):
            trees.append(prefix)
    return trees


def _dir_args(dests: Iterable[str], covered: Sequence[str]) -> list[str]:
    """Create the parents of mount points as 0755 folders (bwrap would make them 0700)."""
    needed = {
        str(parent)
        for dest in dests
        for parent in PurePosixPath(dest).parents
        if str(parent) != "/" and not any(_under(str(parent), tree) for tree in covered)
    }
    args: list[str] = []
    for folder in sorted(needed, key=lambda p: (p.count("/"), p)):
        args += ["--perms", "0755", "--dir", folder]
    return args


def system_args(workdir: str, extra: tuple[str, ...] = ()) -> list[str]:
    """The read-only system every command sees, with mount points for the trial's folders."""
    trees = python_trees()
    package = Path(bureau.__file__).parent
    links: list[str] = []
    for top in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(top):
            links += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            links += ["--ro-bind", top, top]
    etc = [f"/etc/{name}" for name in _ETC_FILES if os.path.exists(f"/etc/{name}")]
    package_binds = [str(package / e) for e in SANDBOX_PACKAGE_ENTRIES if (package / e).exists()]
    mount_points = [*trees, *etc, *package_binds, "/etc/passwd", "/etc/group", "/var/tmp"]
    mount_points += [
        *(workdir, "/logs/agent", "/logs/artifacts", "/logs/verifier", "/tests", "/solution"),
        *extra,
    ]
    args = ["--ro-bind", "/usr", "/usr", *links]
    args += _dir_args(mount_points, ["/usr", "/proc", "/dev", *trees])
    for path in [*trees, *etc]:
        args += ["--ro-bind", path, path]
    if any(_under(str(package), tree) for tree in [*trees, "/usr"]):
        # An installed (not editable) bureau: hide the package, then show the allowed parts.
        args += ["--tmpfs", str(package)]
    for path in package_binds:
        args += ["--ro-bind", path, path]
    return [*args, "--proc", "/proc", "--dev", "/dev", "--symlink", "../tmp", "/var/tmp"]


def shadowed_args(inside: Sequence[str], paths: Sequence[str] | None = None) -> list[str]:
    """Binds to repeat after the trial's folders are mounted at `inside` (e.g. /tmp).

    A checkout or venv that lives under /tmp (CI clones often do) would be hidden by the
    sandbox's private /tmp; binding it again on top keeps Python and bureau reachable. The
    folder just below the mount (`/tmp/ci` for `/tmp/ci/main/.venv`) becomes a read-only tmpfs
    holding only the binds and their parents: were those parents plain folders of the trial's
    writable /tmp, an agent could write next to the binds (a `sitecustomize.py` in the source
    folder that an editable install puts on every interpreter's import path) and so run code in
    whatever Python starts after it, the verifier included. A mount point cannot be renamed or
    written into, so nothing above or beside the binds is the agent's. `paths` defaults to the
    Python installation, the venv and the sandbox's part of the `bureau` package.
    """
    package = str(Path(bureau.__file__).parent)
    entries = [
        str(Path(package) / e) for e in SANDBOX_PACKAGE_ENTRIES if (Path(package) / e).exists()
    ]
    if paths is None:
        paths = [*python_trees(), *entries]
    targets = sorted(inside, key=len, reverse=True)
    tops: dict[str, list[str]] = {}
    for path in paths:
        target = next((t for t in targets if _under(path, t) and path != t), None)
        if target is not None:
            first = PurePosixPath(path).relative_to(target).parts[0]
            tops.setdefault(posixpath.join(target, first), []).append(path)
    args: list[str] = []
    for top, under in sorted(tops.items()):
        under = sorted(set(under), key=lambda p: (p.count("/"), p))
        if under != [top]:
            args += ["--perms", "0755", "--tmpfs", top]
            parents = {
                str(parent)
                for path in under
                for parent in PurePosixPath(path).parents
                if _under(str(parent), top) and str(parent) != top
            }
            for folder in sorted(parents, key=lambda p: (p.count("/"), p)):
                args += ["--perms", "0755", "--dir", folder]
        for path in under:
            args += ["--ro-bind", path, path]
            if path != package and _under(package, path) and path not in entries:
                # An installed bureau inside this tree: hide it again, as `system_args` does.
                args += ["--tmpfs", package]
                args += [a for e in entries for a in ("--ro-bind", e, e)]
        if under != [top]:
            args += ["--remount-ro", top]
    return args


def check_workdir(workdir: str) -> str:
    norm = normalize_inside(workdir)
    clash = [r for r in (*_RESERVED, *python_trees()) if _under(norm, r) or _under(r, norm)]
    if norm == "/" or clash:
        raise BureauSystemError(
            SystemErrorKind.sandbox_start_failed,
            f"workdir {workdir} overlaps a path the sandbox reserves ({', '.join(clash) or '/'})",
        )
    return norm
