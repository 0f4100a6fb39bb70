"""Environment semantics on the mock domain: routing, errors, replay rules, gold state."""

import copy
import logging
from datetime import datetime

import pytest

from tau2_gym import load_domain
from tau2_gym.core.environment import Environment, ReplayMismatch
from tau2_gym.core.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from tau2_gym.scoring.rebuild import gold_environment, initial_environment, predicted_environment


def call(env, name, requestor="assistant", **args):
    return env.get_response(ToolCall(name=name, arguments=args, id="c1", requestor=requestor))


def test_unknown_tool_is_an_error_message(mock_domain):
    msg = call(mock_domain.make_environment(), "nope")
    assert msg.error and msg.content == "Error: Tool 'nope' not found."


def test_bad_arguments_give_python_error_text_with_class_name(mock_domain):
    env = mock_domain.make_environment()
    assert call(env, "get_users", a=1).content == "Error: MockTools.get_users() got an unexpected keyword argument 'a'"
    assert call(env, "create_task", user_id="user_1").content == (
        "Error: MockTools.create_task() missing 1 required positional argument: 'title'"
    )
    wrong = call(env, "create_task", user_id="user_1", title=5)
    assert wrong.error and wrong.content.startswith("Error: 1 validation error for Task\ntitle\n")
    assert env.get_db_hash() == mock_domain.make_environment().get_db_hash()  # nothing was written


def test_arguments_colliding_with_dispatch_parameters(mock_domain):
    msg = call(mock_domain.make_environment(), "get_users", requestor="assistant", tool_name="x")
    assert msg.error and "got multiple values for argument 'tool_name'" in msg.content


@pytest.mark.parametrize(
    "arguments, content",
    [
        ({"self": 1}, "Error: Environment.make_tool_call() got multiple values for argument 'self'"),
        ({"name": 1}, "Error: MockTools.get_users() got an unexpected keyword argument 'name'"),
        ({"requestor": "user"}, "Error: Environment.make_tool_call() got multiple values for argument 'requestor'"),
        ({"kwargs": 1}, "Error: MockTools.get_users() got an unexpected keyword argument 'kwargs'"),
        ({5: 1}, "Error: keywords must be strings"),
        (
            [1, 2],
            "Error: tau2_gym.core.environment.Environment.make_tool_call() argument after ** must be a mapping, "
            "not list",
        ),
    ],
)
def test_odd_arguments_fail_with_pythons_own_text(mock_domain, arguments, content):
    env = mock_domain.make_environment()
    msg = env.get_response(ToolCall("get_users", arguments, id="c1"))  # type: ignore[arg-type]
    assert (msg.content, msg.error) == (content, True)


def test_an_overridden_dispatch_step_is_always_used(mock_domain):
    class Counting(Environment):
        def make_tool_call(self, tool_name, requestor="assistant", **kwargs):
            self.seen.append(tool_name)
            return super().make_tool_call(tool_name, requestor, **kwargs)

    spec = mock_domain.spec
    env = Counting(
        domain_name="mock", policy="", tools=spec.agent_toolkit(mock_domain.base_db.new_state()), domain=mock_domain
    )
    env.seen = []
    assert not env.get_response(ToolCall("get_users", {}, id="1")).error
    assert env.seen == ["get_users"]


def test_tool_results_are_stamped_now_unless_the_caller_stamps_them(mock_domain):
    env = mock_domain.make_environment()
    before = datetime.now()
    stamp = env.get_response(ToolCall("get_users", {}, id="1")).timestamp
    assert before <= datetime.fromisoformat(stamp) <= datetime.now()
    assert env.get_response(ToolCall("get_users", {}, id="1"), timestamp="").timestamp == ""


