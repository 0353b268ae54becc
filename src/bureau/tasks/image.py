"""What a task's Dockerfile asks of its image, as the local runtime gives it without a build.

The local (bubblewrap) runtime never builds an image: commands run on the host's read-only
system, with the sandbox's Python environment first on PATH. A Dockerfile is read (with
`dockerfile-parse`) into an `ImagePlan`, each instruction either emulated, reported as ignored,
or refused with an error that names its line:

| instruction | local runtime |
|---|---|
| `FROM python:*`, `debian:*`, `ubuntu:*` | the host's system stands in for the base |
| `FROM` anything else, a second `FROM` | refused: needs the image |
| `WORKDIR` | the working directory, unless task.toml sets `[environment].workdir` |
| `ENV` | set for every command of the trial |
| `COPY`/`ADD` of build-context files | copied into the sandbox at start, when the target is |
|  | under the workdir (or `/tests` for a verifier image) |
| `COPY --from`, `ADD <url>`, a target elsewhere | refused |
| `RUN pip install ...` (also `pip3`, `python -m pip`, `uv pip`) | accepted when the sandbox's |
|  | Python satisfies every requirement (an exact pin: see below); refused naming the one it |
|  | lacks |
| `RUN mkdir ...` | the folders are created when under the workdir; others ignored |
| any other `RUN` | refused: needs the image |
| `USER`, `CMD`, `ENTRYPOINT`, `EXPOSE`, `HEALTHCHECK`, ... | reported as ignored |

Refusals are `TaskFormatError`s naming the Dockerfile and line, and end with the advice to use
the Docker runtime; they are not format errors (Harbor and the Docker runtime build the image
fine), so a runner reports them when it is the local runtime that would run the task.

What an exact pin (`numpy==2.4.6`) means here. A generated task pins the versions it was built
and its oracle verified with, as `harbor lint` wants, and an image build installs exactly those.
The local runtime cannot install anything: it has the sandbox's Python. It accepts the same
major version as a stand-in (`numpy 2.5.5` for `2.4.6`), the compatibility these libraries
promise within a major version, and says so in the plan's notes (`substituted`); another major
version, or a package that is missing, is refused. `BUREAU_EXACT_PINS=1` (or `exact_pins=True`)
refuses any difference. A task built in one environment therefore runs in another of the same
major versions, as Harbor from its own virtual environment runs the tasks `.venv` built
(`tests/integrations/test_harbor_interop.py` runs that round trip, oracle 1.0 and empty 0.0).
"""

from __future__ import annotations

import functools
import io
import os
import posixpath
import re
import shlex
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from bureau.tasks.errors import TaskFormatError

PLAIN_BASES = ("python", "debian", "ubuntu")
"""Official images whose system the host's read-only system stands in for."""

DOCKER_ADVICE = "use a runtime that builds images: bureau --runtime docker, Harbor -e docker"

_PIP_COMMANDS = (
    ("pip", "install"),
    ("pip3", "install"),
    ("python", "-m", "pip", "install"),
    ("python3", "-m", "pip", "install"),
    ("uv", "pip", "install"),
)
# pip/uv flags that take no value and change nothing about what ends up installed here.
_PIP_HARMLESS_FLAGS = {
    "--no-cache-dir", "--no-cache", "--system", "-q", "--quiet", "-U", "--upgrade",
    "--break-system-packages", "--disable-pip-version-check", "--no-input", "--user",
    "--root-user-action=ignore", "--progress-bar=off", "-v", "--verbose",
}  # fmt: skip
_IGNORED = {
    "USER": "every command runs as the sandbox's own unprivileged user",
    "CMD": "the runtime runs the agent's and verifier's commands, not the image's",
    "ENTRYPOINT": "the runtime runs the agent's and verifier's commands, not the image's",
    "EXPOSE": "sandboxes have no network",
    "HEALTHCHECK": "no health check is run",
    "VOLUME": "no volumes are mounted",
    "STOPSIGNAL": "sandboxes are stopped with SIGKILL",
    "SHELL": "commands run with bash",
    "ONBUILD": "no image is built",
}
_SILENT = {"COMMENT", "ARG", "LABEL", "MAINTAINER"}
SANDBOX_OWNED_ENV = frozenset({"PATH", "HOME", "TMPDIR", "USER", "LOGNAME"})
"""Variables the sandbox sets itself: its PATH leads to its Python, HOME and TMPDIR to its /tmp."""
_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


