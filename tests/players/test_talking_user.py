"""The talking offline customer (``user="talking"``, players/users/talking.py).

Every expectation is computed in the test: the oracle user's rewards, the do-nothing baseline (an agent that says
goodbye at once, answered by the oracle user), the ids the customer must give (read from the task's gold actions).
"""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from datautil import TESTS

from tau2_gym import load_domain
from tau2_gym.episodes.baseline import do_nothing_baseline
from tau2_gym.players.agents.scripted import (
    CLOSING,
    GiveUpAgent,
    OracleAgent,
    ScriptedAgent,
    call_message,
    closing_text,
    gold_actions,
    text_message,
)
from tau2_gym.players.users import resolve_user
from tau2_gym.players.users.scripted import OracleUser
from tau2_gym.players.users.talking import TalkingUser, first_person, task_facts

# domain -> (env id, env kwargs). Retail and banking_knowledge have NL assertions: judge="pass" scores the rest of
# their reward basis (what a customer can change), as tests/envs/test_env_oracle.py does.
DOMAINS = {
    "mock": ("tau2/mock-v0", {}),
    "airline": ("tau2/airline-v0", {}),
    "retail": ("tau2/retail-v0", {"judge": "pass"}),
    "telecom": ("tau2/telecom-v0", {"task_split": "small"}),
    "banking_knowledge": ("tau2/banking_knowledge-v0", {"judge": "pass"}),
}


# banking_knowledge's episodes are the slow ones: every n-th task keeps each of its tests to a few seconds
STRIDE = {"banking_knowledge": {"oracle": 3, "give_up": 8}}


def sample(domain, tasks, test):
    return tasks[:: STRIDE.get(domain, {}).get(test, 1)]


def make_env(domain, user):
    if domain == "banking_knowledge":
        try:
            load_domain(domain)
        except Exception as exc:  # noqa: BLE001 - data not present on this machine
            pytest.skip(f"banking_knowledge data unavailable: {exc}")
    eid, kwargs = DOMAINS[domain]
    return gym.make(eid, user=user, **kwargs)


def run(env, agent, task_id, seed=None):
    """(reward, final info, the trajectory as comparable tuples)."""
    obs, info = env.reset(seed=seed, options={"task_id": task_id})
    agent.reset(info["task"], info)
    while True:
        obs, reward, term, trunc, info = env.step(agent.act(obs, info))
        if term or trunc:
            break
    trajectory = [
        (m.role, m.content, [(tc.name, tc.arguments) for tc in getattr(m, "tool_calls", None) or ()])
        for m in env.unwrapped.episode.messages()
    ]
    return reward, info, trajectory


def user_texts(trajectory):
    return [content for role, content, calls in trajectory if role == "user" and not calls]


class SayAgent(ScriptedAgent):
    """Says one fixed text at every turn (no tool calls): the ways of stopping at once."""

    def __init__(self, text):
        super().__init__()
        self.text = text

    def fallback(self):
        return text_message(self.text)


STOP_AT_ONCE = [
    CLOSING,
    "Goodbye!",
    "I'm afraid I can't help with that. Have a nice day.",
    "Please restart your phone and turn airplane mode off. Goodbye!",
    "I recommend the Gold Rewards Card, please apply for it. Bye!",
]


# ------------------------------------------------------------------------------------------------ the oracle agent


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_oracle_agent_reaches_one_wherever_the_oracle_user_does(domain):
    oracle_env, talking_env = make_env(domain, "oracle"), make_env(domain, "talking")
    solved, fresh, talked, failed = 0, 0, 0, []
    for task in sample(domain, oracle_env.unwrapped.tasks, "oracle"):
        expected, _, _ = run(oracle_env, OracleAgent(), task.id)
        if expected != 1.0:
            continue
        solved += 1
        reward, info, trajectory = run(talking_env, OracleAgent(), task.id)
        assert info["termination_reason"] in ("user_stop", "agent_stop"), (task.id, info["termination_reason"])
        assert "evaluation_error" not in info, (task.id, info["evaluation_error"])
        if reward != 1.0:
            failed.append(task.id)
        history = task.initial_state is not None and task.initial_state.message_history
        fresh += not history
        talked += not history and user_texts(trajectory)[0] == task_facts(task).opening
    assert solved > 0
    assert failed == []
    assert talked == fresh  # every new conversation opened with the reason for the call


