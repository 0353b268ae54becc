"""A warm pool of sandboxes whose tool servers are already up.

Starting Python with the MCP SDK and the document libraries takes 1.5-2.2 s of CPU, which no
per-trial start can hide. The pool starts sandboxes ahead of demand with an empty workspace,
spawns the tool servers in them and completes the MCP handshake. A trial then takes a ready
slot and only copies its task's files into the (bind-mounted) workspace, which the running
servers see at once. Slots are keyed by the environment's shape (workdir, limits, and what the
task's image provides besides its files: the Dockerfile's ENV, the folders its RUN mkdir makes,
`[environment].env`) so a task always gets a sandbox built to its own `task.toml` and
Dockerfile, and by the tool groups its servers hold, so an agent that needs only some groups
gets a server that imported only those. A pooled sandbox then holds what a cold start would:
the workspace and every other file the Dockerfile copies are uploaded when a trial takes it.

Refills run in the background; a trial that finds the pool empty starts a slot itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import tomli_w

from bureau.errors import BureauSystemError, SystemErrorKind
from bureau.sandbox.base import Runtime, Sandbox
from bureau.sandbox.folder import normalize_inside
from bureau.tasks.taskdir import TaskDir, load_task_dir
from bureau.trials.mcp_link import ToolLink, open_tool_link


@dataclass(frozen=True)
class Shape:
    workdir: str
    cpus: float
    memory_mb: int
    storage_mb: int
    dockerfile: str = ""
    """What the task's image provides before its files are copied in (its base, ENV lines and
    RUN mkdir folders), as a Dockerfile a blank sandbox is started from."""
    env: tuple[tuple[str, str], ...] = ()
    """`[environment].env` as the task writes it."""

    @classmethod
    def of(cls, task: TaskDir) -> Shape:
        env = task.config.environment
        lines = ["FROM python:3.11-slim"]
        plan = task.image
        if plan is not None:
            lines = [f"FROM {plan.base or 'python:3.11-slim'}"]
            lines += [f"ENV {k}={json.dumps(v)}" for k, v in sorted(plan.env.items())]
            lines += [f"RUN mkdir -p {' '.join(map(shlex.quote, plan.folders))}"] * bool(
                plan.folders
            )
        return cls(
            env.workdir,
            float(env.cpus or 1),
            int(env.memory_mb),
            int(env.storage_mb),
            "\n".join(lines) + "\n",
            tuple(sorted(env.env.items())),
        )

    @property
    def key(self) -> str:
        return hashlib.sha256(repr(self).encode()).hexdigest()[:12]


Key = tuple[Shape, tuple[str, ...] | None]
"""A sandbox's shape and its server's tool groups (None: all)."""


def _files(task: TaskDir, workdir: str) -> list[tuple[Path, str]]:
    """What a cold start copies into a new sandbox (`sandbox.folder.provide_image`): the
    workspace into the workdir, then every other file or folder the Dockerfile copies."""
    found = [(task.workspace_dir, workdir)] if task.workspace_dir.is_dir() else []
    for copy in task.image.copies if task.image is not None else []:
        same = copy.source.resolve() == task.workspace_dir.resolve()
        if not (found and same and normalize_inside(copy.target) == normalize_inside(workdir)):
            found.append((copy.source, copy.target))
    return found


def _key(task: TaskDir, groups: Sequence[str] | None) -> Key:
    # In the order given: the server lists its tools group by group, and a pooled server must
    # show the model the same tool list as one started for the trial.
    return Shape.of(task), None if groups is None else tuple(groups)


@dataclass
class Slot:
    sandbox: Sandbox
    tools: ToolLink

    async def close(self) -> None:
        try:
            await self.tools.close()
        finally:
            await asyncio.to_thread(self.sandbox.stop)


class WarmPool:
    def __init__(
        self, runtime: Runtime, root: Path, *, size: int = 4, start_timeout_s: float = 60.0
    ) -> None:
        self.runtime = runtime
        self.root = root
        self.size = size
        self.start_timeout_s = start_timeout_s
        self._ready: dict[Key, asyncio.Queue[Slot]] = {}
        self._refills: set[asyncio.Task[None]] = set()
        self._closed = False

    def _blank_task(self, shape: Shape) -> TaskDir:
        """A task with this shape and an empty workspace, to start sandboxes before demand."""
        path = self.root / f"blank-{shape.key}"
        if not (path / "task.toml").exists():
            (path / "environment" / "workspace").mkdir(parents=True, exist_ok=True)
            (path / "tests").mkdir(exist_ok=True)
            (path / "instruction.md").write_text("Pool template.\n")
            (path / "environment" / "Dockerfile").write_text(shape.dockerfile)
            (path / "tests" / "test.sh").write_text("#!/bin/bash\nexit 1\n")
            env = {
                "workdir": shape.workdir,
                "cpus": shape.cpus,
                "memory_mb": shape.memory_mb,
                "storage_mb": shape.storage_mb,
                "env": dict(shape.env),
            }
            (path / "task.toml").write_text(tomli_w.dumps({"environment": env}))
        return load_task_dir(path)

    async def _start_slot(self, key: Key) -> Slot:
        shape, groups = key
        blank = self._blank_task(shape)
        sandbox = await asyncio.to_thread(self.runtime.start, blank, timeout_s=self.start_timeout_s)
        try:
            tools = await open_tool_link(sandbox, timeout_s=self.start_timeout_s, groups=groups)
        except BaseException:
            await asyncio.to_thread(sandbox.stop)
            raise
        return Slot(sandbox, tools)

    def _queue(self, key: Key) -> asyncio.Queue[Slot]:
        if key not in self._ready:
            self._ready[key] = asyncio.Queue()
        return self._ready[key]

    def _refill(self, key: Key) -> None:
        if self._closed:
            return
        missing = self.size - self._queue(key).qsize() - len(self._refills)
        for _ in range(max(0, missing)):
            task = asyncio.create_task(self._fill_one(key))
            self._refills.add(task)
            task.add_done_callback(self._refills.discard)

    async def _fill_one(self, key: Key) -> None:
        # A refill that fails leaves the pool short; the next acquire starts its own slot and
        # reports the error where it belongs, in a trial.
        with contextlib.suppress(Exception):
            slot = await self._start_slot(key)
            if self._closed:
                await slot.close()
            else:
                self._queue(key).put_nowait(slot)

    async def warm(self, task: TaskDir, groups: Sequence[str] | None = None) -> None:
        """Fill the pool for this task's shape (servers holding `groups`, None: all) and wait
        until it is full."""
        self._refill(_key(task, groups))
        while self._refills:
            await asyncio.gather(*self._refills, return_exceptions=True)

    async def acquire(self, task: TaskDir, groups: Sequence[str] | None = None) -> Slot:
        """A ready sandbox holding a copy of `task`'s workspace, its tool servers (every group,
        or only `groups`) connected."""
        key = _key(task, groups)
        shape = key[0]
        queue = self._queue(key)
        slot = queue.get_nowait() if not queue.empty() else None
        self._refill(key)
        if slot is None or slot.tools.proc.poll() is not None:
            if slot is not None:
                await slot.close()
            slot = await self._start_slot(key)
        try:
            for source, target in _files(task, shape.workdir):
                await asyncio.to_thread(slot.sandbox.upload, source, target)
        except Exception as exc:
            await slot.close()
            raise BureauSystemError(SystemErrorKind.upload_failed, f"workspace: {exc}") from exc
        return slot

    async def close(self) -> None:
        self._closed = True
        for task in list(self._refills):
            task.cancel()
        await asyncio.gather(*self._refills, return_exceptions=True)
        for queue in self._ready.values():
            while not queue.empty():
                await queue.get_nowait().close()
