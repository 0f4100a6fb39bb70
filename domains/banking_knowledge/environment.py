"""The banking_knowledge domain spec: DB, tasks (one file per task), retrieval configuration, per-task setup.

* **DB**: ``db.json`` (the ``TransactionalDB``); agent and customer tools share one DB object, as upstream's
  (so the agent and user DB hashes are the same hash).
* **Tasks**: ``tasks/task_*.json`` in file-name order -- what upstream loads (``tasks.json`` beside them is an
  older copy that differs in 13 tasks). Splits are tau2-gym's own (upstream has none): ``base`` = all 97,
  ``test`` = the 20 % of ids first in sha256 order, ``train`` = the rest.
* **Options** (``load_domain(..., options={...})``, env ``retrieval_config=``): ``retrieval_config`` (default
  ``bm25_grep``; see :mod:`.retrieval`) and upstream's retrieval knobs ``top_k``, ``grep_top_k``,
  ``case_sensitive``.
* **Per task**: the read allowlist -- read-only discoverable tools the task's gold actions call are logged in
  the DB when the agent calls them (upstream's ``_derive_read_log_allowlist``), so required reads still count
  while other reads leave the hash alone; ``golden_retrieval`` puts the task's documents in its policy.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from tau2_gym.core import upstream_text as _prose
from tau2_gym.core.db import DBSchema
from tau2_gym.core.domain import DBFile, DomainSpec, TaskSetSpec
from tau2_gym.core.environment import Environment
from tau2_gym.core.tasks import Task
from tau2_gym.core.tools import ProseSource
from tau2_gym.core.warn import warn
from tau2_gym.data import DataError, DataSource
from tau2_gym.domains.banking_knowledge import retrieval as R
from tau2_gym.domains.banking_knowledge.data_model import Document, TransactionalDB, load_documents
from tau2_gym.domains.banking_knowledge.discoverable import TOOLS_MODULE, upstream_docstrings
from tau2_gym.domains.banking_knowledge.search import KnowledgeIndex
from tau2_gym.domains.banking_knowledge.tools import KnowledgeTools
from tau2_gym.domains.banking_knowledge.user_tools import KnowledgeUserTools

DATA_FOLDER = "banking_knowledge"
TEST_FRACTION = 0.2

# ------------------------------------------------------------------------------------------ tasks


@lru_cache(maxsize=8)
def _read_tasks(folder: str, stamp: tuple) -> tuple[Task, ...]:  # noqa: ARG001 - the cache key: changed files are read again
    tasks = []
    for path in sorted(Path(folder).glob("task_*.json")):
        try:
            with open(path, encoding="utf-8") as fh:
                tasks.append(Task.model_validate(json.load(fh)))
        except Exception as exc:  # noqa: BLE001 - upstream skips a task file it cannot load, with a warning
            warn(f"banking_knowledge: task file {str(path)!r} skipped, it does not load: {exc}")
    return tuple(tasks)


def load_tasks(folder: Path) -> tuple[Task, ...]:
    """Every ``task_*.json`` of ``folder`` in name order (parsed once per process and folder state)."""
    if not folder.is_dir():
        return ()
    stamp = tuple((p.name, p.stat().st_mtime_ns) for p in sorted(folder.glob("task_*.json")))
    return _read_tasks(str(folder), stamp)


def splits(tasks: tuple[Task, ...]) -> dict[str, tuple[str, ...]]:
    """tau2-gym's deterministic split (not upstream's: it has none)."""
    ids = [t.id for t in tasks]
    ranked = sorted(ids, key=lambda i: hashlib.sha256(f"banking_knowledge:{i}".encode()).hexdigest())
    test = set(ranked[: round(len(ids) * TEST_FRACTION)])
    return {
        "base": tuple(ids),
        "train": tuple(i for i in ids if i not in test),
        "test": tuple(i for i in ids if i in test),
    }


def read_log_allowlist(task: Task) -> set[str]:
    """Discoverable tools the task's gold actions call through ``call_discoverable_agent_tool``."""
    out: set[str] = set()
    if task.evaluation_criteria is None:
        return out
    for action in task.evaluation_criteria.actions or []:
        if action.name == "call_discoverable_agent_tool":
            name = (action.arguments or {}).get("agent_tool_name")
            if name:
                out.add(name)
    return out


