"""NL-assertion judges: none, an OpenAI-compatible endpoint, or a local Hugging Face model.

Every judge sees the same two messages upstream's NL evaluator sends -- its system prompt and its
``conversation: ... expectedOutcomes: ...`` user message, both read at run time from the upstream sources
(``evaluator/evaluator_nl_assertions.py``) with ``ast`` -- and its reply is parsed like upstream's: plain
``json.loads``, then each item of ``results`` becomes one check. Without sources our own short prompt
stands in (one warning).

Judges are built from small config dataclasses or from a one-line spec (``--judge`` on the command line)::

    fail | pass | exclude        (no judge: count NL-judged tasks as failed / passed, or leave them out)
    openai:gpt-4.1-2025-04-14
    openai:my-model,base_url=http://localhost:8000/v1,api_key_env=MY_KEY,max_retries=5,backoff_base=2
    hf:Qwen/Qwen2.5-0.5B-Instruct,device=cpu,max_new_tokens=512

Failures never become a score: a judge that cannot answer, or answers something unparseable, raises
:class:`JudgeError` (an :class:`~tau2_gym.scoring.evaluation.EvaluationError`).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Union, cast

from tau2_gym.core import upstream_text as prose
from tau2_gym.core.results_file import NLAssertionCheck
from tau2_gym.core.warn import warn
from tau2_gym.data import DataSource
from tau2_gym.llm.client import ChatClient, LLMConfig, LLMError, reply_message
from tau2_gym.scoring.evaluation import NO_JUDGE_CHOICES, EvaluationError, needs_nl_judge

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

NL_MODULE = "evaluator/evaluator_nl_assertions.py"
NL_CLASS = "NLAssertionsEvaluator"
NL_FUNCTION = "evaluate_nl_assertions"
UPSTREAM_DEFAULT_MODEL = "gpt-4.1-2025-04-14"

# Our own stand-ins, used only when the upstream sources are not available.
_OWN_SYSTEM = (
    "You grade a recorded conversation between a customer-service agent and a customer against a list of "
    "expected outcomes, one by one. Answer with a JSON object only: "
    '{"results": [{"expectedOutcome": "<the outcome>", "reasoning": "<short reason>", '
    '"metExpectation": true or false}]}'
)
_OWN_USER = "conversation:\n{trajectory_str}\n\nexpectedOutcomes:\n{nl_assertions}\n"


class JudgeError(EvaluationError):
    """The NL judge could not give a usable verdict (endpoint down, bad reply, missing package or key)."""


# ------------------------------------------------------------------------------------ prompts


def _upstream_templates(source: Optional[DataSource]) -> Optional[tuple[prose.StringTemplate, prose.StringTemplate]]:
    strings = prose.function_strings(source.src if source is not None else None, NL_MODULE, NL_FUNCTION, NL_CLASS)
    if not strings or "system_prompt" not in strings or "user_prompt" not in strings:
        return None
    system, user = strings["system_prompt"], strings["user_prompt"]
    if system.names or not set(user.names) <= {"trajectory_str", "nl_assertions"}:
        return None
    return system, user


def judge_prompts(
    messages: Iterable[Any], nl_assertions: list[str], source: Optional[DataSource] = None
) -> tuple[str, str]:
    """(system, user) texts of the NL judge call, byte-identical to upstream's when sources are present."""
    trajectory_str = "\n".join(f"{m.role}: {m.content}" for m in messages)
    templates = _upstream_templates(source)
    if templates is None:
        prose.warn_fallback("the NL-assertion judge prompt")
        return _OWN_SYSTEM, _OWN_USER.format(trajectory_str=trajectory_str, nl_assertions=nl_assertions)
    system, user = templates
    return system.render(), user.render(trajectory_str=trajectory_str, nl_assertions=nl_assertions)


