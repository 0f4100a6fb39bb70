"""TRL 1.16's own OpenEnv path (``trl.experimental.async_grpo.openenv_harness``) driving ``tau2-gym serve``: TRL's
``HarnessRolloutWorker`` (its rollout process, OpenEnv's ``MCPHarnessAdapter``, sessions from
:class:`~tau2_gym.frameworks.openenv_harness.Tau2SessionFactory`) feeds ``AsyncGRPOTrainer`` on CPU with the tiny
model, generation from a local vLLM-shaped server backed by the same model (tests/policy_stub.py). Also the sessions
alone, through OpenEnv's own harness adapter, against the served env."""

from __future__ import annotations

import copy
import functools
import itertools
import json
import math
import os
import re
import subprocess
import sys
import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("datasets")
pytest.importorskip("openenv.core.harness", reason="needs openenv>=0.10 (the openenv extra)")
pytest.importorskip("trl.experimental.async_grpo.openenv_harness")

import gymnasium as gym  # noqa: E402 - after the importorskip guard
from hfutil import assistant_body, set_threads, tiny  # noqa: E402 - after the importorskip guard
from openenv.core.harness import HarnessRunLimits, MCPHarnessAdapter, ModelStepResult  # noqa: E402
from openenv.core.llm_client import LLMResponse, ToolCall  # noqa: E402
from policy_stub import PolicyServer, WeightSync, cpu_async_grpo  # noqa: E402 - after the importorskip guard

import tau2_gym  # noqa: E402,F401 - registers the envs
from tau2_gym.frameworks.openenv_harness import Tau2SessionFactory  # noqa: E402 - after the importorskip guard
from tau2_gym.players.agents.scripted import OracleAgent  # noqa: E402 - after the importorskip guard
from tau2_gym.training.hf.chat import ChatRenderer  # noqa: E402 - after the importorskip guard
from tau2_gym.training.trl import SEND_MESSAGE_TOOL, build_dataset, task_prompt  # noqa: E402

pytestmark = pytest.mark.slow  # a served env and a training run

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

TASKS = ["create_task_1", "update_task_1"]


@pytest.fixture(autouse=True)
def _threads():
    set_threads()