# ------------------------------------------------------------------------------------------------ asking first


class AskFirstAgent(OracleAgent):
    """Asks for the customer's user id before acting, then takes the gold actions with the id it was told put
    wherever the gold actions carry a user id (``wrong_id`` puts a wrong one instead: the control)."""

    def __init__(self, wrong_id=None):
        super().__init__()
        self.wrong_id = wrong_id
        self.received = None

    def plan(self, task):
        return []

    def act(self, observation=None, info=None):
        if self.received is None:
            if self._i == 0:
                self._i = 1
                return text_message("I can help with that. Could you please provide your user id?")
            reply = observation[-1]["content"] or ""
            m = re.search(r"user id is (\S+?)\.?$", reply)
            assert m, reply
            self.received = m.group(1)
            user_id = self.wrong_id or self.received
            steps = []
            for action in gold_actions(self.task):
                if "user_id" in action.arguments:
                    action = action.model_copy(update={"arguments": {**action.arguments, "user_id": user_id}})
                steps.append(call_message(action.name, action.arguments, f"call_{len(steps)}"))
            self._plan = steps + [text_message(closing_text(self.task))]
            self._i = 0
        return super().act(observation, info)


def airline_tasks_needing_the_user_id(env):
    return [t for t in env.unwrapped.tasks if any("user_id" in a.arguments for a in gold_actions(t))]


def test_an_agent_that_asks_for_the_user_id_gets_it_and_solves_the_airline_tasks_that_need_it():
    oracle_env, talking_env = make_env("airline", "oracle"), make_env("airline", "talking")
    tasks = airline_tasks_needing_the_user_id(oracle_env)
    assert len(tasks) >= 10
    checked = 0
    for task in tasks:
        expected, _, _ = run(oracle_env, OracleAgent(), task.id)
        if expected != 1.0:
            continue
        agent = AskFirstAgent()
        reward, info, trajectory = run(talking_env, agent, task.id)
        gold_ids = {a.arguments["user_id"] for a in gold_actions(task) if "user_id" in a.arguments}
        assert gold_ids == {agent.received}, (task.id, agent.received)
        assert reward == 1.0, (task.id, info.get("reward_info"))
        assert user_texts(trajectory)[-1] == "###STOP###"
        checked += 1
    assert checked >= 10


def test_the_received_id_is_what_solves_them():
    """Control: the same agent with a wrong id fails every task whose writing gold action takes the user id."""
    env = make_env("airline", "talking")
    writes = [
        t for t in airline_tasks_needing_the_user_id(env) if any(a.name == "book_reservation" for a in gold_actions(t))
    ]
    assert writes
    for task in writes:
        reward, _, _ = run(env, AskFirstAgent(wrong_id="nobody_0000"), task.id)
        assert reward == 0.0, task.id


# ------------------------------------------------------------------------------------------------ giving up


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_give_up_scores_exactly_the_do_nothing_baseline_and_stopping_at_once_never_more(domain):
    oracle_env, talking_env = make_env(domain, "oracle"), make_env(domain, "talking")
    tasks = sample(domain, oracle_env.unwrapped.tasks, "give_up")
    library = do_nothing_baseline(oracle_env.unwrapped.domain, tasks, judge=DOMAINS[domain][1].get("judge"))
    for task in tasks:
        # do nothing and end politely, answered by the customer that stops at any text
        baseline, _, quiet = run(oracle_env, SayAgent("Goodbye."), task.id)
        give_up, info, trajectory = run(talking_env, GiveUpAgent(), task.id)
        assert give_up == baseline == library.rewards[task.id], task.id
        calls = [c for _, _, c in trajectory if c]
        assert calls == [c for _, _, c in quiet if c], task.id  # the customer did nothing (beyond a task's history)
        for text in STOP_AT_ONCE:
            reward, _, _ = run(talking_env, SayAgent(text), task.id)
            assert reward <= baseline, (task.id, text)


