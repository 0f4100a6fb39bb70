"""SFT export: tau2 results files -> a Hugging Face ``datasets`` dataset in TRL's conversational format.

Why here: training on results needs the same system prompt and tool schemas the env shows, and a split filter so
that no test task leaks into training data. Only the ``messages`` format exists so far (``tokens`` is not built).
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Optional

from tau2_gym.results import ResultsFileError, load_results


class ExportError(ValueError):
    """A results file cannot be exported (missing, malformed, or an unsupported request)."""


def export_rows(paths: Iterable[str | os.PathLike[str]], *, split: Optional[str] = "train",
                min_reward: Optional[float] = None, domain: Optional[str] = None,
                data_version: Optional[str] = None) -> list[dict[str, Any]]:
    """Rows of the ``messages`` format: system prompt + conversation (OpenAI messages), ``tools`` as a JSON
    string of schemas, ``reward``, ``task_id``, ``domain``, ``data_version``. Unscored runs are dropped."""
    from tau2_gym import load_domain
    from tau2_gym.messages import to_openai_messages
    from tau2_gym.prompts import agent_system_prompt

    if split == "test":
        raise ExportError("refusing to export the 'test' split into training data; pass split=None for all tasks")
    rows: list[dict[str, Any]] = []
    domains: dict[str, Any] = {}
    for path in paths:
        try:
            results = load_results(path)
        except (ResultsFileError, OSError, ValueError) as exc:
            raise ExportError(f"cannot read results file {str(path)!r}: {exc}") from exc
        name = results.info.environment_info.domain_name
        if domain is not None and name != domain:
            continue
        if name not in domains:
            domains[name] = load_domain(name, data_version=data_version)
        loaded = domains[name]
        keep = None if split is None else set(loaded.splits().get(split, ()))
        if split is not None and not keep:
            raise ExportError(f"domain {name!r} has no task split {split!r}; splits: {sorted(loaded.splits())}")
        system = agent_system_prompt(loaded.source, loaded.policy())
        tools = json.dumps(list(loaded.agent_tool_schemas()))
        version = json.dumps(loaded.data_version_record(), sort_keys=True)
        for sim in results.simulations:
            if sim.reward_info is None or (keep is not None and sim.task_id not in keep):
                continue
            reward = float(sim.reward_info.reward)
            if min_reward is not None and reward < min_reward:
                continue
            messages = [{"role": "system", "content": system}] + to_openai_messages(sim.messages)
            rows.append({"messages": messages, "tools": tools, "reward": reward, "task_id": sim.task_id,
                         "domain": name, "data_version": version})
    return rows


def export_dataset(paths: Iterable[str | os.PathLike[str]], output: str | os.PathLike[str], **kwargs: Any):
    """Write :func:`export_rows` as a ``datasets.Dataset`` to ``output`` (``save_to_disk``) and return it."""
    import datasets

    rows = export_rows(paths, **kwargs)
    if not rows:
        raise ExportError("no simulation passed the filters; nothing to export")
    ds = datasets.Dataset.from_list(rows)
    ds.save_to_disk(str(output))
    return ds
