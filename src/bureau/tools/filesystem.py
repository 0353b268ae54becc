"""Filesystem tools: look around the workspace, find files, read and write text.

Content search reads inside documents too (PDF pages, Word paragraphs, slides, sheet rows,
mail), so one search finds a figure wherever it is written down. Walks never follow symlinks,
and a link whose target is outside the workspace is shown but never opened.
"""

from __future__ import annotations

import fnmatch
import os
import re
import stat
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from bureau.tools import readers
from bureau.tools.core import (
    MAX_READ_BYTES,
    FailureKind,
    PathArg,
    ToolFailure,
    ToolSet,
    Workspace,
    check_deadline,
    special_kind,
    suggest_tool,
)

TOOLS = ToolSet("filesystem", "fs_")
FolderArg = Annotated[
    str, Field(description="Folder relative to the workspace root ('.' is the root).")
]


def _human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _mtime(st: os.stat_result) -> str:
    return datetime.fromtimestamp(st.st_mtime).strftime("%Y-%m-%d %H:%M")


def _entry_line(ws: Workspace, path: Path, name: str) -> str:
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        try:
            target = ws.resolve(ws.rel(path))
            return f"{name} -> {ws.rel(target)}  (link)"
        except ToolFailure:
            return f"{name}  (link to outside the workspace, not readable)"
    if stat.S_ISDIR(st.st_mode):
        count = sum(1 for _ in os.scandir(path))
        return f"{name}/  ({count} entr{'ies' if count != 1 else 'y'})"
    return f"{name}  {_human_size(st.st_size)}  {_mtime(st)}"


@TOOLS.tool(read_only=True)
def fs_list(
    ws: Workspace,
    path: FolderArg = ".",
    include_hidden: Annotated[
        bool, Field(description="Also show names starting with a dot.")
    ] = False,
) -> str:
    """List one folder of the workspace: subfolders first (with their entry counts), then files
    with size and modification time. Use fs_tree to see several levels at once."""
    folder = ws.folder(path)
    entries = sorted(
        os.scandir(folder), key=lambda e: (not e.is_dir(follow_symlinks=False), e.name)
    )
    lines = [
        _entry_line(ws, Path(e.path), e.name)
        for e in entries
        if include_hidden or not e.name.startswith(".")
    ]
    where = ws.rel(folder)
    if not lines:
        return f"{where}/ is empty"
    return f"{where}/  ({len(lines)} entr{'ies' if len(lines) != 1 else 'y'})\n" + "\n".join(lines)


def _walk(root: Path, include_hidden: bool = False) -> Iterator[tuple[Path, list[str], list[str]]]:
    for folder, dirs, files in os.walk(root):
        check_deadline()
        if not include_hidden:
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            files = [f for f in files if not f.startswith(".")]
        dirs.sort()
        yield Path(folder), dirs, sorted(files)


@TOOLS.tool(read_only=True)
def fs_tree(
    ws: Workspace,
    path: FolderArg = ".",
    max_depth: Annotated[int, Field(ge=1, le=20, description="Levels of folders to show.")] = 4,
) -> str:
    """Show the folder tree under a folder, with file sizes: the quickest way to get to know a
    workspace. Deeper levels are summarised as a count."""
    top = ws.folder(path)
    lines = [f"{ws.rel(top)}/"]
    n_files = n_dirs = 0

    def visit(folder: Path, depth: int, indent: str) -> None:
        nonlocal n_files, n_dirs
        check_deadline()
        entries = sorted(
            (e for e in os.scandir(folder) if not e.name.startswith(".")),
            key=lambda e: (not e.is_dir(follow_symlinks=False), e.name),
        )
        for e in entries:
            if e.is_symlink():
                lines.append(indent + _entry_line(ws, Path(e.path), e.name))
            elif e.is_dir():
                n_dirs += 1
                if depth < max_depth:
                    lines.append(f"{indent}{e.name}/")
                    visit(Path(e.path), depth + 1, indent + "  ")
                    continue
                inside = sum(len(d) + len(f) for _, d, f in os.walk(e.path))
                lines.append(f"{indent}{e.name}/  ({inside} entries inside, not expanded)")
            else:
                n_files += 1
                lines.append(f"{indent}{e.name}  {_human_size(e.stat().st_size)}")

    visit(top, 1, "  ")
    lines.append(f"{n_dirs} folders, {n_files} files")
    return "\n".join(lines)


