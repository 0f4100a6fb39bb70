"""The NL judge asks through the LLM reply cache (tau2_gym.llm.cache): on by default at temperature 0, so a
second evaluation of the same NL task makes zero judge requests and gives the same verdict; ``cache=off``
asks every time; ``tau2-gym eval`` prints the judge's hits and misses."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("openai")

from openai_stub import OpenAIStub
from test_eval import results_26_3
from test_evaluation_cases import Case, ending, execute, gold_steps

from tau2_gym.cli import main
from tau2_gym.core.messages import AssistantMessage, UserMessage
from tau2_gym.llm.cache import default_cache_path
from tau2_gym.scoring.judges import OpenAIJudgeConfig

ASSERTIONS = ["The agent greeted the user"]
TRAJ = [AssistantMessage(content="Hi! How can I help you today?"), UserMessage(content="Hello.")]


def verdict(met: bool) -> str:
    return json.dumps(
        {"results": [{"expectedOutcome": a, "reasoning": "r", "metExpectation": met} for a in ASSERTIONS]}
    )


def test_a_second_judge_asks_nothing_and_gives_the_same_checks(mock_domain):
    with OpenAIStub([verdict(True), verdict(False)]) as server:  # a second request would get the other verdict
        first = OpenAIJudgeConfig(model="j", base_url=server.base_url).build()
        a = first.assess(TRAJ, ASSERTIONS, source=mock_domain.source)
        second = OpenAIJudgeConfig(model="j", base_url=server.base_url).build()  # as a new run would
        b = second.assess(TRAJ, ASSERTIONS, source=mock_domain.source)
        assert len(server.requests) == 1
        other_model = OpenAIJudgeConfig(model="k", base_url=server.base_url).build()  # model is in the key
        other_model.assess(TRAJ, ASSERTIONS, source=mock_domain.source)
        assert len(server.requests) == 2
    assert a == b and a[0]["met"] is True
    assert first.cache_stats()["misses"] == 1 and first.cache_stats()["stored"] == 1
    assert second.cache_stats()["hits"] == 1 and second.cache_stats()["misses"] == 0
    assert second.cache_stats()["path"] == str(default_cache_path())


def test_judge_cache_off_and_sampled_judges_ask_every_time(mock_domain, tmp_path):
    for cfg in (dict(cache="off"), dict(temperature=0.5)):
        with OpenAIStub([verdict(True)]) as server:
            for _ in range(2):
                judge = OpenAIJudgeConfig(model="j", base_url=server.base_url, **cfg).build()
                judge.assess(TRAJ, ASSERTIONS, source=mock_domain.source)
                assert judge.cache_stats() == {"on": False}
            assert len(server.requests) == 2
    path = tmp_path / "judge.sqlite"  # an explicit path, spelled in the --judge spec
    with OpenAIStub([verdict(True)]) as server:
        from tau2_gym.scoring.judges import make_judge

        for _ in range(2):
            make_judge(f"openai:j,base_url={server.base_url},cache={path}").assess(
                TRAJ, ASSERTIONS, source=mock_domain.source
            )
        assert len(server.requests) == 1 and path.exists()


def test_a_second_eval_of_an_nl_task_makes_zero_judge_requests(tmp_path, capsys, mock_domain):
    from tau2_gym.core.tasks import Task

    data = mock_domain.task("create_task_1").model_dump(mode="json")
    data["evaluation_criteria"].update(reward_basis=["DB", "NL_ASSERTION"], nl_assertions=["The task was created"])
    nl_task = Task.model_validate(data)
    msgs = execute(mock_domain, nl_task, gold_steps(mock_domain, nl_task) + [ending(False)])
    src = tmp_path / "run.json"
    src.write_text(json.dumps(results_26_3(mock_domain, [Case("gold", nl_task, [], "user_stop", messages=msgs)])))
    reply = json.dumps(
        {"results": [{"expectedOutcome": "The task was created", "reasoning": "yes", "metExpectation": True}]}
    )
    with OpenAIStub([reply]) as server:
        spec = f"openai:stub,base_url={server.base_url}"
        assert main(["eval", str(src), "-o", str(tmp_path / "a.json"), "--judge", spec, "--no-progress"]) == 0
        assert len(server.requests) == 1
        out1 = capsys.readouterr().out
        assert main(["eval", str(src), "-o", str(tmp_path / "b.json"), "--judge", spec, "--no-progress"]) == 0
        assert len(server.requests) == 1  # the second evaluation asked the judge nothing
        out2 = capsys.readouterr().out
    assert "judge cache: 0 hits, 1 misses, 1 stored" in out1 and "judge cache: 1 hits, 0 misses, 0 stored" in out2
    ra, rb = (json.loads((tmp_path / n).read_text())["simulations"][0]["reward_info"] for n in ("a.json", "b.json"))
    assert ra == rb and ra["reward_breakdown"] == {"DB": 1.0, "NL_ASSERTION": 1.0}