@pytest.fixture(scope="module")
def served():
    """``tau2-gym serve tau2/mock-v0`` on a free local port, as a subprocess."""
    cli = os.path.join(os.path.dirname(sys.executable), "tau2-gym")
    proc = subprocess.Popen(
        [cli, "serve", "tau2/mock-v0", "--port", "0", "--user", "oracle"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        found = re.search(r"at (http://\S+) ", line)
        assert found, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def oracle_plans() -> dict[str, list[dict]]:
    """The oracle's actions per task (keyed by the customer's opening message), its texts to the customer as
    ``send_message_to_user`` calls: what the model has to do through the harness."""
    plans = {}
    env = gym.make("tau2/mock-v0", disable_env_checker=True)
    for task_id in TASKS:
        obs, info = env.reset(options={"task_id": task_id})
        agent = OracleAgent()
        agent.reset(info["task"], info)
        plan = []
        for m in agent._plan:
            calls = [
                {"name": c["function"]["name"], "arguments": json.loads(c["function"]["arguments"] or "{}")}
                for c in m.get("tool_calls") or ()
            ] or [{"name": SEND_MESSAGE_TOOL, "arguments": {"message": m["content"]}}]
            tool_calls = [{"type": "function", "function": c} for c in calls]
            plan.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        plans[obs[-1]["content"]] = plan
    return plans


def half_oracle(tokenizer):
    """A ``PolicyServer`` script: every other rollout follows the oracle (reward 1.0), the others are sampled from
    the random model."""
    renderer = ChatRenderer(tokenizer, stop_ids={tokenizer.eos_token_id})
    plans = oracle_plans()
    bodies = {key: [assistant_body(renderer, m) for m in plan] for key, plan in plans.items()}
    names = {key: [m["tool_calls"][0]["function"]["name"] for m in plan] for key, plan in plans.items()}
    counter, lock = itertools.count(), threading.Lock()
    head = "<|im_start|>assistant\n"

    def script(text):
        key = next((k for k in bodies if k in text), None)
        if key is None:
            return None
        turn = text.count(head) - 2  # the greeting and the generation prompt
        if turn == 0:
            with lock:
                return bodies[key][0] if next(counter) % 2 == 0 else None
        previous = text.rsplit(head, 2)[-2]  # the model's last turn, as the harness rendered it back
        follows = 0 < turn < len(bodies[key]) and f'"name": "{names[key][turn - 1]}"' in previous
        return bodies[key][turn] if follows else None

    return script


def test_sessions_play_the_served_env_through_openenvs_harness_adapter(served):
    """OpenEnv's MCPHarnessAdapter against our sessions: the oracle's calls earn the env's reward, forwarded by
    verify and in the last tool result; a model that stops talking leaves the episode unfinished (0.0)."""
    plans = oracle_plans()
    factory = Tau2SessionFactory(served)
    for task_id in TASKS:
        session = factory.create(task_prompt("mock", task_id), seed=3)
        try:
            opening = session.initial_messages()
            plan = iter(plans[opening[-1]["content"]])
            assert SEND_MESSAGE_TOOL in {t.name for t in session.list_tools()}

            def oracle_step(messages, tools, sampling, plan=plan):
                m = next(plan, None)
                calls = [] if m is None else m["tool_calls"]
                return ModelStepResult(
                    response=LLMResponse(
                        content="",
                        tool_calls=[
                            ToolCall(id=f"c{i}", name=c["function"]["name"], args=c["function"]["arguments"])
                            for i, c in enumerate(calls)
                        ],
                    )
                )

            result = MCPHarnessAdapter().run_white_box(oracle_step, session, HarnessRunLimits(max_turns=8))
            verify = session.verify(result.messages)
        finally:
            session.close()
        assert result.done and verify.done and verify.env_reward == 1.0
        assert result.tool_trace[-1].result.metadata["reward"] == 1.0
        assert verify.metrics["termination_reason"] == "user_stop"

    session = factory.create(task_prompt("mock", "create_task_1"), seed=3)
    try:
        silent = MCPHarnessAdapter().run_white_box(
            lambda messages, tools, sampling: ModelStepResult(response=LLMResponse(content="bye", tool_calls=[])),
            session,
        )
        assert silent.done and session.verify(silent.messages).env_reward == 0.0  # unfinished: scored 0.0
    finally:
        session.close()


def test_sessions_reach_a_token_protected_server():
    from tau2_gym.frameworks.openenv import Tau2Server

    with Tau2Server("tau2/mock-v0", port=0, token="s3cret") as server:
        session = Tau2SessionFactory(server.url, token="s3cret").create(task_prompt("mock", "create_task_1"))
        try:
            assert session.initial_messages()[-1]["role"] == "user"
        finally:
            session.close()
        with pytest.raises(ConnectionError, match="403"):
            Tau2SessionFactory(server.url).create(task_prompt("mock", "create_task_1"))


def test_a_prompt_of_another_domain_is_refused(served):
    with pytest.raises(ValueError, match="names a 'airline' task, but .* serves 'tau2/mock-v0'"):
        Tau2SessionFactory(served).create(task_prompt("airline", "0"))


@pytest.mark.slow
def test_trls_openenv_harness_trains_on_the_served_env(served, tmp_path, monkeypatch):
    import trl.experimental.async_grpo.async_rollout_worker as worker_module
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
    from trl.experimental.async_grpo.openenv_harness import HarnessRolloutWorker

    cpu_async_grpo(monkeypatch)
    # TRL's rollout worker refuses to start without the vllm package, which it never imports: its generation is
    # HTTP to the server (here the vLLM-shaped policy stub)
    monkeypatch.setattr(worker_module, "is_vllm_available", lambda: True)
    model, tok = tiny()
    model_dir = tmp_path / "tiny"
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    dataset = build_dataset("mock", task_ids=TASKS)
    with PolicyServer(copy.deepcopy(model), tok, script=half_oracle(tok)) as server:
        worker = HarnessRolloutWorker(
            harness_session_factory=functools.partial(Tau2SessionFactory, served),
            harness_adapter=MCPHarnessAdapter(),
            model_name="tiny",
            dataset=dataset,
            reward_funcs=[],
            processing_class=tok,
            eos_token_ids=[tok.eos_token_id],
            num_generations=2,
            max_inflight_tasks=4,
            queue_maxsize=64,
            vllm_server_url=server.url,
            max_tokens=128,  # the oracle's closing message fits
            temperature=1.0,
            max_tool_calling_iterations=6,
            request_timeout=120,
        )
        args = AsyncGRPOConfig(
            output_dir=str(tmp_path / "out"),
            use_cpu=True,
            bf16=False,
            max_steps=2,
            per_device_train_batch_size=4,
            num_generations=2,
            token_budget=0,
            learning_rate=1e-3,
            temperature=1.0,
            logging_steps=1,
            report_to=[],
            save_strategy="no",
            activation_checkpointing=False,
            disable_tqdm=True,
        )
        trainer = AsyncGRPOTrainer(
            model=str(model_dir),
            args=args,
            processing_class=tok,
            train_dataset=dataset,
            rollout_worker=worker,
            weight_transfer=WeightSync(server),
        )
        trainer.train()
        completions = server.requests["/v1/completions"]

    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 2 and all(math.isfinite(h["loss"]) for h in steps)
    assert completions > 0  # TRL sampled every turn from the policy server
    # the harness reward is the served env's tau2 reward: the oracle-following rollouts earn 1.0, the others 0.0
    rewards = [h["rewards/harness_reward"] for h in steps]
    assert all(0.0 <= r <= 1.0 for r in rewards) and any(r > 0 for r in rewards), rewards
    assert any(h["grad_norm"] > 0 for h in steps)
    assert abs(steps[0]["ratio"] - 1.0) < 1e-3  # the tokens and logprobs TRL trains on are the server's
