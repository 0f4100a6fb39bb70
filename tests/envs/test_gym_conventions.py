"""The envs follow Gymnasium's conventions: copyable and picklable mid-episode, vector results files, TimeLimit
truncations that can still be saved and scored, autoreset modes, real reset/step docstrings."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import gymnasium as gym
import pytest

import tau2_gym  # noqa: F401 - registers the envs
from tau2_gym.players.users.scripted import ScriptedUser

_TASK = "7"  # airline: gold actions update and cancel reservations, so the DB changes mid-episode


def _script(env: Any) -> list[Any]:
    """The task's gold actions one per step (writes included), then texts until the customer stops."""
    task = env.unwrapped.task_by_id(_TASK)
    calls = [{"name": a.name, "arguments": dict(a.arguments)} for a in task.evaluation_criteria.actions]
    return calls + ["Is there anything else?"] * 10


def _transition(env: Any, action: Any) -> tuple:
    obs, reward, terminated, truncated, info = env.step(action)
    loop = env.unwrapped.loop
    run = info.get("simulation_run")
    reward_info = None if run is None else dict(run["reward_info"] or {})
    return (
        obs,
        reward,
        terminated,
        truncated,
        loop.env.get_db_hash(),
        loop.step_count,
        info.get("termination_reason"),
        reward_info and reward_info.get("reward"),
    )


def _run(env: Any, actions: list[Any]) -> list[tuple]:
    out = []
    for action in actions:
        t = _transition(env, action)
        out.append(t)
        if t[2] or t[3]:
            break
    return out


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda e: pickle.loads(pickle.dumps(e))], ids=["deepcopy", "pickle"])
def test_env_copied_mid_episode_steps_like_the_original(clone):
    ref = gym.make("tau2/airline-v0", user="oracle")
    ref.reset(seed=3, options={"task_id": _TASK})
    script = _script(ref)
    expected = _run(ref, script)
    assert len(expected) > 4 and expected[-1][2]  # the episode ends within the script
    assert len({t[4] for t in expected}) > 1  # the DB changed along the way: the copy must carry its state

    env = gym.make("tau2/airline-v0", user="oracle")
    env.reset(seed=3, options={"task_id": _TASK})
    k = 3
    assert _run(env, script[:k]) == expected[:k]
    twin = clone(env)
    assert twin.unwrapped.loop is not env.unwrapped.loop
    # the copy shares the process's cached domain (not a copy of its data)
    assert twin.unwrapped.domain is env.unwrapped.domain
    assert twin.unwrapped.loop.env.tools.db is not env.unwrapped.loop.env.tools.db
    assert _run(twin, script[k:]) == expected[k:]  # the copy goes on as the original would
    assert _run(env, script[k:]) == expected[k:]  # and running it did not touch the original
    assert expected[-1][7] is not None


_CONTINUE = """
import json, pickle, sys
import tau2_gym
env = pickle.loads(sys.stdin.buffer.read())
out = []
for action in json.loads(sys.argv[1]):
    obs, reward, terminated, truncated, info = env.step(action)
    run = info.get("simulation_run")
    out.append([obs, reward, terminated, truncated, env.unwrapped.loop.env.get_db_hash(),
                None if run is None else run["reward_info"]["reward"]])
    if terminated or truncated:
        break
print(json.dumps(out))
"""