@dataclass(frozen=True)
class Copy:
    """One file or folder of the build context to place inside the sandbox at start."""

    source: Path  # on the host, inside the build context
    target: str  # absolute path inside the sandbox
    line: int


@dataclass
class ImagePlan:
    """The image a Dockerfile describes, as the local runtime provides it."""

    dockerfile: Path
    base: str | None = None
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    copies: list[Copy] = field(default_factory=list)
    folders: list[str] = field(default_factory=list)  # RUN mkdir targets, absolute
    errors: list[TaskFormatError] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # "line N: USER app (why)"
    substituted: list[str] = field(default_factory=list)
    """Exact pins met by another version of the same major: "line N: numpy 2.5.5 for ==2.4.6"."""

    def place(self, workdir: str, allowed: tuple[str, ...] = ()) -> None:
        """Refuse copies and folders outside `workdir` (and the `allowed` folders)."""
        roots = (workdir, *allowed)
        kept: list[Copy] = []
        for copy in self.copies:
            if any(_under(copy.target, root) for root in roots):
                kept.append(copy)
            else:
                self._refuse(
                    copy.line,
                    f"files copied under {' or '.join(roots)}",
                    f"a copy to {copy.target}",
                )
        self.copies = kept
        self.folders = [f for f in self.folders if any(_under(f, root) for root in roots)]

    def _refuse(self, line: int, expected: str, got: str) -> None:
        self.errors.append(
            TaskFormatError(
                self.dockerfile,
                f"{expected} (the local runtime builds no image: {DOCKER_ADVICE})",
                got=got,
                line=line,
            )
        )


def read_image_plan(
    dockerfile: Path, context: Path | None = None, *, exact_pins: bool | None = None
) -> ImagePlan:
    """Read `dockerfile` (its build context defaults to its folder) into an `ImagePlan`.
    `exact_pins` (default: `BUREAU_EXACT_PINS=1` in the environment) refuses a pinned package
    whose installed version differs at all, instead of accepting the same major version."""
    if exact_pins is None:
        exact_pins = os.environ.get("BUREAU_EXACT_PINS", "") not in ("", "0")
    from dockerfile_parse import DockerfileParser

    context = (context or dockerfile.parent).resolve()
    plan = ImagePlan(dockerfile=dockerfile)
    text = dockerfile.read_text(encoding="utf-8")
    parser = DockerfileParser(fileobj=io.StringIO(text), env_replace=True)
    variables: dict[str, str] = {}
    workdir = "/"
    froms = 0
    for item in parser.structure:
        instruction, value = item["instruction"], item["value"]
        line = int(item["startline"]) + 1
        shown = " ".join(item["content"].split())
        if len(shown) > 120:
            shown = shown[:117] + "..."
        if instruction == "ARG":
            for word in _words(value, variables):
                name, _, default = word.partition("=")
                variables.setdefault(name, default)
        elif instruction == "FROM":
            froms += 1
            image = (_words(value, variables) or [""])[0]
            if froms > 1:
                plan._refuse(line, "a single FROM", f"a second stage ({shown})")
            elif not _plain_base(image):
                plan._refuse(
                    line,
                    f"a plain {', '.join(PLAIN_BASES)} base image",
                    f"FROM {image}",
                )
            plan.base = plan.base or image
        elif instruction == "ENV":
            words = _words(value, variables)
            pairs = (
                [tuple(w.split("=", 1)) for w in words]
                if "=" in words[0]
                else [(words[0], value.split(None, 1)[1] if len(words) > 1 else "")]
            )
            for name, text in pairs:
                variables[name] = text
                if name in SANDBOX_OWNED_ENV or name.startswith("BUREAU_"):
                    plan.ignored.append(
                        f"line {line}: ENV {name} (ignored: the sandbox sets {name} itself)"
                    )
                else:
                    plan.env[name] = text
        elif instruction == "WORKDIR":
            path = (_words(value, variables) or ["."])[0]
            workdir = posixpath.normpath(posixpath.join(workdir, path))
            plan.workdir = workdir
        elif instruction in ("COPY", "ADD"):
            _read_copy(plan, instruction, value, variables, workdir, context, line, shown)
        elif instruction == "RUN":
            _read_run(plan, value, variables, workdir, line, shown, exact_pins)
        elif instruction in _IGNORED:
            plan.ignored.append(f"line {line}: {shown} (ignored: {_IGNORED[instruction]})")
        elif instruction not in _SILENT:
            plan.ignored.append(f"line {line}: {shown} (ignored: unknown instruction)")
    if froms == 0:
        plan._refuse(1, "a FROM line", "none")
    return plan


