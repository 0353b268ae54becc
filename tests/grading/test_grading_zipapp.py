import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import bureau.grading
from bureau.grading.zipapp import build_zipapp

GRADING_DIR = Path(bureau.grading.__file__).parent
ALLOWED_THIRD_PARTY = {"pydantic", "openpyxl", "docx", "pptx"}


def test_grading_imports_only_the_allowed_modules() -> None:
    allowed = set(sys.stdlib_module_names) | ALLOWED_THIRD_PARTY
    for source in sorted(GRADING_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.ImportFrom):
                assert node.level == 1, f"{source.name} imports outside bureau.grading"
                continue
            else:
                continue
            for name in names:
                assert name.split(".")[0] in allowed, f"{source.name} imports {name}"


def test_build_is_deterministic_and_minimal(tmp_path: Path) -> None:
    first = build_zipapp(tmp_path / "a" / "grader.pyz")
    (tmp_path / "b").mkdir()
    second = build_zipapp(tmp_path / "b")
    assert second == tmp_path / "b" / "grader.pyz"
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as archive:
        names = archive.namelist()
        assert all(info.date_time == (1980, 1, 1, 0, 0, 0) for info in archive.infolist())
        assert all(info.compress_type == zipfile.ZIP_DEFLATED for info in archive.infolist())
    expected = {f"bureau/grading/{p.name}" for p in GRADING_DIR.glob("*.py")}
    assert names == sorted(expected | {"__main__.py", "bureau/__init__.py"})


def test_pyz_grades_with_its_own_copy_of_bureau(tmp_path: Path, workspace: Path) -> None:
    pyz = build_zipapp(tmp_path / "tests" / "grader.pyz")
    rubric = tmp_path / "rubric.json"
    criteria = [
        {"id": "c1", "type": "numeric", "field": "x", "expected": 3},
        {"id": "c2", "type": "file_exists", "path": "output/memo.txt"},
    ]
    rubric.write_text(json.dumps({"task_id": "t-1", "criteria": criteria}))
    (workspace / "output" / "answer.json").write_text('{"x": "3.0"}')
    out = tmp_path / "verifier"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["BUREAU_GRADER_DEBUG"] = "1"
    command = [sys.executable, str(pyz), "--rubric", str(rubric)]
    command += ["--workspace", str(workspace), "--out", str(out)]
    completed = subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=tmp_path, check=False
    )
    assert completed.returncode == 0, completed.stderr
    origin = os.path.join(str(pyz), "bureau", "grading", "__init__.py")
    assert f"bureau.grading loaded from {origin}" in completed.stderr
    reward = json.loads((out / "reward.json").read_text())
    assert reward == {"reward": 0.5, "pass": 0, "c1": 1, "c2": 0}


@pytest.mark.parametrize("rubric_text", ["{not json", '{"task_id": "t", "criteria": []}'])
def test_pyz_bad_rubric_exits_2(tmp_path: Path, workspace: Path, rubric_text: str) -> None:
    pyz = build_zipapp(tmp_path)
    rubric = tmp_path / "rubric.json"
    rubric.write_text(rubric_text)
    out = tmp_path / "verifier"
    command = [sys.executable, str(pyz), "--rubric", str(rubric)]
    command += ["--workspace", str(workspace), "--out", str(out)]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    assert completed.returncode == 2
    assert "rubric.json" in completed.stderr
    assert not (out / "reward.json").exists()
