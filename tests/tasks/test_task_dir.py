"""Task directories: a valid one loads, and each broken part is reported by the file it is in."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bureau.tasks import (
    TaskFormatErrors,
    check_task_dir,
    load_task_dir,
    validate_task_dir,
)

MakeTask = Callable[..., Path]


def messages(task_dir: Path, *, require_solution: bool = False) -> list[str]:
    return [str(e) for e in validate_task_dir(task_dir, require_solution=require_solution)]


def test_valid_task_loads_with_its_parts(make_task: MakeTask) -> None:
    root = make_task()
    task = load_task_dir(root, require_solution=True)
    assert task.name == "acme/q3-expenses"
    assert task.instruction.startswith("Find the total")
    assert task.config.environment.cpus == 2
    assert task.environment_dir == root / "environment"
    assert task.workspace_dir == root / "environment" / "workspace"
    assert task.tests_dir == root / "tests"
    assert task.test_script == root / "tests" / "test.sh"
    assert task.solution_dir == root / "solution"
    assert task.solve_script == root / "solution" / "solve.sh"
    assert task.warnings == ()
    assert validate_task_dir(root, require_solution=True) == []


def test_name_falls_back_to_the_folder_name(make_task: MakeTask) -> None:
    task = load_task_dir(make_task("plain-task", task_toml='version = "1.0"\n'))
    assert task.name == "plain-task"


def test_missing_test_script_is_named(make_task: MakeTask) -> None:
    root = make_task(test_sh=None)
    assert messages(root) == [
        f"{root / 'tests' / 'test.sh'}: expected the verifier script, got no such file"
    ]


def test_empty_instruction_is_an_error(make_task: MakeTask) -> None:
    root = make_task(instruction="  \n\n")
    assert messages(root) == [
        f"{root / 'instruction.md'}: expected a non-empty task prompt, got no text"
    ]


def test_missing_instruction_and_config_are_named(make_task: MakeTask) -> None:
    root = make_task()
    (root / "instruction.md").unlink()
    (root / "task.toml").unlink()
    assert messages(root) == [
        f"{root / 'instruction.md'}: expected the task prompt, got no such file",
        f"{root / 'task.toml'}: expected a task.toml file, got no such file",
    ]


def test_dockerfile_is_optional_only_with_a_prebuilt_image(make_task: MakeTask) -> None:
    without = make_task("no-image", dockerfile=None)
    assert messages(without) == [
        f"{without / 'environment' / 'Dockerfile'}: expected an environment build file "
        "(or [environment].docker_image in task.toml), got no such file"
    ]
    with_image = make_task(
        "image", dockerfile=None, task_toml='[environment]\ndocker_image = "python:3.11"\n'
    )
    assert messages(with_image) == []


def test_solution_is_required_only_when_asked(make_task: MakeTask) -> None:
    root = make_task(solve_sh=None)
    assert messages(root) == []
    assert messages(root, require_solution=True) == [
        f"{root / 'solution' / 'solve.sh'}: expected the oracle solution script, got no such file"
    ]


def test_empty_test_script_is_an_error(make_task: MakeTask) -> None:
    root = make_task(test_sh="\n")
    assert messages(root) == [
        f"{root / 'tests' / 'test.sh'}: expected the verifier script with commands in it, "
        "got no text"
    ]


def test_script_without_execute_bit_is_only_a_warning(make_task: MakeTask) -> None:
    root = make_task()
    (root / "tests" / "test.sh").chmod(0o644)
    check = check_task_dir(root)
    assert check.errors == []
    assert [str(w) for w in check.warnings] == [
        f"{root / 'tests' / 'test.sh'}: expected an executable file (chmod +x), got mode 644"
    ]
    task = load_task_dir(root)
    assert len(task.warnings) == 1


def test_every_problem_is_reported_and_load_raises_them_all(make_task: MakeTask) -> None:
    root = make_task(
        instruction="",
        task_toml="[environment]\ncpus = 0\n",
        test_sh=None,
        solve_sh=None,
    )
    expected = [
        f"{root / 'instruction.md'}: expected a non-empty task prompt, got no text",
        f"{root / 'task.toml'}: environment.cpus: expected a finite number > 0, got 0",
        f"{root / 'tests' / 'test.sh'}: expected the verifier script, got no such file",
        f"{root / 'solution' / 'solve.sh'}: expected the oracle solution script, got no such file",
    ]
    assert messages(root, require_solution=True) == expected
    with pytest.raises(TaskFormatErrors) as caught:
        load_task_dir(root, require_solution=True)
    assert [str(e) for e in caught.value] == expected


def test_bad_toml_in_a_task_names_the_task_file(make_task: MakeTask) -> None:
    root = make_task(task_toml="[environment\n")
    (error,) = validate_task_dir(root)
    assert error.path == root / "task.toml"
    assert error.line == 1


def test_path_that_is_not_a_directory(tmp_path: Path) -> None:
    assert messages(tmp_path / "absent") == [
        f"{tmp_path / 'absent'}: expected a task directory, got no such directory"
    ]
    (tmp_path / "file").write_text("x")
    assert messages(tmp_path / "file") == [
        f"{tmp_path / 'file'}: expected a task directory, got a file"
    ]