def _words(value: str, variables: dict[str, str]) -> list[str]:
    """The words of an instruction's value, quotes removed and $VARIABLES substituted."""
    from dockerfile_parse.util import WordSplitter

    return [w for w in WordSplitter(value, args=variables).split(dequote=True) if w is not None]


def _plain_base(image: str) -> bool:
    """`python:3.12-slim`, `docker.io/library/debian@sha256:...` and the like."""
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:  # a tag, not a registry's port
        name = name.rsplit(":", 1)[0]
    return name.removeprefix("docker.io/").removeprefix("library/") in PLAIN_BASES


def _read_copy(
    plan: ImagePlan,
    instruction: str,
    value: str,
    variables: dict[str, str],
    workdir: str,
    context: Path,
    line: int,
    shown: str,
) -> None:
    words = _words(value, variables)
    flags = [w for w in words if w.startswith("--")]
    paths = [w for w in words if not w.startswith("--")]
    if any(f.startswith("--from") for f in flags):
        plan._refuse(line, "files from the build context", f"a copy from another image ({shown})")
        return
    if len(paths) < 2:
        plan._refuse(line, "a source and a target", shown)
        return
    ignored_flags = [f for f in flags if not f.startswith(("--chown", "--chmod", "--link"))]
    if ignored_flags:
        plan._refuse(line, "COPY without build-only flags", " ".join(ignored_flags))
        return
    *sources, target = paths
    target_path = posixpath.normpath(posixpath.join(workdir, target))
    into_folder = target.endswith("/") or len(sources) > 1
    for source in sources:
        if _URL.match(source):
            plan._refuse(line, "files from the build context", f"a download ({source})")
            continue
        if any(ch in source for ch in "*?["):
            matches = sorted(context.glob(source.lstrip("/")))
        else:
            matches = [context / source.lstrip("/")]
        for host in matches:
            resolved = host.resolve()
            if not resolved.is_relative_to(context) or not host.exists():
                plan._refuse(
                    line, f"a file or folder inside {context}", f"{source} (not found there)"
                )
                continue
            if instruction == "ADD" and resolved.is_file() and _is_archive(resolved):
                plan._refuse(line, "a plain file", f"an archive Docker would unpack ({source})")
                continue
            if host.is_dir():
                # Docker copies a folder's contents, not the folder itself.
                dest = target_path
            elif into_folder or any(ch in source for ch in "*?["):
                dest = posixpath.join(target_path, host.name)
            else:
                dest = target_path
            plan.copies.append(Copy(host, dest, line))


def _is_archive(path: Path) -> bool:
    return path.name.endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".txz"))