@TOOLS.tool(read_only=True)
def fs_find(
    ws: Workspace,
    pattern: Annotated[
        str,
        Field(
            description="A glob such as '*.pdf' or 'contract*_v2.*' matched against file names "
            "(or against the relative path when it contains '/'), or plain words matched "
            "anywhere in the name (case-insensitive)."
        ),
    ],
    path: FolderArg = ".",
    max_results: Annotated[int, Field(ge=1, le=2000, description="Most paths to list.")] = 200,
) -> str:
    """Find files and folders by name under a folder (recursive)."""
    top = ws.folder(path)
    has_glob = any(ch in pattern for ch in "*?[")
    needle = pattern.lower()
    found: list[str] = []
    for folder, dirs, files in _walk(top):
        for name in [*(d + "/" for d in dirs), *files]:
            rel = ws.rel(folder / name.rstrip("/"))
            subject = rel if "/" in pattern.rstrip("/") else name.rstrip("/")
            if has_glob:
                hit = fnmatch.fnmatch(subject.lower(), needle)
            else:
                hit = all(word in subject.lower() for word in needle.split())
            if hit:
                found.append(rel + ("/" if name.endswith("/") else ""))
    if not found:
        return f"no file or folder under {ws.rel(top)}/ matches {pattern!r}"
    more = f" (showing the first {max_results})" if len(found) > max_results else ""
    count = f"{len(found)} match{'es' if len(found) != 1 else ''}"
    return f"{count} for {pattern!r}{more}:\n" + "\n".join(found[:max_results])


@TOOLS.tool(read_only=True)
def fs_search_content(
    ws: Workspace,
    query: Annotated[str, Field(description="Text to look for (or a regular expression).")],
    path: FolderArg = ".",
    regex: Annotated[
        bool, Field(description="Treat the query as a Python regular expression.")
    ] = False,
    case_sensitive: Annotated[bool, Field(description="Match letter case exactly.")] = False,
    file_glob: Annotated[
        str, Field(description="Only search files whose name matches this glob, e.g. '*.pdf'.")
    ] = "*",
    include_documents: Annotated[
        bool, Field(description="Also search inside PDF, Word, PowerPoint, Excel and .eml files.")
    ] = True,
    max_matches: Annotated[
        int, Field(ge=1, le=2000, description="Stop after this many matching lines.")
    ] = 100,
) -> str:
    """Search the content of files under a folder. Text files are searched line by line;
    documents by their readable text, reported with where the match is (page, paragraph, slide,
    sheet row, mail header/body). Whitespace in the query matches any run of whitespace, and a
    phrase wrapped onto the next line (common in PDFs) is found too."""
    top = ws.resolve(path)
    try:
        expr = query if regex else r"\s+".join(re.escape(w) for w in query.split())
        matcher = re.compile(expr, 0 if case_sensitive else re.IGNORECASE)
    except re.error as exc:
        raise ToolFailure(FailureKind.invalid_argument, f"bad regular expression: {exc}") from exc
    files = [top] if top.is_file() else [f / n for f, _, names in _walk(top) for n in names]
    hits: list[str] = []
    n_files = skipped = 0
    for file in files:
        if not fnmatch.fnmatch(file.name.lower(), file_glob.lower()) or file.is_symlink():
            continue
        check_deadline()
        try:
            lines = readers.document_lines(file, documents=include_documents, check=check_deadline)
        except ToolFailure:
            raise
        except Exception:
            skipped += 1
            continue
        if lines is None:
            continue
        n_files += 1
        for i, (where, text) in enumerate(lines):
            nxt = lines[i + 1] if i + 1 < len(lines) else None
            if matcher.search(text):
                shown = text.strip()
            elif (
                nxt is not None
                and nxt[0] == where
                and matcher.search(f"{text} {nxt[1]}")
                and not matcher.search(nxt[1])
            ):
                shown = f"{text.strip()} / {nxt[1].strip()}"  # a phrase wrapped onto the next line
            else:
                continue
            hits.append(f"{ws.rel(file)} ({where}): {shown[:400]}")
            if len(hits) >= max_matches:
                break
        if len(hits) >= max_matches:
            break
    note = f"; {skipped} unreadable files skipped" if skipped else ""
    if not hits:
        return f"no match for {query!r} in {n_files} files under {ws.rel(top)}{note}"
    limit = f" (stopped at max_matches={max_matches})" if len(hits) >= max_matches else ""
    found = f"{len(hits)} match{'es' if len(hits) != 1 else ''}"
    return f"{found} in {n_files} files searched{limit}{note}:\n" + "\n".join(hits)


