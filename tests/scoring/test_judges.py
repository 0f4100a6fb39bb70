"""NL judges: prompt texts, reply parsing, the OpenAI-compatible backend (against the local stub server),
retries and errors, the config/spec surface, and the local Hugging Face backend on a tiny model built here."""

from __future__ import annotations

import json

import pytest
from openai_stub import OpenAIStub

from tau2_gym import load_domain
from tau2_gym.core.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from tau2_gym.data import DataSource
from tau2_gym.scoring.evaluation import EvaluationError
from tau2_gym.scoring.judges import (
    CallableJudge,
    HFJudgeConfig,
    JudgeError,
    NoneJudge,
    OpenAIJudgeConfig,
    config_help,
    judge_prompts,
    judge_specs_help,
    make_judge,
    parse_judge_reply,
    parse_judge_spec,
)

ASSERTIONS = ["The agent greeted the user", "The agent's reply mentions 'refund'"]
TRAJ = [
    AssistantMessage(content="Hi! How can I help you today?"),
    UserMessage(content="I want a refund."),
    AssistantMessage(tool_calls=[ToolCall(name="get_order", arguments={"id": "1"}, id="c1")]),
    ToolMessage(id="c1", content='{"id": "1"}'),
]


def _verdict(*met: bool) -> str:
    return json.dumps(
        {
            "results": [
                {"expectedOutcome": a, "reasoning": f"because {i}", "metExpectation": m}
                for i, (a, m) in enumerate(zip(ASSERTIONS, met))
            ]
        }
    )


@pytest.fixture(scope="module")
def source():
    return load_domain("mock").source


# ------------------------------------------------------------------------------------ prompts / parsing


def test_prompt_carries_every_message_and_the_assertion_list(source):
    system, user = judge_prompts(TRAJ, ASSERTIONS, source)
    assert source.src is not None and "expectedOutcome" in system and "metExpectation" in system
    lines = [ln.strip() for ln in user.splitlines()]
    for expected in (
        "assistant: Hi! How can I help you today?",
        "user: I want a refund.",
        "assistant: None",
        'tool: {"id": "1"}',
    ):
        assert expected in lines
    assert user.index("conversation:") < user.index("expectedOutcomes:")
    assert repr(ASSERTIONS) in user  # the Python list repr, as upstream formats it


def test_prompt_falls_back_to_own_text_without_sources():
    bare = DataSource(root=load_domain("mock").source.root, src=None, origin="argument")
    with pytest.warns(UserWarning, match="NL-assertion judge prompt"):
        system, user = judge_prompts(TRAJ, ASSERTIONS, bare)
    assert "expectedOutcome" in system and repr(ASSERTIONS) in user and "user: I want a refund." in user


def test_reply_parsing_follows_upstream():
    assert parse_judge_reply(_verdict(True, False)) == [
        {"nl_assertion": ASSERTIONS[0], "met": True, "justification": "because 0"},
        {"nl_assertion": ASSERTIONS[1], "met": False, "justification": "because 1"},
    ]
    assert parse_judge_reply('{"results": []}') == [] and parse_judge_reply("{}") == []
    lax = json.dumps({"results": [{"expectedOutcome": "x", "reasoning": "r", "metExpectation": "true"}]})
    assert parse_judge_reply(lax)[0]["met"] is True  # pydantic's lax bool, as upstream's model
    with pytest.raises(JudgeError, match="not JSON"):
        parse_judge_reply("```json\n" + _verdict(True, True) + "\n```")  # fenced replies fail upstream too
    with pytest.raises(JudgeError, match="lacks"):
        parse_judge_reply(json.dumps({"results": [{"expectedOutcome": "x", "metExpectation": True}]}))
    with pytest.raises(JudgeError, match="does not validate"):
        parse_judge_reply(
            json.dumps({"results": [{"expectedOutcome": "x", "reasoning": "r", "metExpectation": "maybe"}]})
        )
    with pytest.raises(JudgeError):
        parse_judge_reply("[1, 2]")
    assert issubclass(JudgeError, EvaluationError)


# ------------------------------------------------------------------------------------ specs / configs


def test_specs_parse_into_configs():
    assert isinstance(make_judge("none"), NoneJudge) and isinstance(make_judge(None), NoneJudge)
    for spec, counts_as, explicit in [
        (None, "fail", False),
        ("none", "fail", False),
        ("fail", "fail", True),
        ("pass", "pass", True),
        ("exclude", "exclude", True),
    ]:
        judge = make_judge(spec)
        assert (judge.skip, judge.counts_as, judge.explicit) == (True, counts_as, explicit), spec
    cfg = parse_judge_spec("openai:my-model,base_url=http://h:1/v1,max_retries=5,backoff_base=0.5,api_key_env=K")
    assert cfg == OpenAIJudgeConfig(
        model="my-model", base_url="http://h:1/v1", max_retries=5, backoff_base=0.5, api_key_env="K"
    )
    assert parse_judge_spec("openai:") == OpenAIJudgeConfig()
    assert parse_judge_spec("hf:org/tiny,device=cpu,max_new_tokens=8") == HFJudgeConfig(
        model="org/tiny", device="cpu", max_new_tokens=8
    )
    for bad, msg in [
        ("gpt4", "unknown judge"),
        ("openai:m,colour=red", "unknown option 'colour'"),
        ("openai:m,max_retries=many", "max_retries"),
        ("none:x", "unknown judge"),
    ]:
        with pytest.raises(ValueError, match=msg):
            parse_judge_spec(bad)
    with pytest.raises(JudgeError, match="needs a model"):
        make_judge("hf:")


