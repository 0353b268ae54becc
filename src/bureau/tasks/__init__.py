"""Harbor task directories (schema 1.x), bureau dataset manifests and the verifier's reward file.

A task is a directory with a prompt (instruction.md), a config (task.toml), an environment to
build, a verifier (tests/test.sh) that writes a reward file, and usually an oracle solution. This
package reads, checks and writes these formats and nothing else: building environments, running
agents and grading live elsewhere.
"""

from bureau.tasks.config import (
    AgentConfig,
    EnvironmentConfig,
    NetworkMode,
    TaskConfig,
    TaskInfo,
    VerifierConfig,
)
from bureau.tasks.dataset import (
    MANIFEST_FILE,
    Dataset,
    DatasetManifest,
    DatasetReport,
    ManifestEntry,
    discover_manifest,
    load_dataset,
    load_manifest,
    validate_dataset,
    write_manifest,
)
from bureau.tasks.errors import RewardFileError, TaskFormatError, TaskFormatErrors
from bureau.tasks.reward import Reward, read_reward, write_reward_json
from bureau.tasks.taskdir import (
    TaskCheck,
    TaskDir,
    check_task_dir,
    load_task_dir,
    validate_task_dir,
)

__all__ = [
    "MANIFEST_FILE",
    "AgentConfig",
    "Dataset",
    "DatasetManifest",
    "DatasetReport",
    "EnvironmentConfig",
    "ManifestEntry",
    "NetworkMode",
    "Reward",
    "RewardFileError",
    "TaskCheck",
    "TaskConfig",
    "TaskDir",
    "TaskFormatError",
    "TaskFormatErrors",
    "TaskInfo",
    "VerifierConfig",
    "check_task_dir",
    "discover_manifest",
    "load_dataset",
    "load_manifest",
    "load_task_dir",
    "read_reward",
    "validate_dataset",
    "validate_task_dir",
    "write_manifest",
    "write_reward_json",
]
