"""Isolated sandboxes for trials: the runtime interface and its implementations.

- `local` with `isolation="bwrap"` (the default): bubblewrap namespaces on this machine
  (`bureau.sandbox.local`);
- `local` with `isolation="none"`: the same folders and interface with no isolation at all, for
  machines without bubblewrap (`bureau.sandbox.unsafe`; never for untrusted agents);
- `docker`: a container per trial through the `docker` CLI (`bureau.sandbox.docker`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox.base import ExecResult, Limits, Phase, Runtime, Sandbox
from bureau.sandbox.bwrap import sandbox_python

__all__ = ["ExecResult", "Limits", "Phase", "Runtime", "Sandbox", "get_runtime", "sandbox_python"]

log = logging.getLogger(__name__)

RUNTIMES = ("local", "docker")
ISOLATIONS = ("bwrap", "none")


def get_runtime(
    name: str = "local", *, isolation: str = "bwrap", root: Path | None = None
) -> Runtime:
    """The runtime called `name`; `sandbox_unavailable` if this machine cannot provide it.
    Logs how its sandboxes are held to their limits (a warning where memory is only polled)."""
    runtime = _runtime(name, isolation, root)
    polled = "polled watch" in runtime.enforcement or isolation == "none"
    log.log(logging.WARNING if polled else logging.INFO, "sandboxes: %s", runtime.enforcement)
    return runtime


def _runtime(name: str, isolation: str, root: Path | None) -> Runtime:
    if name not in RUNTIMES:
        raise ValueError(f"unknown runtime {name!r}; choose one of {', '.join(RUNTIMES)}")
    if isolation not in ISOLATIONS:
        raise ValueError(f"unknown isolation {isolation!r}; choose one of {', '.join(ISOLATIONS)}")
    if name == "docker":
        from bureau.sandbox.docker import DockerRuntime

        return DockerRuntime()
    if isolation == "none":
        from bureau.sandbox.unsafe import UnsafeRuntime

        return UnsafeRuntime(root)
    from bureau.sandbox.local import LocalRuntime

    try:
        return LocalRuntime(root)
    except BureauSystemError:
        raise
    except OSError as exc:
        raise BureauSystemError(
            SystemErrorKind.sandbox_unavailable, f"local runtime: {type(exc).__name__}: {exc}"
        ) from exc