@TOOLS.tool(read_only=True)
def fs_read_text(
    ws: Workspace,
    path: PathArg,
    offset: Annotated[int, Field(ge=1, description="First line to show (1-based).")] = 1,
    limit: Annotated[int, Field(ge=1, le=5000, description="Number of lines to show.")] = 400,
) -> str:
    """Read a text file (txt, md, csv, json, ...) with line numbers, a window at a time. For
    PDF, Word, PowerPoint, Excel and mail files use their own tools."""
    file = ws.file(path)
    if not readers.is_text_file(file):
        raise ToolFailure(
            FailureKind.wrong_file_type, f"{path} is not a text file{suggest_tool(file)}"
        )
    size = file.stat().st_size
    if size > MAX_READ_BYTES:
        raise ToolFailure(
            FailureKind.file_too_large,
            f"{path} has {size} bytes, more than a tool reads at once ({MAX_READ_BYTES}); "
            "read parts of it with code",
        )
    lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    if not lines:
        return f"{ws.rel(file)} is empty"
    window = lines[offset - 1 : offset - 1 + limit]
    if not window:
        raise ToolFailure(
            FailureKind.invalid_argument, f"offset {offset} is past the end ({len(lines)} lines)"
        )
    last = offset + len(window) - 1
    numbered = "\n".join(f"{n:>6}  {line}" for n, line in enumerate(window, start=offset))
    more = f"; continue with offset={last + 1}" if last < len(lines) else ""
    return f"{ws.rel(file)}: lines {offset}-{last} of {len(lines)}{more}\n{numbered}"


def _details(file: Path) -> list[str]:
    """Facts about a document that help decide how to read it."""
    suffix = file.suffix.lower()
    if suffix == ".pdf":
        from bureau.tools.pdfread import page_count

        return [f"pages: {page_count(file)}"]
    if suffix in {".xlsx", ".xlsm"}:
        import openpyxl

        wb = openpyxl.load_workbook(file, read_only=True)
        try:
            sheets = [f"{s.title} ({s.max_row}x{s.max_column})" for s in wb.worksheets]
            return [f"sheets: {', '.join(sheets)}"]
        finally:
            wb.close()
    if suffix == ".pptx":
        return [f"slides: {len(readers.deck_slides(file))}"]
    if suffix == ".docx":
        items = readers.docx_items(file)
        paras = sum(1 for i in items if i.kind == "paragraph" and i.text.strip())
        return [f"paragraphs: {paras}, tables: {sum(1 for i in items if i.kind == 'table')}"]
    if suffix == ".eml":
        m = readers.read_mail(file)
        return [f"subject: {m.subject}", f"attachments: {len(m.attachments)}"]
    if readers.is_text_file(file):
        with file.open("rb") as fh:
            return [f"lines: {sum(1 for _ in fh)}"]
    return []


@TOOLS.tool(read_only=True)
def fs_info(ws: Workspace, path: PathArg) -> str:
    """Metadata of a file or folder: type, size, modification time, and for documents their
    page, sheet, slide or paragraph counts."""
    target = ws.resolve(path)
    st = target.stat()
    facts: list[str] = [f"path: {ws.rel(target)}"]
    if target.is_dir():
        n = sum(len(files) for _, _, files in _walk(target))
        facts += ["type: folder", f"files inside (recursive): {n}"]
    elif (special := special_kind(target)) is not None:
        # Never opened: a FIFO blocks until a writer comes (the call used to hang until its
        # timeout), a device may never end.
        facts.append(f"type: {special}, not a regular file")
    else:
        kind = target.suffix.lower().lstrip(".") or "file"
        facts += [f"type: {kind}", f"size: {_human_size(st.st_size)} ({st.st_size} bytes)"]
        try:
            facts += _details(target)
        except Exception as exc:
            facts.append(f"could not open as {kind}: {type(exc).__name__}")
    facts.append(f"modified: {_mtime(st)}")
    return "\n".join(facts)


@TOOLS.tool(read_only=False)
def fs_write_text(
    ws: Workspace,
    path: PathArg,
    content: Annotated[str, Field(description="The text to write (UTF-8).")],
    mode: Annotated[
        Literal["create", "overwrite", "append"],
        Field(
            description="'create' fails if the file exists; 'overwrite' replaces it; "
            "'append' adds to its end (creating it if needed)."
        ),
    ] = "create",
) -> str:
    """Write a text file, e.g. output/answer.json or a CSV. Missing folders are created. For
    Word, Excel, PowerPoint or PDF files use the document tools."""
    target = ws.target(path, overwrite=mode != "create")
    data = content.encode("utf-8")
    if mode == "append" and target.exists():
        with target.open("ab") as fh:
            fh.write(data)
        return f"appended {len(data)} bytes to {ws.rel(target)} (now {target.stat().st_size} bytes)"
    existed = target.exists()
    ws.atomic_save(target, lambda tmp: tmp.write_bytes(data))
    verb = "replaced" if existed else "created"
    n_lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    return f"{verb} {ws.rel(target)}: {len(data)} bytes, {n_lines} lines"


if __name__ == "__main__":
    from bureau.tools.cli import main

    main(default_groups=["filesystem"])