def prepare(env: Environment, task: Task) -> None:
    if isinstance(env.tools, KnowledgeTools):
        env.tools.set_read_log_allowlist(read_log_allowlist(task))
        env.tools.reference_free = env.reference_free  # the listing then shows every call, not the allowlisted log


# ------------------------------------------------------------------------------------------ binding

_kb_lock = threading.Lock()
_kb_cache: dict[str, tuple[dict[str, Document], KnowledgeIndex]] = {}


def knowledge_base(source: DataSource) -> tuple[dict[str, Document], KnowledgeIndex]:
    """The documents and their search index (one per data folder and process)."""
    folder = source.domain_dir(DATA_FOLDER) / "documents"
    key = str(folder)
    with _kb_lock:
        if key not in _kb_cache:
            docs = load_documents(folder)
            if not docs:
                raise DataError(
                    f"domain 'banking_knowledge': no documents in {str(folder)!r} (the knowledge base); "
                    "run `tau2-gym data verify` / `tau2-gym data fetch` to repair the data"
                )
            _kb_cache[key] = (docs, KnowledgeIndex(docs))
        return _kb_cache[key]


def deposit_scans(src: Optional[Path]) -> Optional[dict[str, dict[str, str]]]:
    """The ATM envelope scans upstream's ``get_atm_deposit_images_8473`` holds inline, read from its source."""
    path = None if src is None else src / TOOLS_MODULE
    if path is None or not path.is_file():
        _prose.warn_fallback(
            "the ATM deposit scans of get_atm_deposit_images_8473",
            "the data folder has no tau2 sources beside it; that tool reports no images",
        )
        return None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "get_atm_deposit_images_8473":
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Assign)
                    and len(sub.targets) == 1
                    and isinstance(sub.targets[0], ast.Name)
                    and sub.targets[0].id == "deposit_image_data"
                    and isinstance(sub.value, ast.Dict)
                ):
                    out: dict[Any, dict[Any, Any]] = {}  # the constants upstream's source holds (strings)
                    for k, v in zip(sub.value.keys, sub.value.values):
                        if not (isinstance(k, ast.Constant) and isinstance(v, ast.Dict)):
                            continue
                        out[k.value] = {
                            fk.value: fv.value
                            for fk, fv in zip(v.keys, v.values)
                            if isinstance(fk, ast.Constant) and isinstance(fv, ast.Constant)
                        }
                    return out
    return None


def _options(options: dict) -> tuple[str, dict[str, Any]]:
    opts = dict(options)
    name = opts.pop("retrieval_config", None) or R.DEFAULT_CONFIG
    extra = opts.pop("retrieval_kwargs", None) or {}
    opts.update(extra)
    return name, opts


def bind(spec: DomainSpec, source: DataSource, options: dict) -> DomainSpec:
    """The spec for one data source and retrieval configuration: toolkits with upstream's docstrings, search
    index and policy bound in."""
    name, overrides = _options(options)
    cfg = R.resolve(name, **overrides)
    docs, index = knowledge_base(source)
    if cfg.kb_search == "bm25":
        index.bm25()  # fail now, with the install hint, rather than at the first KB_search
    binding = (spec.name, source, dict(options))
    user_cls = type(
        "KnowledgeUserTools",
        (KnowledgeUserTools,),
        {
            "__module__": KnowledgeUserTools.__module__,
            "__qualname__": "KnowledgeUserTools",
            "_binding": binding,
            "_discoverable_docs": upstream_docstrings(source.src, "KnowledgeUserTools"),
        },
    )
    agent_cls = R.toolkit_for(
        KnowledgeTools,
        cfg,
        index,
        {
            "_discoverable_docs": upstream_docstrings(source.src, "KnowledgeTools"),
            "_binding": binding,
            "_deposit_scans": deposit_scans(source.src),
            "_user_toolkit": user_cls,
        },
    )
    prompts = source.domain_dir(DATA_FOLDER) / "prompts"

    def policy(src: DataSource, solo: bool) -> str:  # noqa: ARG001 - DomainSpec.policy's signature
        if cfg.prompt == "golden":
            return R.GOLDEN_PLACEHOLDER
        return R.build_policy(cfg, prompts, docs)

    def task_policy(src: DataSource, task: Task, solo: bool) -> str:  # noqa: ARG001 - DomainSpec.task_policy's signature
        return R.build_policy(cfg, prompts, docs, task)

    return dataclasses.replace(
        spec,
        agent_toolkit=agent_cls,
        user_toolkit=user_cls,
        policy=policy,
        task_policy=task_policy if cfg.prompt == "golden" else None,
        agent_prose=ProseSource(
            TOOLS_MODULE,
            ("domains/banking_knowledge/data_model.py",),
            upstream_class="KnowledgeTools",
            also=R.prose_classes(cfg),
        ),
        bind=None,
        extra={
            **spec.extra,
            "retrieval_config": cfg.name,
            "retrieval": cfg,
            # what upstream's results info records about the run's retrieval
            "results_info": {"retrieval_config": cfg.name, "retrieval_config_kwargs": overrides or None},
        },
    )