def test_a_call_with_model_arguments_is_left_as_the_caller_made_it():
    """Upstream's test_book_reservation: a ToolCall whose arguments hold pydantic models runs like its dict
    twin, and the caller's call object, arguments dict and models are untouched (so it can change a model
    and send the same call again)."""
    from tau2_gym.domains.airline.data_model import FlightInfo, Passenger, Payment

    airline = load_domain("airline")
    plain = dict(
        user_id="mia_li_3668",
        origin="JFK",
        destination="SFO",
        flight_type="one_way",
        cabin="economy",
        flights=[{"flight_number": "HAT023", "date": "2024-05-20"}],
        passengers=[{"first_name": "Noah", "last_name": "Brown", "dob": "1990-01-01"}],
        payment_methods=[{"payment_id": "credit_card_4421486", "amount": 191}],
        total_baggages=0,
        nonfree_baggages=0,
        insurance="no",
    )
    models = dict(
        plain,
        flights=[FlightInfo(**plain["flights"][0])],
        passengers=[Passenger(**plain["passengers"][0])],
        payment_methods=[Payment(**plain["payment_methods"][0])],
    )
    payment = models["payment_methods"][0]
    snapshot = copy.deepcopy(models)
    model_call = ToolCall("book_reservation", models, id="0")

    env, twin = airline.make_environment(), airline.make_environment()
    got = env.get_response(model_call)
    want = twin.get_response(ToolCall("book_reservation", plain, id="0"))
    assert not got.error and (got.content, got.error) == (want.content, want.error)
    assert env.get_db_hash() == twin.get_db_hash()
    assert model_call.arguments is models and models == snapshot
    assert models["payment_methods"][0] is payment and isinstance(payment, Payment)

    payment.amount = 121  # upstream's test: the reused call now pays the wrong amount
    again = env.get_response(model_call)
    assert again.error and again.content == ("Error: Payment amount does not add up, total price is 191, but paid 121")


def test_user_tools_absent_in_26_3_data(legacy_mock_domain):
    msg = call(legacy_mock_domain.make_environment(), "check_notifications", requestor="user")
    assert msg.error and msg.content == "Error: User tools not available"


def test_write_tool_output_and_model_serialisation(mock_domain):
    env = mock_domain.make_environment()
    msg = call(env, "create_task", user_id="user_1", title="x")
    assert msg.content == '{"task_id": "task_2", "title": "x", "description": null, "status": "pending"}'
    assert call(env, "get_users").content == (
        '[{"user_id": "user_1", "name": "Test User", "tasks": ["task_1", "task_2"]}]'
    )


def test_environments_are_isolated(mock_domain):
    a, b = mock_domain.make_environment(), mock_domain.make_environment()
    call(a, "update_task_status", task_id="task_1", status="completed")
    assert a.get_db_hash() != b.get_db_hash()
    assert mock_domain.base_db.data["tasks"]["task_1"]["status"] == "pending"


def _history(calls_and_results):
    msgs = []
    for name, args, content in calls_and_results:
        msgs.append(AssistantMessage(tool_calls=[ToolCall(name=name, arguments=args, id=name)]))
        msgs.append(ToolMessage(id=name, content=content))
    return msgs


def test_replay_skips_hallucinated_and_read_calls_and_reruns_writes(mock_domain):
    task = mock_domain.task("create_task_1")
    history = [UserMessage(content="hi")] + _history(
        [
            ("made_up_tool", {}, "Error: Tool 'made_up_tool' not found."),
            ("get_users", {}, "this recorded read output is never compared"),
            (
                "create_task",
                {"user_id": "user_1", "title": "x"},
                '{"task_id":"task_2","title":"x","description":null,"status":"pending"}',
            ),  # whitespace differs: JSON-equal
        ]
    )
    env = predicted_environment(mock_domain, task, history)
    assert "task_2" in env.tools.db.tasks


def test_replay_raises_in_strict_mode_and_warns_in_lenient_mode(mock_domain, caplog):
    task = mock_domain.task("create_task_1")
    history = _history([("create_task", {"user_id": "user_1", "title": "x"}, '{"task_id": "task_9"}')])
    with pytest.raises(ReplayMismatch):
        predicted_environment(mock_domain, task, history, strict=True)
    with caplog.at_level(logging.WARNING, logger="tau2_gym"):
        env = predicted_environment(mock_domain, task, history, strict=False)
    assert "task_2" in env.tools.db.tasks  # the mutation is applied either way
    assert any("strict=False" in r.getMessage() for r in caplog.records)


def test_replay_rejects_orphan_tool_message(mock_domain):
    task = mock_domain.task("create_task_1")
    with pytest.raises(ValueError, match="Tool message not expected"):
        predicted_environment(mock_domain, task, [ToolMessage(id="x", content="y")])
    bad = [AssistantMessage(tool_calls=[ToolCall(name="get_users", id="a")]), ToolMessage(id="b", content="[]")]
    with pytest.raises(ValueError, match="Tool call id mismatch"):
        predicted_environment(mock_domain, task, bad)


def test_gold_state_hash_of_create_task_1(mock_domain):
    env = gold_environment(mock_domain, mock_domain.task("create_task_1"))
    assert env.get_db_hash().startswith("3b82583d5c026d81")


def test_initialization_data_and_actions_apply(mock_domain):
    task = mock_domain.task("update_task_with_initialization_data")
    env = initial_environment(mock_domain, task)
    assert "task_2" in env.tools.db.tasks