@pytest.mark.slow
def test_env_pickled_mid_episode_continues_alike_in_another_process():
    import json
    import subprocess
    import sys

    ref = gym.make("tau2/airline-v0", user="oracle")
    ref.reset(seed=3, options={"task_id": _TASK})
    script = _script(ref)
    k = 3
    _run(ref, script[:k])
    blob = pickle.dumps(ref)
    assert len(blob) < 200_000  # ids and the episode's own changes; the domain data re-binds on load
    expected = [[list(t[0]), t[1], t[2], t[3], t[4], t[7]] for t in _run(ref, script[k:])]
    proc = subprocess.run(
        [sys.executable, "-c", _CONTINUE, json.dumps(script[k:])], input=blob, capture_output=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert json.loads(proc.stdout) == json.loads(json.dumps(expected))


@pytest.mark.parametrize("clone", [copy.deepcopy, lambda e: pickle.loads(pickle.dumps(e))], ids=["deepcopy", "pickle"])
def test_db_state_copy_keeps_deletions_and_shares_the_base(clone):
    from tau2_gym import load_domain

    base = load_domain("airline").base_db
    state = base.new_state()
    name = base.tables[0]
    table = getattr(state, name)
    gone, changed = list(base.data[name])[:2]
    del table[gone]
    table.mut(changed)["probe"] = 1
    twin = clone(state)
    copy_table = getattr(twin, name)
    assert gone not in copy_table and copy_table[changed]["probe"] == 1
    assert twin.hash() == state.hash() != base.new_state().hash()
    assert copy_table._base is table._base  # the shared base, not a copy of it
    copy_table.mut(changed)["probe"] = 2
    assert table[changed]["probe"] == 1 and "probe" not in base.data[name][changed]
    assert len(pickle.dumps(state)) < 20_000


def _strip_timestamp(results: dict) -> dict:
    return {k: v for k, v in results.items() if k != "timestamp"}


def test_vector_env_save_results_writes_the_single_env_format(tmp_path):
    import json

    from tau2_gym.core.results_file import load_results
    from tau2_gym.players.agents.scripted import OracleAgent

    venv = gym.make_vec("tau2/mock-v0", num_envs=2)
    ids = [t.id for t in venv.unwrapped.template.tasks[:2]]
    obs, infos = venv.reset(seed=0, options=[{"task_id": i} for i in ids])
    agents = [OracleAgent(), OracleAgent()]
    for k, agent in enumerate(agents):
        agent.reset(infos["task"][k], None)
    runs: list = [None, None]
    for _ in range(60):
        actions = [agent.act(o, None) if runs[k] is None else "idle" for k, (agent, o) in enumerate(zip(agents, obs))]
        obs, rewards, terms, truncs, infos = venv.step(actions)
        for k in range(2):
            if (terms[k] or truncs[k]) and runs[k] is None:
                runs[k] = infos["simulation_run"][k]
        if all(r is not None for r in runs):
            break
    assert all(r is not None for r in runs)
    path = tmp_path / "vector.json"
    venv.unwrapped.save_results(path, runs)
    single = gym.make("tau2/mock-v0").unwrapped
    single.save_results(tmp_path / "single.json", runs)
    got, want = json.loads(path.read_text()), json.loads((tmp_path / "single.json").read_text())
    assert _strip_timestamp(got) == _strip_timestamp(want)
    loaded = load_results(path)
    assert [s.task_id for s in loaded.simulations] == ids
    assert [s.reward_info.reward for s in loaded.simulations] == [r["reward_info"]["reward"] for r in runs]
    # default: each sub-env's last finished episode
    venv.unwrapped.save_results(tmp_path / "default.json")
    assert [s["task_id"] for s in json.loads((tmp_path / "default.json").read_text())["simulations"]] == ids


@pytest.mark.parametrize("wrap", ["make", "manual"])
def test_time_limit_truncation_carries_a_simulation_run_that_saves_and_rescores(tmp_path, wrap):
    import json

    from gymnasium.wrappers import TimeLimit

    from tau2_gym.core.results_file import SimulationRun, load_results

    limit = 3
    user = ScriptedUser(["I need help with a task."], then="Please go on.")  # never stops on its own
    if wrap == "make":
        env = gym.make("tau2/mock-v0", max_episode_steps=limit, user=user)
    else:
        env = TimeLimit(gym.make("tau2/mock-v0", user=user), max_episode_steps=limit)
    task_id = env.unwrapped.tasks[0].id
    runs = []
    for _ in range(2):  # a second episode: the count restarts at reset
        env.reset(seed=0, options={"task_id": task_id})
        for n in range(1, limit + 1):
            obs, reward, terminated, truncated, info = env.step("Could you tell me more?")
            assert (terminated, truncated) == ((False, True) if n == limit else (False, False))
        assert info["termination_reason"] == "max_steps"  # upstream's ending at its own step limit
        assert reward == 0.0 and info["reward_info"]["reward"] == 0.0
        run = SimulationRun.model_validate(info["simulation_run"])
        assert run.termination_reason == "max_steps"
        assert sum(m.role == "assistant" for m in run.messages) == limit + 1  # the greeting + each step
        runs.append(info["simulation_run"])
    path = tmp_path / "results.json"
    env.unwrapped.save_results(path, runs)
    assert [s.termination_reason for s in load_results(path).simulations] == ["max_steps", "max_steps"]
    pytest.importorskip("tau2_gym.cli.eval")
    from tau2_gym.cli import main

    out = tmp_path / "rescored.json"
    assert main(["eval", str(path), "-o", str(out), "--no-progress"]) == 0
    assert [s["reward_info"]["reward"] for s in json.loads(out.read_text())["simulations"]] == [0.0, 0.0]


def test_without_a_time_limit_the_episode_runs_past_that_many_steps():
    env = gym.make("tau2/mock-v0", user=ScriptedUser(["I need help with a task."], then="Please go on."))
    env.reset(seed=0, options={"task_id": env.unwrapped.tasks[0].id})
    for _ in range(4):
        _, _, terminated, truncated, info = env.step("Could you tell me more?")
        assert not (terminated or truncated), info.get("termination_reason")


def test_autoreset_mode_accepts_every_gymnasium_mode_and_names_them_when_wrong():
    from gymnasium.vector import AutoresetMode

    for value in (AutoresetMode.SAME_STEP, "SameStep", "same_step", "SAME_STEP"):
        vec = gym.make_vec("tau2/mock-v0", num_envs=2, autoreset_mode=value)
        assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    for mode in AutoresetMode:
        assert gym.make_vec("tau2/mock-v0", num_envs=1, autoreset_mode=mode.value).autoreset_mode is mode
    with pytest.raises(ValueError, match="'NextStep', 'SameStep', 'Disabled'") as err:
        gym.make_vec("tau2/mock-v0", num_envs=2, autoreset_mode="bogus")
    assert "autoreset_mode='bogus'" in str(err.value)


def test_autoreset_mode_in_vector_kwargs_reaches_gymnasiums_vectorizers():
    from gymnasium.vector import AutoresetMode

    user = ScriptedUser(["I need help with a task."], then="Please go on.")
    vec = gym.make_vec(
        "tau2/mock-v0",
        num_envs=2,
        vectorization_mode="sync",
        max_steps=6,
        user=user,
        vector_kwargs={"autoreset_mode": "SameStep"},
    )
    assert vec.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    vec.reset(seed=0)
    for _ in range(6):
        _, _, terms, truncs, infos = vec.step(["Go on.", "Go on."])
        if truncs.any():
            break
    assert truncs.all() and "final_obs" in infos  # SameStep: the ended episode's last observation, same step


def test_help_shows_the_envs_own_reset_and_step_docs():
    import pydoc

    env = gym.make("tau2/airline-v0")
    text = pydoc.render_doc(env.unwrapped, renderer=pydoc.plaintext)
    for generic in (gym.Env.reset.__doc__, gym.Env.step.__doc__):
        assert generic.strip().splitlines()[0] not in text  # Gymnasium's generic wording is not inherited
    reset_doc, step_doc = type(env.unwrapped).reset.__doc__, type(env.unwrapped).step.__doc__
    for key in ("task_id", "task_index", "seed", "episode_over", "tools", "policy", "step_count"):
        assert key in reset_doc, key
    for key in (
        "tool_calls",
        "terminated",
        "truncated",
        "simulation_run",
        "reward_info",
        "termination_reason",
        "TimeLimit",
        "agent_error",
    ):
        assert key in step_doc, key
    assert reset_doc.strip().splitlines()[0] in text and step_doc.strip().splitlines()[0] in text


# ------------------------------------------------------------------------------------ Task round trips

_EXCLUDE_ALL = dict(exclude_unset=True, exclude_defaults=True, exclude_none=True)


def _history_tasks() -> list[tuple[dict, Any]]:
    """(file dict, loaded Task) of every mock task with a message history, read from the env's own file."""
    import json

    from tau2_gym import load_domain

    dom = load_domain("mock")
    raw = {str(t["id"]): t for t in json.loads(dom.task_file().read_text())}
    out = [(raw[t.id], t) for t in dom.tasks(None, None) if t.history]
    assert out, "the mock task set has message-history tasks"
    return out


@pytest.mark.parametrize("flags", [_EXCLUDE_ALL, dict(exclude_unset=True)], ids=["all", "exclude_unset"])
def test_task_dump_excluding_unset_gives_the_files_own_message_dicts(flags):
    from tau2_gym.core.tasks import Task

    for raw, task in _history_tasks():
        dumped = task.model_dump(mode="json", **flags)
        assert dumped["initial_state"]["message_history"] == raw["initial_state"]["message_history"]
        assert not any("timestamp" in m for m in dumped["initial_state"]["message_history"])  # none invented
        again = Task.model_validate(dumped)
        assert [m.to_dict() | {"timestamp": None} for m in again.history] == [
            m.to_dict() | {"timestamp": None} for m in task.history
        ]


def test_task_dump_of_history_still_holds_every_field_without_flags_and_tracks_changes():
    raw, task = _history_tasks()[0]
    full = task.model_dump(mode="json")["initial_state"]["message_history"]
    assert all("timestamp" in m and "turn_idx" in m for m in full)  # plain dump: every field, as upstream
    copy_ = task.model_copy(deep=True)  # info["task"] is such a copy
    first = copy_.initial_state.message_history[0]
    first.cost = 0.5  # set after loading: no longer at its default, so it is "set"
    dumped = copy_.model_dump(mode="json", **_EXCLUDE_ALL)["initial_state"]["message_history"]
    assert dumped[0] == {**raw["initial_state"]["message_history"][0], "cost": 0.5}
    assert dumped[1:] == raw["initial_state"]["message_history"][1:]
    none = task.model_dump(mode="json", exclude_none=True)["initial_state"]["message_history"]
    assert all(v is not None for m in none for v in m.values())


_UPSTREAM_DUMP = """
import json, sys
from tau2.data_model.tasks import Task
flags = {"all": dict(exclude_unset=True, exclude_defaults=True, exclude_none=True), "unset": dict(exclude_unset=True)}
out = {}
for path in sys.argv[1:]:
    out[path] = [{k: Task.model_validate(t).model_dump(mode="json", **f) for k, f in flags.items()}
                 for t in json.load(open(path))]
print(json.dumps(out))
"""


@pytest.mark.reference
def test_task_dump_with_exclude_flags_equals_upstreams_task():
    import json
    import os
    import subprocess
    from pathlib import Path

    from refutil import reference_python

    from tau2_gym.core.tasks import Task

    py = reference_python()
    data = os.environ.get("TAU2_UPSTREAM_DATA_DIR")
    if not data:
        pytest.skip("TAU2_UPSTREAM_DATA_DIR is not set")
    paths = [str(Path(data) / "tau2" / "domains" / d / "tasks.json") for d in ("mock", "airline", "retail")]
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    proc = subprocess.run([py, "-c", _UPSTREAM_DUMP, *paths], capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    upstream = json.loads(proc.stdout)
    n = 0
    for path in paths:
        for raw, want in zip(json.loads(Path(path).read_text()), upstream[path]):
            task = Task.model_validate(raw)
            assert task.model_dump(mode="json", **_EXCLUDE_ALL) == want["all"], raw["id"]
            assert task.model_dump(mode="json", exclude_unset=True) == want["unset"], raw["id"]
            n += 1
    assert n > 150


def test_time_limit_inside_gymnasiums_sync_vector_env_records_the_truncated_episodes():
    from tau2_gym.envs.vector import KeepRecordsWhole

    user = ScriptedUser(["I need help with a task."], then="Please go on.")
    vec = gym.make_vec(
        "tau2/mock-v0",
        num_envs=2,
        vectorization_mode="sync",
        max_episode_steps=2,
        user=user,
        wrappers=[KeepRecordsWhole],
    )
    vec.reset(seed=0)
    vec.step(["Go on.", "Go on."])
    _, _, terms, truncs, infos = vec.step(["Go on.", "Go on."])
    assert truncs.all() and not terms.any()
    assert [run["termination_reason"] for run in infos["simulation_run"]] == ["max_steps", "max_steps"]