ENV_DOC = """Rho-Bank customer service: the policy lives in a 698-document knowledge base, many tools are hidden.

## Description
Customers ask about cards and accounts, dispute charges, order or activate cards, want a human. The
agent verifies identity and looks the customer up with its listed tools, but most actions are
*discoverable* tools: a document names them, the agent unlocks one (``unlock_discoverable_agent_tool``)
and calls it through ``call_discoverable_agent_tool`` with JSON arguments, or gives a customer-side tool to
the customer (``give_discoverable_user_tool``), who then calls it. Which documents the agent can reach
depends on the retrieval configuration. Shared rules are :class:`~tau2_gym.envs.tau2_env.Tau2Env`'s.

## Action Space
Text, or calls of the listed agent tools: the configuration's search tools (``KB_search`` = BM25 and/or
``grep``), ``transfer_to_human_agents``, ``get_current_time``, three user lookups, ``change_user_email``,
``get_referrals_by_user``, ``get_credit_card_transactions_by_user``, ``get_credit_card_accounts_by_user``,
``log_verification``, ``give_discoverable_user_tool``, ``unlock_discoverable_agent_tool``,
``call_discoverable_agent_tool``, ``list_discoverable_agent_tools``. The 44 discoverable agent tools (and
the customer's 4) are not listed (as upstream, they also answer when called by name).

## Observation Space
OpenAI chat messages (system prompt with the configuration's policy) or a transcript.

## Rewards
0 until the end, then upstream's reward: DB (87 tasks: the DB hash -- including the discoverable-tool
logs -- after replay equals the gold one), ACTION (9 tasks, e.g. the transfer reason), DB + NL_ASSERTION (1).

## Starting State
A task from ``task_split``: ``base`` (all 97), or tau2-gym's own deterministic ``train`` (78) / ``test``
(19) -- upstream has no split.

## Episode End
As :class:`Tau2Env`. No solo mode.

## Arguments
:class:`~tau2_gym.envs.config.Tau2EnvConfig`, plus ``retrieval_config`` (default ``"bm25_grep"``;
offline and exact to upstream: ``bm25``, ``bm25_grep``, ``grep_only``, ``full_kb``, ``golden_retrieval``,
``no_knowledge``; the embedding, reranker and shell configurations raise, naming what they need) and
``retrieval_kwargs`` (upstream's ``top_k``, ``grep_top_k``, ``case_sensitive``). Both end up in
``domain_options``; upstream's own default configuration, ``alltools``, needs an embeddings API.

## Version History
* v0: initial release (tau2-bench 1.0.1 data and grading rules).
"""

DOMAIN = DomainSpec(
    name="banking_knowledge",
    data_folder=DATA_FOLDER,
    agent_toolkit=KnowledgeTools,
    db=DBFile("db.json", DBSchema(TransactionalDB, name="TransactionalDB")),
    user_toolkit=KnowledgeUserTools,
    user_db_shared=True,
    policy=lambda source, solo: "",  # noqa: ARG005 - DomainSpec.policy's signature; replaced by bind()
    task_sets={"banking_knowledge": TaskSetSpec("tasks", default_split="base", loader=load_tasks, splits=splits)},
    default_task_set="banking_knowledge",
    solo_supported=False,
    solo_error="banking_knowledge domain does not support solo mode",
    agent_prose=ProseSource(
        TOOLS_MODULE, ("domains/banking_knowledge/data_model.py",), upstream_class="KnowledgeTools"
    ),
    user_prose=ProseSource(
        TOOLS_MODULE, ("domains/banking_knowledge/data_model.py",), upstream_class="KnowledgeUserTools"
    ),
    prepare=prepare,
    bind=bind,
    description="Rho-Bank customer service over a 698-document knowledge base, with discoverable tools "
    "(tau-knowledge).",
    env_doc=ENV_DOC,
    env_options=("retrieval_config", "retrieval_kwargs"),
)