def test_the_baseline_is_below_the_oracle_where_actions_matter():
    """The talking user does not hand out the oracle's score: on airline the do-nothing share is lower."""
    env = make_env("airline", "talking")
    give_up = [run(env, GiveUpAgent(), t.id)[0] for t in env.unwrapped.tasks]
    oracle = [run(env, OracleAgent(), t.id)[0] for t in env.unwrapped.tasks]
    assert sum(give_up) < sum(oracle)


# ------------------------------------------------------------------------------------------------ the conversation


def conversation(domain, task_id, lines, user=None):
    """Drive the env with fixed agent texts; the customer's replies after its opening (texts, or ``call:name`` for
    tool calls)."""
    eid, kwargs = DOMAINS[domain]
    env = gym.make(eid, user=user or TalkingUser(), **kwargs)
    env.reset(options={"task_id": task_id})
    replies, reward = [], None
    for line in lines:
        n = len(env.unwrapped.episode.messages())
        _, reward, term, trunc, _ = env.step(line)
        for m in env.unwrapped.episode.messages()[n + 1 :]:
            if m.role == "user":
                replies.append(f"call:{m.tool_calls[0].name}" if m.tool_calls else m.content)
        if term or trunc:
            break
    return replies, reward


def test_answers_from_known_info_and_unknown_info():
    env = make_env("retail", "talking")
    task = next(
        t
        for t in env.unwrapped.tasks
        if "email" in (t.user_scenario.instructions.unknown_info or "")
        and "zip" in t.user_scenario.instructions.known_info
    )
    known = task.user_scenario.instructions.known_info
    zip_code = re.search(r"\b\d{5}\b", known).group(0)
    first = next(a for a in gold_actions(task) if a.name == "find_user_id_by_name_zip").arguments
    replies, _ = conversation(
        "retail",
        task.id,
        ["Could you please share your email address?", "Then may I have your full name and zip code?"],
    )
    assert "remember" in replies[0] and "email" in replies[0]
    assert f"{first['first_name']} {first['last_name']}" in replies[1] and zip_code in replies[1]
    assert zip_code == first["zip"]


@pytest.mark.parametrize(
    "known,expected",
    [
        ("You are Emma Kim.\nYour user id is emma_kim_9957.", {"name": "Emma Kim", "user_id": "emma_kim_9957"}),
        ("Your user id is 'daiki_muller_1116'.", {"user_id": "daiki_muller_1116", "name": "Daiki Muller"}),
        ("You are Anya Garcia.\n\nYour user id is: anya_garcia_5901.\n\nYour confirmation number is JMO1MG.",
         {"user_id": "anya_garcia_5901", "reservation": "JMO1MG"}),
        ("You are mia_garcia_4516 (mia.garcia2723@example.com).",
         {"user_id": "mia_garcia_4516", "email": "mia.garcia2723@example.com", "name": "Mia Garcia"}),
        ("You are an interesting guy called Noah Patel, living in the Big Apple in 10108.",
         {"name": "Noah Patel", "zip": "10108"}),
        ("You are John Smith with phone number 555-123-2002.", {"name": "John Smith", "phone": "555-123-2002"}),
    ],
)  # fmt: skip
def test_known_info_phrasings(known, expected):
    env = make_env("airline", "oracle")
    task = env.unwrapped.tasks[0]
    instr = task.user_scenario.instructions.model_copy(update={"known_info": known, "reason_for_call": "Help."})
    task = task.model_copy(update={"user_scenario": task.user_scenario.model_copy(update={"instructions": instr})})
    facts = task_facts(task)
    for topic, value in expected.items():
        assert value in facts.known.get(topic, ""), (topic, facts.known)