def _read_run(
    plan: ImagePlan,
    value: str,
    variables: dict[str, str],
    workdir: str,
    line: int,
    shown: str,
    exact_pins: bool,
) -> None:
    if value.lstrip().startswith("["):
        plan._refuse(line, "a RUN the local runtime can emulate", shown)
        return
    for part in re.split(r"\s*&&\s*|\s*;\s*", value.strip()):
        if not part:
            continue
        try:
            words = shlex.split(part)
        except ValueError:
            plan._refuse(line, "a RUN the local runtime can emulate", shown)
            return
        if words[:1] == ["mkdir"]:
            plan.folders += [
                posixpath.normpath(posixpath.join(workdir, w))
                for w in words[1:]
                if not w.startswith("-")
            ]
            continue
        requirements = _pip_requirements(words)
        if requirements is None:
            plan._refuse(
                line,
                "only pip installs and mkdir in RUN (what the local runtime can emulate)",
                f"RUN {part}",
            )
            return
        for requirement in requirements:
            problem = unmet_requirement(requirement)
            stand_in = None if exact_pins else same_major_stand_in(requirement)
            if problem and stand_in:
                plan.substituted.append(f"line {line}: {stand_in}")
            elif problem:
                plan._refuse(
                    line,
                    f"packages the sandbox's Python already has ({requirement}: {problem})",
                    f"RUN {part}",
                )
                return


def _pip_requirements(words: list[str]) -> list[str] | None:
    """The requirements a pip install command line names, or None if it is not one we read."""
    for prefix in _PIP_COMMANDS:
        if tuple(words[: len(prefix)]) == prefix:
            rest = words[len(prefix) :]
            break
    else:
        return None
    if any(w.startswith("-") and w not in _PIP_HARMLESS_FLAGS for w in rest):
        return None  # -r file, -e path, --index-url ...: not read here
    return [w for w in rest if not w.startswith("-")]


@functools.cache
def installed_version(name: str) -> str | None:
    """The version of distribution `name` in this Python, None when it is not installed. Read
    once a process: every task folder's pinned requirements are checked against it, and reading
    a package's metadata parses a file (16 reads a task took 10 s of carving 416 tasks)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def unmet_requirement(requirement: str) -> str | None:
    """Why the running Python (the sandbox's) does not satisfy `requirement`; None if it does."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        wanted = Requirement(requirement)
    except InvalidRequirement:
        return "not a requirement pip reads"
    if wanted.url:
        return "a URL requirement"
    have = installed_version(wanted.name)
    if have is None:
        return "not installed"
    if wanted.specifier and not wanted.specifier.contains(have, prereleases=True):
        return f"it has {have}"
    return None


def same_major_stand_in(requirement: str) -> str | None:
    """For an exact pin the running Python does not meet, the installed version of the same
    major that stands in for it ("numpy 2.5.5 for ==2.4.6"); None when there is none."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    try:
        wanted = Requirement(requirement)
        (spec,) = wanted.specifier
        installed = installed_version(wanted.name)
        if installed is None:
            return None
        have = Version(installed)
        pinned = Version(spec.version)
    except (InvalidRequirement, ValueError, InvalidVersion):
        return None  # not one exact pin of an installed package
    if spec.operator != "==" or have.major != pinned.major:
        return None
    return f"{wanted.name} {have} for =={pinned}"


def resolve_env_templates(env: dict[str, str], host: dict[str, str]) -> dict[str, str]:
    """Harbor's `${VAR}` / `${VAR:-default}` values of an env table, read from `host`.

    A whole value that is one template is replaced; anything else is kept literally. Raises
    KeyError naming the variable when it is unset on the host and has no default.
    """
    resolved: dict[str, str] = {}
    for key, value in env.items():
        match = _TEMPLATE.fullmatch(value)
        if match is None:
            resolved[key] = value
        elif match.group(1) in host:
            resolved[key] = host[match.group(1)]
        elif match.group(2) is not None:
            resolved[key] = match.group(2)
        else:
            raise KeyError(f"{key} = {value!r} needs {match.group(1)} set on the host")
    return resolved


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")
