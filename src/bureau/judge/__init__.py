"""The LLM judge: verdicts on an agent's work from an OpenAI-compatible chat endpoint, with
several keys, rate limits, retries by error class and a record of every call."""

from bureau.judge.client import CallRecord, JudgeClient, JudgeConfig, JudgeUnavailable, load_keys
from bureau.judge.verdict import JudgeRequest, Verdict, VerdictError, parse_verdict

__all__ = [
    "CallRecord",
    "JudgeClient",
    "JudgeConfig",
    "JudgeRequest",
    "JudgeUnavailable",
    "Verdict",
    "VerdictError",
    "load_keys",
    "parse_verdict",
]