def test_first_person():
    assert first_person("You want to cancel your reservation.") == "I want to cancel my reservation."
    assert first_person("The card that gives you the most.") == "The card that gives me the most."
    assert first_person("You're sure you were told so.") == "I'm sure I was told so."


def test_confirms_what_the_task_wants_and_declines_what_it_does_not():
    env = make_env("airline", "oracle")
    task = next(t for t in env.unwrapped.tasks if any(a.name == "cancel_reservation" for a in gold_actions(t)))
    assert not any(a.name == "book_reservation" for a in gold_actions(task))
    replies, _ = conversation(
        "airline",
        task.id,
        ["Would you like me to proceed with the cancellation? (yes/no)", "Shall I also book a new flight for you?"],
    )
    assert replies[0].startswith("Yes")
    assert replies[1].startswith("No")


def test_telecom_device_requests_read_freely_and_write_only_what_the_task_needs():
    env = make_env("telecom", "oracle")
    task = next(t for t in env.unwrapped.tasks if [a.name for a in gold_actions(t)] == ["toggle_roaming"])
    replies, reward = conversation(
        "telecom",
        task.id,
        [
            "Can you check your status bar and tell me what it shows?",
            "Please turn airplane mode on and off.",  # not what this task needs: no toggle
            "Please turn data roaming on.",
            "Please run a speed test.",
            "Your data works again. Is there anything else I can help you with?",
        ],
    )
    calls = [r for r in replies if r.startswith("call:")]
    assert calls[0] == "call:check_status_bar"
    assert "call:toggle_airplane_mode" not in calls
    assert "call:toggle_roaming" in calls and "call:run_speed_test" in calls
    assert replies[-1] == "###STOP###"
    assert reward == 1.0


def test_a_stalling_agent_is_left_after_patience_and_turns_are_bounded():
    replies, _ = conversation("airline", "0", ["Okay."] * 10)
    assert replies[-1] == "###STOP###" and len(replies) == 3 + 1  # 3 patient replies, then stop
    assert "cancel reservation EHGLP3" in replies[0]  # the first one restates the request
    replies, _ = conversation("airline", "0", ["Could you tell me your name?"] * 10, user=TalkingUser(max_turns=4))
    assert replies == ["My name is Emma Kim."] * 3 + ["###STOP###"]  # 4 messages with the opening


# ------------------------------------------------------------------------------------------------ determinism


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_same_task_seed_and_conversation_give_the_same_replies(domain):
    first, second = make_env(domain, TalkingUser()), make_env(domain, TalkingUser())
    for task in first.unwrapped.tasks[:8]:
        for agent in (OracleAgent, lambda: AskFirstAgent() if domain == "airline" else GiveUpAgent()):
            a = run(first, agent(), task.id, seed=7)[2]
            b = run(second, agent(), task.id, seed=7)[2]
            assert a == b, task.id


def test_registered_as_talking():
    assert isinstance(resolve_user("talking"), TalkingUser)
    assert isinstance(resolve_user("oracle"), OracleUser)
    assert TalkingUser().info()["implementation"] == "talking_user"
    assert json.dumps(TalkingUser().info())
    user = TalkingUser(max_turns=9)
    conversation("airline", "0", ["What is your name?"], user=user)
    copy = pickle.loads(pickle.dumps(user))  # how the runner ships users to Ray actors
    assert copy.max_turns == 9 and copy._facts == {} and user._facts
    assert conversation("airline", "0", ["What is your name?"], user=copy)[0] == ["My name is Emma Kim."]


