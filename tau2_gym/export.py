"""SFT export: tau2 results files -> a Hugging Face ``datasets`` dataset in TRL's conversational format.

Why here: training on results needs the same system prompt and tool schemas the env shows, and a split filter so
that no test task leaks into training data. Two formats: ``messages`` (TRL's conversational rows; the trainer
applies the chat template) and ``tokens`` (``input_ids`` + ``assistant_masks``, rendered by
:meth:`tau2_gym.hf.chat.ChatRenderer.episode_ids` -- the construction the GRPO rollout uses -- so SFT and GRPO
train on the same token contexts).
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


def load_tokenizer(tokenizer: Any) -> Any:
    """A tokenizer object as is, or ``AutoTokenizer.from_pretrained`` of a local path / hub name."""
    if isinstance(tokenizer, (str, os.PathLike)):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(tokenizer))
    return tokenizer


def tokenize_rows(rows: Iterable[dict[str, Any]], tokenizer: Any, *, chat_template: Optional[str] = None,
                  chat_template_kwargs: Optional[dict[str, Any]] = None,
                  data_version: Optional[str] = None) -> list[dict[str, Any]]:
    """``messages`` rows -> ``tokens`` rows: ``input_ids`` and ``assistant_masks`` (1 exactly on the policy's
    tokens, each turn through its end-of-turn token) plus the rows' metadata. The greeting and any task
    history before the policy's first turn are prompt (mask 0), as in the rollout's first observation."""
    from tau2_gym import load_domain
    from tau2_gym.hf.chat import ChatRenderer, TemplateError, stop_token_ids
    from tau2_gym.turn_loop import TurnLoop

    tok = load_tokenizer(tokenizer)
    try:
        renderer = ChatRenderer(tok, stop_ids=stop_token_ids(tok), chat_template=chat_template,
                                chat_template_kwargs=chat_template_kwargs)
    except TemplateError as exc:
        raise ExportError(f"cannot render with this tokenizer: {exc}") from exc
    openings: dict[tuple[str, str], int] = {}
    out = []
    for row in rows:
        key = (row["domain"], row["task_id"])
        if key not in openings:
            loaded = load_domain(row["domain"], data_version=data_version)
            loop = TurnLoop(loaded, loaded.task(row["task_id"]))
            loop.start()
            openings[key] = len(loop.agent_messages())
        try:
            ids, mask = renderer.episode_ids(row["messages"], json.loads(row["tools"]), first_policy=openings[key])
        except ValueError as exc:  # no policy turn (e.g. ended during reset): nothing to train on
            if "no policy turn" in str(exc):
                continue
            raise
        out.append({"input_ids": ids, "assistant_masks": mask,
                    **{k: v for k, v in row.items() if k not in ("messages", "tools")}})
    return out


def export_dataset(paths: Iterable[str | os.PathLike[str]], output: str | os.PathLike[str], *,
                   format: str = "messages", tokenizer: Any = None, chat_template: Optional[str] = None,
                   **kwargs: Any):
    """Write :func:`export_rows` (``format="messages"``) or their :func:`tokenize_rows` (``"tokens"``, needs
    ``tokenizer``: an object or a local path) as a ``datasets.Dataset`` to ``output`` and return it."""
    import datasets

    if format not in ("messages", "tokens"):
        raise ExportError(f"unknown export format {format!r}; formats: messages, tokens")
    if format == "tokens" and tokenizer is None:
        raise ExportError("the tokens format needs a tokenizer (a local path or a tokenizer object)")
    rows = export_rows(paths, **kwargs)
    if format == "tokens":
        rows = tokenize_rows(rows, tokenizer, chat_template=chat_template, data_version=kwargs.get("data_version"))
    if not rows:
        raise ExportError("no simulation passed the filters; nothing to export")
    ds = datasets.Dataset.from_list(rows)
    ds.save_to_disk(str(output))
    return ds