def parse_judge_reply(text: Any) -> list[dict[str, Any]]:
    """Checks from a judge reply, with upstream's rules: ``json.loads`` as is (a fenced reply fails), items
    of ``results`` (missing -> none: an empty list passes), fields validated as str / bool / str."""

    try:
        data = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise JudgeError(f"judge reply is not JSON ({exc}); reply starts: {str(text)[:200]!r}") from exc
    if not isinstance(data, dict):
        raise JudgeError(f"judge reply must be a JSON object with 'results'; got {type(data).__name__}")
    out = []
    for item in data.get("results", []):
        try:
            check = NLAssertionCheck.model_validate(
                {
                    "nl_assertion": item["expectedOutcome"],
                    "met": item["metExpectation"],
                    "justification": item["reasoning"],
                }
            )
        except (KeyError, TypeError) as exc:
            raise JudgeError(f"judge result item lacks {exc}; item: {str(item)[:200]!r}") from exc
        except ValueError as exc:  # pydantic ValidationError
            raise JudgeError(f"judge result item does not validate: {exc}") from exc
        out.append(check.model_dump())
    return out


# ------------------------------------------------------------------------------------ judges


class Judge:
    """Base judge: build upstream's prompt, ask :meth:`complete`, parse the reply."""

    name = "judge"
    skip = False

    def complete(self, system: str, user: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def assess(
        self, messages: list[Any], nl_assertions: list[str], source: Optional[DataSource] = None
    ) -> list[dict[str, Any]]:
        system, user = judge_prompts(messages, nl_assertions, source)
        try:
            reply = self.complete(system, user)
        except JudgeError:
            raise
        except Exception as exc:
            raise JudgeError(f"judge {self.name!r} failed: {type(exc).__name__}: {exc}") from exc
        return parse_judge_reply(reply)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class NoneJudge(Judge):
    """No judging. Tasks whose reward needs NL assertions are scored as failed (``counts_as="fail"``, the
    default), as passed (``"pass"``), or left out of task pools (``"exclude"``; scored as failed if one is
    scored anyway); ``reward_info["info"]["nl"]`` says so. ``explicit`` is False for the default (None /
    ``"none"``), which warns where such tasks are in play."""

    skip = True

    def __init__(self, counts_as: str = "fail", explicit: bool = False) -> None:
        if counts_as not in NO_JUDGE_CHOICES:
            raise ValueError(f"counts_as={counts_as!r}; choose one of {NO_JUDGE_CHOICES}")
        self.counts_as = counts_as
        self.explicit = explicit
        self.name = counts_as if explicit else "none"

    def assess(
        self,
        messages: list[Any],  # noqa: ARG002 - Judge.assess's signature
        nl_assertions: list[str],  # noqa: ARG002 - Judge.assess's signature
        source: Optional[DataSource] = None,  # noqa: ARG002 - Judge.assess's signature
    ) -> list[dict[str, Any]]:
        raise JudgeError("no judge is configured; the evaluator scores NL assertions by the no-judge choice instead")


def no_judge_warning(where: str, needing: int, total: int) -> str:
    """The construction-time message when tasks that need a judge meet the default (no judge, fail)."""
    return (
        f"{where}: {needing} of {total} tasks need an NL-assertion judge for their reward and no judge is "
        "configured: they are scored as failed (NL factor 0). Choose judge='openai:MODEL[,base_url=...]' or "
        "'hf:MODEL' to grade them, judge='pass' to count them as passed, judge='exclude' to leave them out, "
        "or judge='fail' to keep this default without this warning."
    )


class CallableJudge(Judge):
    """A judge backed by any function ``(system, user) -> reply text`` (custom backends, tests)."""

    def __init__(self, fn: Callable[[str, str], str], name: str = "callable") -> None:
        self.fn = fn
        self.name = name

    def complete(self, system: str, user: str) -> str:
        return self.fn(system, user)


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass
class NoneJudgeConfig:
    """No judge: NL-judged tasks count as failed (default), as passed, or are left out (reward_info.info notes it)."""

    counts_as: str = field(default="fail", metadata=_help("fail | pass | exclude"))
    explicit: bool = field(default=True, metadata=_help("False for the default, which warns where it matters"))

    def build(self) -> NoneJudge:
        return NoneJudge(self.counts_as, self.explicit)


@dataclass
class OpenAIJudgeConfig(LLMConfig):
    """An OpenAI-compatible endpoint (OpenAI, vLLM, SGLang, LiteLLM proxy, ...) through tau2_gym.llm.client."""

    model: str = field(default=UPSTREAM_DEFAULT_MODEL, metadata=_help("model name sent to the endpoint"))

    def build(self) -> OpenAIJudge:
        return OpenAIJudge(self)


@dataclass
class HFJudgeConfig:
    """A local Hugging Face causal LM run with transformers (greedy decoding, the model's chat template)."""

    model: str = field(default="", metadata=_help("model id on the Hub or a local folder"))
    device: Optional[str] = field(default=None, metadata=_help("torch device (default: cuda if available, else cpu)"))
    dtype: str = field(default="auto", metadata=_help("torch dtype name, or 'auto'"))
    max_new_tokens: int = field(default=1024, metadata=_help("generation budget of one verdict"))

    def build(self) -> HFJudge:
        if not self.model:
            raise JudgeError("hf judge needs a model: hf:<model id or folder>")
        return HFJudge(self)


JudgeConfig = Union[NoneJudgeConfig, OpenAIJudgeConfig, HFJudgeConfig]
#: what :func:`make_judge` accepts: None (no judge), a spec string, a config, or a judge
JudgeSpec = Union[None, str, JudgeConfig, Judge]
_KINDS: dict[str, type[Union[OpenAIJudgeConfig, HFJudgeConfig]]] = {"openai": OpenAIJudgeConfig, "hf": HFJudgeConfig}


def config_help(cls: type[DataclassInstance]) -> str:
    """One line per field: name, default, help -- what ``--judge help`` prints."""
    lines = [f"{cls.__name__}: {(cls.__doc__ or '').strip()}"]
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = "(required)"
        lines.append(f"  {f.name} = {default!r}: {f.metadata.get('help', '')}")
    return "\n".join(lines)


def judge_specs_help() -> str:
    return (
        "--judge fail | pass | exclude | openai:MODEL[,key=value...] | hf:MODEL[,key=value...]\n"
        "  fail (the default, 'none'): tasks whose reward needs NL assertions score 0, with a warning; pass: they\n"
        "  count as passed; exclude: they are left out of task pools and summaries\n"
        + "\n".join(config_help(c) for c in _KINDS.values())
    )


def _coerce(value: str, annotation: Any) -> Any:
    text = str(annotation)
    if text.startswith("dict"):
        raise ValueError("a mapping cannot be given in a judge spec; build the config in Python")
    if "float" in text:
        return float(value)
    if "int" in text:
        return int(value)
    return value


def parse_judge_spec(spec: str) -> JudgeConfig:
    """``none`` | ``openai:MODEL[,k=v...]`` | ``hf:MODEL[,k=v...]`` -> a config (errors say what is valid)."""
    spec = (spec or "none").strip()
    if spec.lower() == "none":
        return NoneJudgeConfig(explicit=False)
    if spec.lower() in NO_JUDGE_CHOICES:
        return NoneJudgeConfig(counts_as=spec.lower())
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in _KINDS:
        raise ValueError(f"unknown judge {spec!r}; use {' | '.join([*NO_JUDGE_CHOICES, 'openai:MODEL', 'hf:MODEL'])}")
    cls = _KINDS[kind]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for i, item in enumerate(p for p in rest.split(",") if p.strip()):
        key, eq, value = item.partition("=")
        if not eq:
            if i != 0:
                raise ValueError(f"judge option {item!r} must be key=value")
            key, value = "model", item
        key = key.strip()
        if key not in fields:
            raise ValueError(f"unknown option {key!r} for the {kind} judge; options: {sorted(fields)}")
        try:
            kwargs[key] = _coerce(value.strip(), fields[key].type)
        except ValueError as exc:
            raise ValueError(f"judge option {key}={value!r}: {exc}") from None
    return cls(**kwargs)


def make_judge(spec: JudgeSpec) -> Judge:
    """A judge from a spec string, a config, an existing judge, or None (= no judge: fail, with a warning)."""
    if spec is None:
        return NoneJudge()
    if isinstance(spec, Judge) or hasattr(spec, "assess"):  # a judge, or any object with the judge's method
        return cast(Judge, spec)
    if isinstance(spec, str):
        spec = parse_judge_spec(spec)
    return spec.build()


def apply_no_judge_choice(domain: Any, tasks: Any, judge: Any, where: str) -> tuple:
    """A task pool under the no-judge choice: ``exclude`` drops the tasks that need a judge; the default
    (no judge, not chosen explicitly) warns once with the count and the choices. Real judges change nothing."""

    tasks = tuple(tasks)
    if not getattr(judge, "skip", False):
        return tasks
    needing = [t for t in tasks if needs_nl_judge(domain, t)]
    if not needing:
        return tasks
    if judge.counts_as == "exclude":
        kept = tuple(t for t in tasks if not needs_nl_judge(domain, t))
        if not kept:
            raise ValueError(f"{where}: judge='exclude' leaves no task: all {len(tasks)} need an NL-assertion judge")
        return kept
    if not judge.explicit:
        warn(no_judge_warning(where, len(needing), len(tasks)))
    return tasks


# ------------------------------------------------------------------------------------ OpenAI


class OpenAIJudge(Judge):
    """Chat completions at temperature 0, no JSON mode (as upstream), through the package's one LLM client
    (:class:`~tau2_gym.llm.client.ChatClient`): its retries, backoff and reply cache apply."""

    def __init__(self, config: OpenAIJudgeConfig) -> None:
        self.config = config
        self.name = f"openai:{config.model}"
        # the same cache (and key rule) as the user simulator: a re-evaluation asks nothing twice
        self.client = ChatClient(config, who="judge")

    def cache_stats(self) -> dict[str, Any]:
        """Hits, misses and replies stored by this judge's cache (``on`` False without one)."""
        return self.client.cache_stats()

    def _text(self, raw: dict) -> str:
        content = reply_message(raw).get("content")
        if content is None:
            raise JudgeError(f"{self.name} answered without text content")
        return content

    def complete(self, system: str, user: str) -> str:
        if self.client.api_key() is None and self.config.base_url is None:
            raise JudgeError(
                f"the openai judge needs an API key in ${self.config.api_key_env} "
                "(or a base_url of a local endpoint that needs none)"
            )
        request = self.client.request_kwargs([{"role": "system", "content": system}, {"role": "user", "content": user}])
        try:
            return self.client.complete(request, self._text).value
        except LLMError as exc:
            raise JudgeError(
                f"{self.name} at {exc.where} failed after {exc.attempts} attempt(s): {exc.reason}"
            ) from exc

    def close(self) -> None:
        self.client.close()


# ------------------------------------------------------------------------------------ Hugging Face


class HFJudge(Judge):
    """A local causal LM; the model is loaded on first use (transformers and torch are optional extras)."""

    def __init__(self, config: HFJudgeConfig) -> None:
        self.config = config
        self.name = f"hf:{config.model}"
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        if self._model is not None:
            return
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:
            raise JudgeError("the hf judge needs transformers and torch: pip install 'tau2-gym[hf]'") from exc
        device = self.config.device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype: Any = "auto" if self.config.dtype == "auto" else getattr(torch, self.config.dtype)
        try:
            self._tokenizer = AutoTokenizer.from_pretrained(self.config.model)
            try:
                model = AutoModelForCausalLM.from_pretrained(self.config.model, dtype=dtype)
            except TypeError:  # transformers < 4.56 calls it torch_dtype
                model = AutoModelForCausalLM.from_pretrained(self.config.model, torch_dtype=dtype)
        except Exception as exc:
            raise JudgeError(f"cannot load the hf judge model {self.config.model!r}: {exc}") from exc
        self._model = model.to(device).eval()
        self._device = device

    def complete(self, system: str, user: str) -> str:
        self._load()
        import torch

        tok = self._tokenizer
        chat = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        if getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
            input_ids, mask = ids["input_ids"], ids.get("attention_mask")
        else:  # a base model: plain concatenation
            enc = tok(system + "\n\n" + user + "\n", return_tensors="pt")
            input_ids, mask = enc["input_ids"], enc.get("attention_mask")
        input_ids = input_ids.to(self._device)
        if mask is not None:
            mask = mask.to(self._device)
        with torch.no_grad():
            out = self._model.generate(
                input_ids=input_ids,
                attention_mask=mask,
                do_sample=False,
                max_new_tokens=self.config.max_new_tokens,
                pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id,
            )
        return tok.decode(out[0, input_ids.shape[1] :], skip_special_tokens=True)


__all__ = [
    "Judge",
    "NoneJudge",
    "CallableJudge",
    "OpenAIJudge",
    "HFJudge",
    "JudgeError",
    "NoneJudgeConfig",
    "OpenAIJudgeConfig",
    "HFJudgeConfig",
    "parse_judge_spec",
    "make_judge",
    "JudgeSpec",
    "judge_prompts",
    "parse_judge_reply",
    "config_help",
    "judge_specs_help",
    "no_judge_warning",
    "apply_no_judge_choice",
]