class AskIdentityAgent(OracleAgent):
    """Retail's authentication, asked: e-mail, or name and zip code; the lookup's arguments come from the reply
    (``None`` stays None when the customer did not say it: the lookup then fails)."""

    def __init__(self):
        super().__init__()
        self.reply = None

    def plan(self, task):
        return []

    def act(self, observation=None, info=None):
        if self.reply is None:
            if self._i == 0:
                self._i = 1
                return text_message(
                    "Before I can help, could you please provide your email, or your name and zip code?"
                )
            self.reply = observation[-1]["content"] or ""
            name = re.search(r"My name is (\S+) (\S+?)\.", self.reply)
            zip_code = re.search(r"zip code is (\d{5})", self.reply)
            email = re.search(r"My email is (\S+?)(?: or |\.\s|\.$)", self.reply)
            self.said = said = {
                "first_name": name and name.group(1),
                "last_name": name and name.group(2),
                "zip": zip_code and zip_code.group(1),
                "email": email and email.group(1),
            }
            steps = []
            for action in gold_actions(self.task):
                if action.name in ("find_user_id_by_name_zip", "find_user_id_by_email"):
                    action = action.model_copy(update={"arguments": {k: said[k] for k in action.arguments}})
                steps.append(call_message(action.name, action.arguments, f"call_{len(steps)}"))
            self._plan = steps + [text_message(closing_text(self.task))]
            self._i = 0
        return super().act(observation, info)


def test_retail_an_agent_that_authenticates_the_customer_first_gets_what_it_needs():
    env = make_env("retail", "talking")
    lookups = ("find_user_id_by_name_zip", "find_user_id_by_email")
    # one lookup: the tasks where the customer is not meant to confuse its zip codes
    tasks = [t for t in env.unwrapped.tasks if sum(a.name in lookups for a in gold_actions(t)) == 1]
    assert len(tasks) >= 50
    failed = []
    for task in tasks:
        agent = AskIdentityAgent()
        reward, _, _ = run(env, agent, task.id)
        lookup = next(a for a in gold_actions(task) if a.name in lookups)
        if any(agent.said[k] != v for k, v in lookup.arguments.items()) or reward != 1.0:
            failed.append((task.id, agent.reply))
    assert failed == []


ODD_TEXTS = [
    " .",
    "?",
    "###STOP###",
    "Could you please tell me your user id, email, zip code, phone number, order id and reservation number?",
    "Please do: toggle_roaming(); reboot_device(); check_status_bar(); dismiss_notification().",
    '{"name": "cancel_reservation", "arguments": {}}',
    "Would you like me to cancel, book, modify, exchange and return everything? (yes/no)",
    "ñandú 漢字 🙂 " * 50,
    "x" * 5000,
]


@pytest.mark.parametrize("domain", list(DOMAINS))
def test_odd_agent_messages_never_break_the_customer_and_it_always_ends(domain):
    eid, kwargs = DOMAINS[domain]
    user = TalkingUser(max_turns=12)
    env = gym.make(eid, user=user, max_steps=200, **kwargs)
    for task in env.unwrapped.tasks[:3]:
        env.reset(options={"task_id": task.id})
        for i in range(60):
            _, _, term, trunc, info = env.step(ODD_TEXTS[i % len(ODD_TEXTS)])
            if term or trunc:
                break
        assert term and info["termination_reason"] == "user_stop", (task.id, info["termination_reason"])
        customer = [m for m in env.unwrapped.episode.messages() if m.role == "user"]
        assert len(customer) <= 12 + 1


# how a support agent asks for each of telecom's device actions, in words (no tool names)
IN_WORDS = {
    "set_network_mode_preference": "Please set your network mode preference to 4G/5G preferred.",
    "toggle_airplane_mode": "Please turn airplane mode off.",
    "toggle_roaming": "Please turn on data roaming.",
    "toggle_data": "Please turn your mobile data on.",
    "reboot_device": "Please restart your phone.",
    "reset_apn_settings": "Please reset your APN settings to the default.",
    "toggle_wifi_calling": "Please turn off Wi-Fi calling.",
    "reseat_sim_card": "Please take out your SIM card and put it back in.",
    "toggle_data_saver_mode": "Please turn off data saver mode.",
    "disconnect_vpn": "Please disconnect your VPN.",
    "make_payment": "Please make the payment for your bill.",
}


