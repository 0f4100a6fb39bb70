"""No episode can change another's task, tools or reward through the objects ``info`` hands out."""

from __future__ import annotations

import gymnasium as gym
import pytest

import tau2_gym  # noqa: F401 - registers the envs

_SCENARIO = """
import sys, gymnasium as gym, tau2_gym
def run(env):
    obs, info = env.reset(seed=0, options={"task_id": "8"})
    done, reward = info.get("episode_over", False), 0.0
    while not done:
        obs, reward, te, tr, info = env.step("Okay.")
        done = te or tr
    return reward
if sys.argv[1] == "mutate":
    env_a = gym.make("tau2/airline-v0", user="oracle").unwrapped
    _, info = env_a.reset(seed=0, options={"task_id": "8"})
    assert info["task"].evaluation_criteria.actions
    info["task"].evaluation_criteria.actions = []
    print(run(gym.make("tau2/airline-v0", user="oracle").unwrapped), run(env_a))
else:
    print(run(gym.make("tau2/airline-v0", user="oracle").unwrapped))
"""


@pytest.mark.slow
def test_mutating_info_task_does_not_change_another_envs_grading():
    """The issue's scenario, each half in a fresh process (no gold state cached by earlier tests)."""
    import subprocess
    import sys

    def run(mode: str) -> list[float]:
        out = subprocess.run([sys.executable, "-c", _SCENARIO, mode], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return [float(x) for x in out.stdout.split()]

    (fresh,) = run("fresh")
    assert run("mutate") == [fresh, fresh]


def test_mutating_info_tools_does_not_change_another_envs_tools():
    env_a = gym.make("tau2/airline-v0", user="oracle").unwrapped
    _, info = env_a.reset(seed=0, options={"task_id": "8"})
    original = info["tools"][0]["function"]["name"]
    info["tools"][0]["function"]["name"] = "renamed"
    info["tools"][0]["function"]["parameters"]["properties"].clear()
    env_b = gym.make("tau2/airline-v0", user="oracle").unwrapped
    _, info_b = env_b.reset(seed=0, options={"task_id": "8"})
    assert info_b["tools"][0]["function"]["name"] == original
    assert env_b.tools[0]["function"]["name"] == original
    assert env_a.tools[0]["function"]["name"] == original
    assert original in {t["function"]["name"] for t in env_b.action_space.tools}
    _, info_a2 = env_a.reset(seed=0, options={"task_id": "8"})
    assert info_a2["tools"][0]["function"]["name"] == original


def test_vector_env_infos_do_not_share_task_or_tools():
    vec = gym.make_vec("tau2/airline-v0", num_envs=2, user="oracle")
    _, infos = vec.reset(seed=0, options={"task_id": "8"})
    tasks = infos["task"]
    tasks[0].evaluation_criteria.actions = []
    assert tasks[1].evaluation_criteria.actions
    infos["tools"][0][0]["function"]["name"] = "renamed"
    assert infos["tools"][1][0]["function"]["name"] != "renamed"
    vec.close()


def test_info_copies_are_equal_private_and_made_from_every_domains_loaded_tasks():
    """The copies ``info`` hands out (parsed from each loaded task's JSON, envs.handouts) equal a deep copy of the
    task -- every value, the fields set -- and share no object with it; a task passed to reset, which its owner may
    change between resets, is copied as it is at that reset."""
    from tau2_gym.core.domain import domain_names, load_domain
    from tau2_gym.envs.handouts import Handouts

    for name in domain_names():
        domain = load_domain(name)
        handouts = Handouts(domain, None)
        for task in domain.tasks(None, None)[:60]:
            copy, deep = handouts.task(task), task.model_copy(deep=True)
            assert copy == task and copy.model_dump() == deep.model_dump(), (name, task.id)
            assert copy.model_dump(exclude_unset=True) == task.model_dump(exclude_unset=True), (name, task.id)
            assert copy is not task and copy.user_scenario is not task.user_scenario
            if task.evaluation_criteria is not None and task.evaluation_criteria.actions:
                assert copy.evaluation_criteria.actions is not task.evaluation_criteria.actions
    env = gym.make("tau2/airline-v0", user="oracle").unwrapped
    mine = env.tasks[0].model_copy(deep=True)
    _, info = env.reset(seed=0, options={"task": mine})
    assert info["task"] == mine and info["task"] is not mine
    mine.description = None  # the owner changes it between resets: the next copy shows the change
    _, info = env.reset(seed=0, options={"task": mine})
    assert info["task"].description is None
    tools = env.info_tools()
    assert tools == list(env.tools) and all(a is not b for a, b in zip(tools, env.tools))


def test_an_env_hands_its_tool_copy_out_again_until_a_caller_changes_it():
    """The copy is made once per env and handed out while it equals the tools (type-exact: true -> 1 counts as
    a change); whatever a caller did to it never comes back as the tools; siblings and clones hold their own."""
    env = gym.make("tau2/airline-v0", user="oracle").unwrapped
    _, first = env.reset(seed=0)
    held = first["tools"][0]["function"]  # a caller keeping a reference inside the copy changes nothing
    _, second = env.reset(seed=1)
    assert second["tools"] is first["tools"] and second["tools"] == list(env.tools)
    assert second["tools"][0]["function"] is held
    second["tools"][0]["function"]["name"] = "renamed"
    _, third = env.reset(seed=2)
    assert third["tools"] is not second["tools"] and third["tools"] == list(env.tools)
    holder, key = _first_bool(third["tools"])
    holder[key] = int(holder[key])  # == sees no change; the digest does (true -> 1)
    _, fourth = env.reset(seed=3)
    assert fourth["tools"] is not third["tools"] and fourth["tools"] == list(env.tools)
    fourth["tools"][0]["function"]["note"] = object()  # not a JSON value: a change too, never a failed reset
    _, fifth = env.reset(seed=4)
    assert fifth["tools"] is not fourth["tools"] and fifth["tools"] == list(env.tools)
    _, sixth = env.reset(seed=5)
    assert sixth["tools"] is fifth["tools"]
    sibling, clone = env.sibling(), env.clone()
    _, theirs = sibling.reset(seed=0)
    assert theirs["tools"] is not env.info_tools() and theirs["tools"] == list(env.tools)
    clone.reset(seed=0)
    assert clone.info_tools() is not env.info_tools() and clone.info_tools() == list(env.tools)


def _first_bool(value):
    """(container, key) of the first boolean inside a JSON value."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        if type(v) is bool:
            return value, k
        found = _first_bool(v)
        if found is not None:
            return found
    return None


def test_a_user_env_hands_out_its_copies_again_for_the_same_task_tools():
    env = gym.make("tau2/telecom-user-v0").unwrapped
    task = env.tasks[0].id
    _, first = env.reset(seed=0, options={"task_id": task})
    _, second = env.reset(seed=1, options={"task_id": task})
    assert first["tools"] and second["tools"] is first["tools"] and second["agent_tools"] is first["agent_tools"]
    second["agent_tools"].pop()
    _, third = env.reset(seed=2, options={"task_id": task})
    assert third["agent_tools"] is not second["agent_tools"] and third["agent_tools"] == list(env.agent_tools)


def test_handout_recipes_name_only_copies_of_shared_values_and_a_sibling_makes_equal_copies():
    """What a vector env's worker sends by name: a loaded task's copy and the agent's tool copy; a caller's own
    task and a user env's task-dependent tools are not named (their values travel whole)."""
    from tau2_gym.core.tasks import Task

    env = gym.make("tau2/airline-v0").unwrapped
    _, info = env.reset(seed=0, options={"task_id": "8"})
    recipes = env.handout_recipes(info)
    assert recipes == {"task": ("task", "8"), "tools": ("tools", "tools")}
    sibling = env.sibling()
    for key, recipe in recipes.items():
        copy = sibling.make_handout(recipe)
        assert copy == info[key] and copy is not info[key]
    assert sibling.make_handout(recipes["tools"]) is sibling.make_handout(recipes["tools"])  # reused while unchanged
    own = Task.model_validate(info["task"].model_dump())
    _, info = env.reset(options={"task": own})
    assert "task" not in env.handout_recipes(info)
    user_env = gym.make("tau2/airline-user-v0", agent="oracle").unwrapped
    _, info = user_env.reset(seed=0, options={"task_id": "8"})
    recipes = user_env.handout_recipes(info)
    assert set(recipes) == {"task", "agent_tools"}
    assert user_env.sibling().make_handout(recipes["agent_tools"]) == info["agent_tools"]


def test_without_copy_infos_info_holds_the_loaded_task_and_the_tool_schemas_themselves():
    """The setting of an owner that only reads each info at once (the OpenEnv server serialises it): no copies."""
    env = gym.make("tau2/airline-v0").unwrapped
    loaded = {t.id: t for t in env.tasks}["8"]
    _, copied = env.reset(seed=0, options={"task_id": "8"})
    env.copy_infos = False
    _, shared = env.reset(seed=0, options={"task_id": "8"})
    assert copied["task"] == loaded and copied["task"] is not loaded and shared["task"] is loaded
    assert shared["tools"] == copied["tools"] and all(a is b for a, b in zip(shared["tools"], env.tools))
    assert not any(a is b for a, b in zip(copied["tools"], env.tools))
    assert env.sibling().copy_infos is False  # a vector env's sub-envs take the template's setting
    user_env = gym.make("tau2/telecom-user-v0").unwrapped
    user_env.copy_infos = False
    _, info = user_env.reset(seed=0, options={"task_id": user_env.tasks[0].id})
    assert info["task"] is user_env.tasks[0]
    assert all(a is b for a, b in zip(info["agent_tools"], user_env.agent_tools))
