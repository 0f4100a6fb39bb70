"""SFT export: tau2 results files -> a Hugging Face ``datasets`` dataset in TRL's conversational format.

Why here: training on results needs the same system prompt and tool schemas the env shows, and a split filter so
that no test task leaks into training data. Two formats: ``messages`` (TRL's conversational rows, assistant turns
with their ``reasoning_content``; the trainer applies the chat template) and ``tokens`` (``input_ids`` +
``assistant_masks``, rendered by :meth:`tau2_gym.training.hf.chat.ChatRenderer.episode_ids` -- the construction the
GRPO rollout uses -- so SFT and GRPO train on the same token contexts). For a template that does not keep a
generated turn as the next prompt's prefix (Qwen3's drops past reasoning; found by rendering, as the rollout
does) the tokens format has one row per policy turn instead: the template's rendering of the observation the
policy saw (under the run's ``reasoning_history``) as prompt, the turn as the template writes it -- reasoning
included -- as the masked completion; every row of an episode carries the episode's reward.

The split guard (:func:`training_split`) lives here too, shared by the TRL dataset builder and rollout
function: training helpers default to ``train`` and refuse ``test`` tasks unless ``allow_test_split=True``.
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterable, Optional

from tau2_gym.core.domain import load_domain
from tau2_gym.core.messages import REASONING_KEY, AssistantMessage, to_openai_messages
from tau2_gym.core.prompts import agent_system_prompt
from tau2_gym.core.results_file import ResultsFileError, load_results
from tau2_gym.episodes.driver import EpisodeSetup
from tau2_gym.training.hf.chat import (
    PER_TURN,
    SAMPLE_MODES,
    ChatRenderer,
    TemplateError,
    observed_messages,
    resolve_sample_mode,
    stop_token_ids,
)


class ExportError(ValueError):
    """A results file cannot be exported (missing, malformed, or an unsupported request)."""


class SplitGuardError(ExportError):
    """Training data or training episodes would include tasks of a held-out split (``test``, or a generated set's
    ``held_out``)."""


#: The metadata columns an export adds beside the training columns (drop them before handing rows to a trainer).
METADATA_COLUMNS = ("reward", "task_id", "domain", "split", "data_version", "reasoning_history")
#: ... and those the tokens format adds: how the episode was cut into samples, and which policy turn a row is
TOKEN_METADATA_COLUMNS = (*METADATA_COLUMNS, "sample_mode", "turn")

ALL_TASKS = "all"  # the split name recorded when no split filter applies
#: the splits no training helper takes tasks from: the benchmark's test split and a generated set's held-out split
HELD_OUT_SPLITS = ("test", "held_out")


def held_out_ids(splits: dict) -> set[str]:
    """The task ids of the held-out splits (:data:`HELD_OUT_SPLITS`) of a split table."""
    return {str(i) for name in HELD_OUT_SPLITS for i in splits.get(name, ())}


def training_split(
    loaded: Any, split: Optional[str] = "train", *, task_set: Optional[str] = None, allow_test_split: bool = False
) -> tuple[tuple[str, ...], str]:
    """The task ids a training helper may use, and the split name to record with them.

    The guard behind every training helper (export, the TRL dataset builder and rollout function): the default
    is the ``train`` split; any selection holding a task of a held-out split (the benchmark's ``test``, a generated
    set's ``held_out``) -- such a split itself, ``None`` (all tasks) or a split that overlaps it, such as ``"base"``
    -- is refused unless ``allow_test_split=True``. A domain without ``train`` and ``test`` splits (mock) holds
    nothing out, so ``"train"`` means all of its tasks (recorded as ``"all"``).
    """
    name = loaded.spec.name
    splits = loaded.splits(task_set)
    all_ids = tuple(t.id for t in loaded.tasks(task_set, None))
    test = held_out_ids(splits)
    if split is None or (split == "train" and "train" not in splits and not test):
        ids, recorded = all_ids, ALL_TASKS
    elif split in splits:
        wanted = set(splits[split])
        ids, recorded = tuple(i for i in all_ids if i in wanted), split
    else:
        raise SplitGuardError(f"domain {name!r} has no task split {split!r}; splits: {sorted(splits)}")
    check_not_test(
        loaded,
        ids,
        task_set=task_set,
        allow_test_split=allow_test_split,
        what=f"split {recorded!r}" if recorded != ALL_TASKS else "all tasks",
    )
    return ids, recorded


def check_not_test(
    loaded: Any,
    task_ids: Iterable[str],
    *,
    task_set: Optional[str] = None,
    allow_test_split: bool = False,
    what: str = "the selected tasks",
) -> None:
    """Raise :class:`SplitGuardError` when any of ``task_ids`` is a ``test``-split task (unless allowed)."""
    if allow_test_split:
        return
    splits = loaded.splits(task_set)
    test = held_out_ids(splits)
    leaked = [str(i) for i in task_ids if str(i) in test]
    if leaked:
        shown = ", ".join(repr(i) for i in leaked[:5]) + (", ..." if len(leaked) > 5 else "")
        raise SplitGuardError(
            f"{what} of domain {loaded.spec.name!r} include {len(leaked)} task(s) of the held-out "
            f"{' / '.join(repr(n) for n in HELD_OUT_SPLITS if n in splits)} split "
            f"({shown}); train on split='train', or pass allow_test_split=True (CLI: --allow-test-split) if you "
            "really mean to train on test tasks"
        )


def export_rows(
    paths: Iterable[str | os.PathLike[str]],
    *,
    split: Optional[str] = "train",
    min_reward: Optional[float] = None,
    domain: Optional[str] = None,
    data_version: Optional[str] = None,
    allow_test_split: bool = False,
    data_dir: Optional[str] = None,
) -> list[dict[str, Any]]:
    """Rows of the ``messages`` format: system prompt + conversation (OpenAI messages; an assistant turn's
    reasoning as its ``reasoning_content``), ``tools`` as a JSON string of schemas, ``reward``, ``task_id``,
    ``domain``, ``split`` (what the filter kept: see :func:`training_split`), ``data_version``,
    ``reasoning_history`` (the run's; ``"drop"`` for files that do not say). Unscored runs are dropped.
    ``split=None`` keeps every task; a selection with ``test``-split tasks is refused unless
    ``allow_test_split=True``. ``data_dir``: the data folder the runs were made on, when it is not the default data
    (e.g. generated tasks)."""

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
            domains[name] = load_domain(name, data_dir, data_version)
        loaded = domains[name]
        ids, recorded = training_split(loaded, split, allow_test_split=allow_test_split)
        keep = set(ids)
        system = agent_system_prompt(loaded.source, loaded.policy())
        tools = json.dumps(list(loaded.agent_tool_schemas()))
        version = json.dumps(loaded.data_version_record(), sort_keys=True)
        history = results.info.reasoning_history or "drop"
        for sim in results.simulations:
            if sim.reward_info is None or sim.task_id not in keep:
                continue
            reward = float(sim.reward_info.reward)
            if min_reward is not None and reward < min_reward:
                continue
            conversation = to_openai_messages(sim.messages)
            for msg, out in zip(sim.messages, conversation):
                if isinstance(msg, AssistantMessage) and msg.reasoning is not None:
                    out[REASONING_KEY] = msg.reasoning
            messages = [{"role": "system", "content": system}] + conversation
            rows.append(
                {
                    "messages": messages,
                    "tools": tools,
                    "reward": reward,
                    "task_id": sim.task_id,
                    "domain": name,
                    "split": recorded,
                    "data_version": version,
                    "reasoning_history": history,
                }
            )
    return rows


def load_tokenizer(tokenizer: Any) -> Any:
    """A tokenizer object as is, or ``AutoTokenizer.from_pretrained`` of a local path / hub name."""
    if isinstance(tokenizer, (str, os.PathLike)):
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(str(tokenizer))
    return tokenizer


def tokenize_rows(
    rows: Iterable[dict[str, Any]],
    tokenizer: Any,
    *,
    chat_template: Optional[str] = None,
    chat_template_kwargs: Optional[dict[str, Any]] = None,
    data_version: Optional[str] = None,
    data_dir: Optional[str] = None,
    sample_mode: str = "auto",
) -> list[dict[str, Any]]:
    """``messages`` rows -> ``tokens`` rows: ``input_ids`` and ``assistant_masks`` (1 exactly on the policy's
    tokens, each turn through its end-of-turn token) plus the rows' metadata, ``sample_mode`` and ``turn``. The
    greeting and any task history before the policy's first turn are prompt (mask 0), as in the rollout's first
    observation. ``sample_mode``: ``"sequence"`` (one row per episode), ``"per_turn"`` (one row per policy turn,
    ``turn`` its index) or ``"auto"`` (per turn exactly when the template does not keep a generated turn as the
    next prompt's prefix under the row's ``reasoning_history``, as the GRPO rollout decides)."""
    if sample_mode not in SAMPLE_MODES:
        raise ExportError(f"unknown sample mode {sample_mode!r}; modes: {', '.join(SAMPLE_MODES)}")
    tok = load_tokenizer(tokenizer)
    try:
        renderer = ChatRenderer(
            tok, stop_ids=stop_token_ids(tok), chat_template=chat_template, chat_template_kwargs=chat_template_kwargs
        )
    except TemplateError as exc:
        raise ExportError(f"cannot render with this tokenizer: {exc}") from exc
    openings: dict[tuple[str, str], int] = {}
    modes: dict[str, str] = {}
    out = []
    for row in rows:
        key = (row["domain"], row["task_id"])
        if key not in openings:
            loaded = load_domain(row["domain"], data_dir, data_version)
            openings[key] = len(EpisodeSetup(loaded).start(loaded.task(row["task_id"])).agent_messages())
        history = row.get("reasoning_history") or "drop"
        if history not in modes:
            modes[history] = resolve_sample_mode(sample_mode, renderer, None, history)
        meta = {k: v for k, v in row.items() if k not in ("messages", "tools")}
        tools = json.loads(row["tools"])
        if modes[history] == PER_TURN:
            for turn, (ids, mask) in enumerate(_turn_rows(renderer, row["messages"], tools, openings[key], history)):
                out.append({"input_ids": ids, "assistant_masks": mask, **meta, "sample_mode": PER_TURN, "turn": turn})
            continue
        try:
            ids, mask = renderer.episode_ids(row["messages"], tools, first_policy=openings[key])
        except ValueError as exc:  # no policy turn (e.g. ended during reset): nothing to train on
            if "no policy turn" in str(exc):
                continue
            raise
        out.append({"input_ids": ids, "assistant_masks": mask, **meta, "sample_mode": modes[history], "turn": None})
    return out


def _turn_rows(
    renderer: ChatRenderer, messages: list[dict], tools: list[dict], first_policy: int, history: str
) -> list[tuple[list[int], list[int]]]:
    """One (input_ids, assistant_masks) per policy turn: the observation before it as the policy saw it, rendered
    with the generation prompt (mask 0), then the turn as the template writes it, reasoning included (mask 1)."""
    out = []
    for j, msg in enumerate(messages):
        if msg.get("role") != "assistant" or j < first_policy:
            continue
        seen = observed_messages(messages[:j], history)
        prompt = renderer.prompt_ids(seen, tools)
        own = renderer.assistant_ids(seen + [msg], len(seen) + 1, tools)
        out.append((prompt + own, [0] * len(prompt) + [1] * len(own)))
    return out


def export_dataset(
    paths: Iterable[str | os.PathLike[str]],
    output: str | os.PathLike[str],
    *,
    format: str = "messages",
    tokenizer: Any = None,
    chat_template: Optional[str] = None,
    sample_mode: str = "auto",
    **kwargs: Any,
):
    """Write :func:`export_rows` (``format="messages"``) or their :func:`tokenize_rows` (``"tokens"``, needs
    ``tokenizer``: an object or a local path; ``sample_mode`` as there) as a ``datasets.Dataset`` to ``output`` and
    return it."""
    if format not in ("messages", "tokens"):
        raise ExportError(f"unknown export format {format!r}; formats: messages, tokens")
    if format == "tokens" and tokenizer is None:
        raise ExportError("the tokens format needs a tokenizer (a local path or a tokenizer object)")
    rows = export_rows(paths, **kwargs)  # input and split errors first, whatever is installed
    try:
        import datasets
    except ImportError:
        raise ExportError(
            "writing a dataset needs the datasets package: pip install 'tau2-gym[trl]' "
            "(or export_rows() for plain rows)"
        ) from None
    if format == "tokens":
        rows = tokenize_rows(
            rows,
            tokenizer,
            chat_template=chat_template,
            data_version=kwargs.get("data_version"),
            data_dir=kwargs.get("data_dir"),
            sample_mode=sample_mode,
        )
    if not rows:
        raise ExportError("no simulation passed the filters; nothing to export")
    ds = datasets.Dataset.from_list(rows)
    ds.save_to_disk(str(output))
    return ds