def in_words(action):
    if action.name == "grant_app_permission":
        return f"Please grant the {action.arguments['app_name']} app the {action.arguments['permission']} permission."
    return IN_WORDS[action.name]


class InWordsAgent(OracleAgent):
    """The oracle's plan, but each device action is asked for in words, one per message, after a look at the
    status bar."""

    def render(self, steps):
        words = []
        for kind, payload in steps:
            if kind == "ask":
                words += [("say", "Can you check your status bar and tell me what it shows?")]
                words += [("say", in_words(a)) for a in payload]
            else:
                words.append((kind, payload))
        return super().render(words)


def test_telecom_device_actions_asked_in_words_are_performed():
    oracle_env, talking_env = make_env("telecom", "oracle"), make_env("telecom", "talking")
    solved = 0
    for task in oracle_env.unwrapped.tasks:
        if run(oracle_env, OracleAgent(), task.id)[0] != 1.0:
            continue
        reward, info, trajectory = run(talking_env, InWordsAgent(), task.id)
        performed = [c[0][0] for role, _, c in trajectory if role == "user" and c]
        wanted = [a.name for a in gold_actions(task) if a.requestor == "user"]
        assert [n for n in performed if n in wanted] == wanted, task.id
        assert reward == 1.0, (task.id, info["termination_reason"])
        solved += 1
    assert solved == len(oracle_env.unwrapped.tasks)


class RecommendingAgent(OracleAgent):
    """banking_knowledge: the oracle's plan, but a card application is a recommendation in words ("I recommend the
    Gold Rewards Card") instead of the tool's name."""

    def render(self, steps):
        out = []
        for kind, payload in steps:
            if kind == "ask" and all(a.name == "apply_for_credit_card" for a in payload):
                out += [
                    ("say", f"I recommend the {a.arguments['card_type']}. You can apply for it now.") for a in payload
                ]
            else:
                out.append((kind, payload))
        return super().render(out)


def test_banking_a_recommended_card_is_applied_for():
    oracle_env, talking_env = make_env("banking_knowledge", "oracle"), make_env("banking_knowledge", "talking")
    tasks = [
        t
        for t in oracle_env.unwrapped.tasks
        if [a.name for a in gold_actions(t) if a.requestor == "user"] == ["apply_for_credit_card"]
    ]
    assert tasks
    for task in tasks:
        assert run(oracle_env, OracleAgent(), task.id)[0] == 1.0
        reward, _, trajectory = run(talking_env, RecommendingAgent(), task.id)
        assert not any("apply_for_credit_card(" in (c or "") for role, c, _ in trajectory if role == "assistant")
        assert reward == 1.0, task.id


_TRANSCRIPT = """
import json, sys
sys.path[:0] = [{here!r}, {tests!r}]
from test_talking_user import DOMAINS, InWordsAgent, AskFirstAgent, OracleAgent, make_env, run
out = []
for domain, agent in (("airline", AskFirstAgent), ("telecom", InWordsAgent)):
    env = make_env(domain, "talking")
    for task in env.unwrapped.tasks[:4]:
        out.append(run(env, agent(), task.id, seed=3)[2])
print(json.dumps(out, default=str))
"""


@pytest.mark.slow
def test_the_same_replies_in_processes_with_different_hash_seeds():
    """Nothing in a reply depends on set or dict order that changes between processes (PYTHONHASHSEED)."""
    code = _TRANSCRIPT.format(here=str(Path(__file__).resolve().parent), tests=str(TESTS))
    procs = [  # side by side: the start-up (imports, task files) is most of the time
        subprocess.Popen(
            [sys.executable, "-c", code],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        for seed in ("1", "2")
    ]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-2000:]
        outs.append(stdout)
    assert outs[0] == outs[1] and len(outs[0]) > 1000