def test_configs_print_and_document_every_field():
    assert "model='gpt-4.1-2025-04-14'" in repr(OpenAIJudgeConfig())
    for cls in (OpenAIJudgeConfig, HFJudgeConfig):
        text = config_help(cls)
        for line in text.splitlines()[1:]:
            assert ": " in line and line.split(": ", 1)[1].strip(), line
    assert "openai:MODEL" in judge_specs_help()


# ------------------------------------------------------------------------------------ OpenAI backend


def test_openai_judge_sends_upstreams_request_and_parses_the_reply(source):
    with OpenAIStub([_verdict(True, False)]) as server:
        judge = make_judge(f"openai:judge-model,base_url={server.base_url}")
        checks = judge.assess(TRAJ, ASSERTIONS, source=source)
    assert [c["met"] for c in checks] == [True, False]
    (body,) = server.requests
    system, user = judge_prompts(TRAJ, ASSERTIONS, source)
    assert body["model"] == "judge-model" and body["temperature"] == 0.0
    assert body["messages"] == [{"role": "system", "content": system}, {"role": "user", "content": user}]
    assert "response_format" not in body and "tools" not in body


def test_openai_judge_retries_with_backoff_then_succeeds(source):
    with OpenAIStub([{"status": 503}, {"status": 500}, _verdict(True, True)]) as server:
        judge = OpenAIJudgeConfig(model="m", base_url=server.base_url, max_retries=3, backoff_base=0.01).build()
        assert len(judge.assess(TRAJ, ASSERTIONS, source=source)) == 2
    assert len(server.requests) == 3


def test_openai_judge_gives_a_clear_error_after_the_last_retry(source):
    with OpenAIStub([{"status": 503}]) as server:
        judge = OpenAIJudgeConfig(model="m", base_url=server.base_url, max_retries=2, backoff_base=0.01).build()
        with pytest.raises(JudgeError, match=r"failed after 3 attempt\(s\)") as info:
            judge.assess(TRAJ, ASSERTIONS, source=source)
    assert server.base_url in str(info.value) and len(server.requests) == 3


def test_openai_judge_bad_reply_is_an_error_not_a_score(source):
    with OpenAIStub(["Sure! Everything was met."]) as server:
        judge = OpenAIJudgeConfig(model="m", base_url=server.base_url, max_retries=0).build()
        with pytest.raises(JudgeError, match="not JSON"):
            judge.assess(TRAJ, ASSERTIONS, source=source)


def test_openai_judge_without_key_or_endpoint_says_what_to_set(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    judge = OpenAIJudgeConfig(api_key_env="NO_SUCH_KEY_VAR").build()
    with pytest.raises(JudgeError, match=r"\$NO_SUCH_KEY_VAR"):
        judge.assess(TRAJ, ASSERTIONS)


def test_none_and_callable_judges():
    assert NoneJudge().skip
    with pytest.raises(JudgeError):
        NoneJudge().assess(TRAJ, ASSERTIONS)
    seen = []
    judge = CallableJudge(lambda s, u: seen.append((s, u)) or _verdict(False, False))
    assert [c["met"] for c in judge.assess(TRAJ, ASSERTIONS)] == [False, False] and len(seen) == 1


# ------------------------------------------------------------------------------------ Hugging Face backend


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    """A randomly initialised two-layer GPT-2 with a word-level tokenizer, saved locally (no download)."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    path = tmp_path_factory.mktemp("tiny_judge")
    words = sorted(
        {
            w
            for s in [
                'results expectedOutcome reasoning metExpectation true false { } [ ] : , "',
                "conversation expectedOutcomes assistant user tool None",
            ]
            for w in s.split()
        }
    )
    vocab = {"[UNK]": 0, "[EOS]": 1, **{w: i + 2 for i, w in enumerate(words)}}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]")
    fast.save_pretrained(path)
    config = transformers.GPT2Config(
        vocab_size=len(vocab), n_positions=4096, n_embd=16, n_layer=2, n_head=2, eos_token_id=1, bos_token_id=1
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(path)
    return path


def test_hf_judge_loads_a_local_model_generates_and_reports_unparseable_verdicts(tiny_model_dir, source):
    judge = make_judge(f"hf:{tiny_model_dir},device=cpu,max_new_tokens=6")
    system, user = judge_prompts(TRAJ, ASSERTIONS, source)
    reply = judge.complete(system, user)
    assert isinstance(reply, str)
    assert judge.complete(system, user) == reply  # greedy decoding: deterministic
    with pytest.raises(JudgeError):  # a random model's words are not a JSON verdict
        judge.assess(TRAJ, ASSERTIONS, source=source)


def test_hf_judge_with_a_missing_model_is_a_clear_error(tmp_path):
    pytest.importorskip("transformers")
    judge = make_judge(f"hf:{tmp_path / 'nothing_here'}")
    with pytest.raises(JudgeError, match="cannot load the hf judge model"):
        judge.assess(TRAJ, ASSERTIONS)
