"""Pure pieces of the sandbox package: output capping, the phase table, paths, bwrap arguments."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import bureau
from bureau.errors import BureauSystemError
from bureau.sandbox import get_runtime, seccomp
from bureau.sandbox.base import Limits, Phase
from bureau.sandbox.bwrap import check_workdir, system_args
from bureau.sandbox.folder import TrialFolder, phase_mounts
from bureau.sandbox.limits import kill_uid, rlimit_argv
from bureau.sandbox.process import CappedBuffer


def test_capped_buffer_keeps_head_and_tail() -> None:
    buf = CappedBuffer(10)
    for chunk in (b"abcde", b"fghij", b"klmno", b"pqrst"):
        buf.add(chunk)
    assert buf.text() == "abcde\n[... 10 bytes cut ...]\npqrst"
    small = CappedBuffer(100)
    small.add(b"hi \xff")
    assert small.text() == "hi \ufffd"


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        ("agent", {"/w": True, "/logs/agent": True, "/logs/artifacts": True, "/tmp": True}),
        ("setup", {"/w": True, "/logs/agent": True, "/logs/artifacts": True, "/tmp": True}),
        (
            "solution",
            {
                "/w": True,
                "/logs/agent": True,
                "/logs/artifacts": True,
                "/tmp": True,
                "/solution": False,
            },
        ),
        (
            "verifier",
            {
                "/w": True,
                "/logs/agent": False,
                "/logs/artifacts": False,
                "/tmp": True,
                "/logs/verifier": True,
                "/tests": False,
            },
        ),
        (
            "full",
            {
                "/w": True,
                "/logs/agent": True,
                "/logs/artifacts": True,
                "/tmp": True,
                "/logs/verifier": True,
                "/tests": True,
                "/solution": True,
            },
        ),
    ],
)
def test_phase_table(phase: Phase, expected: dict[str, bool]) -> None:
    mounts = phase_mounts(phase, "/w")
    assert {m.inside: m.writable for m in mounts} == expected
    tmp = next(m for m in mounts if m.inside == "/tmp")
    assert tmp.sub == ("vtmp" if phase == "verifier" else "tmp")


def test_inside_paths_resolve_to_trial_subfolders(tmp_path: Path) -> None:
    folder = TrialFolder(tmp_path, "/workspace")
    assert folder.resolve("/workspace/a/b") == (tmp_path / "workspace", ["a", "b"])
    assert folder.resolve("/logs/agent/x") == (tmp_path / "logs/agent", ["x"])
    assert folder.resolve("/logs") == (tmp_path / "logs", [])
    assert folder.resolve("/tests/./t.sh") == (tmp_path / "tests", ["t.sh"])
    for bad in ("/workspace/../etc/passwd", "/workspacex", "/tmp/x", "workspace"):
        with pytest.raises(BureauSystemError):
            folder.resolve(bad)


def test_rlimits_follow_the_limits() -> None:
    limits = Limits(memory_mb=100, max_processes=7, cpu_time_s=9, max_file_mb=3)
    assert rlimit_argv(limits, "prlimit") == [
        "prlimit",
        f"--as={100 * 2**20}",
        "--nproc=7",
        "--cpu=9",
        f"--fsize={3 * 2**20}",
        "--core=0",
        "--",
    ]


def test_system_view_binds_python_but_not_the_whole_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    args = system_args("/workspace")
    pairs = {(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--ro-bind"}
    assert (sys.base_prefix, sys.base_prefix) in pairs
    assert (sys.prefix, sys.prefix) in pairs
    assert "/root" not in {src for src, _ in pairs} and ("/", "/") not in pairs
    assert "/etc/shadow" not in args and "/etc/resolv.conf" not in args
    package = Path(bureau.__file__).parent
    assert (str(package / "errors.py"),) * 2 in pairs
    assert not any("grading" in src for src, _ in pairs)
    # An installed (non-editable) bureau lives inside the venv: it is hidden, then re-exposed.
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages" / "bureau"
    (site / "grading").mkdir(parents=True)
    for name in ("__init__.py", "errors.py"):
        (site / name).write_text("")
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "exec_prefix", str(venv))
    monkeypatch.setattr(bureau, "__file__", str(site / "__init__.py"))
    installed = system_args("/workspace")
    tmpfs = installed.index("--tmpfs")
    assert installed[tmpfs + 1] == str(site)
    assert installed.index(str(site / "errors.py")) > tmpfs
    assert str(site / "grading") not in installed


@pytest.mark.parametrize("workdir", ["/", "/usr/app", "/tmp", "/logs", "/etc/x", sys.prefix])
def test_reserved_workdirs_are_refused(workdir: str) -> None:
    with pytest.raises(BureauSystemError):
        check_workdir(workdir)


def test_get_runtime_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown runtime"):
        get_runtime("podman")
    with pytest.raises(ValueError, match="unknown isolation"):
        get_runtime("local", isolation="chroot")


@pytest.mark.parametrize("uid", [0, os.getuid(), 65534])
def test_kill_uid_refuses_uids_that_are_not_sandboxes(uid: int) -> None:
    with pytest.raises(ValueError, match="not a sandbox uid"):
        kill_uid(uid)


def test_seccomp_program_is_whole_instructions_and_absent_on_unknown_machines() -> None:
    for machine in ("x86_64", "aarch64"):
        bpf = seccomp.program(machine)
        assert bpf is not None and len(bpf) == 15 * 8
    assert seccomp.program("riscv64") is None
