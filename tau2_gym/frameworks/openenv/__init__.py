"""An OpenEnv server for any registered tau2 env id, and its client (extra ``tau2-gym[openenv]``, OpenEnv 0.10).

OpenEnv environments are HTTP + WebSocket servers built with ``openenv.core.env_server.create_app`` and driven by
OpenEnv's ``EnvClient`` (TRL, torchforge, SkyRL and others consume them). The package follows OpenEnv's per-env
layout:

* :mod:`~tau2_gym.frameworks.openenv.models`: the wire types (action, observation, state);
* :mod:`~tau2_gym.frameworks.openenv.environment`: one session's episode (OpenEnv's ``Environment``) and the task
  catalog (OpenEnv's ``TaskProvider``);
* :mod:`~tau2_gym.frameworks.openenv.guard`: token, size limits, idle expiry and hostile frames, in front of
  OpenEnv's app;
* :mod:`~tau2_gym.frameworks.openenv.server`: the app and the uvicorn server (``tau2-gym serve``);
* :mod:`~tau2_gym.frameworks.openenv.client`: the client;
* :mod:`~tau2_gym.frameworks.openenv.manifest`: the ``openenv.yaml`` of a served env, its validation block
  computed from the env's facts, and the package ``openenv validate`` and ``openenv push`` read;
* ``openenv.yaml``: the manifest of the default env (``tau2-gym serve``: airline, base split).
"""

from tau2_gym.frameworks.openenv.client import Tau2Client
from tau2_gym.frameworks.openenv.environment import LoadedEnv, TaskCatalog, Tau2Environment, openenv_name
from tau2_gym.frameworks.openenv.models import (
    ACTION_SHAPE,
    Tau2Action,
    Tau2Observation,
    Tau2State,
    action_shape_error,
)
from tau2_gym.frameworks.openenv.server import DEFAULT_HOST, DEFAULT_PORT, Tau2Server, is_loopback, make_app

__all__ = [
    "ACTION_SHAPE",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "LoadedEnv",
    "TaskCatalog",
    "Tau2Action",
    "Tau2Client",
    "Tau2Environment",
    "Tau2Observation",
    "Tau2Server",
    "Tau2State",
    "action_shape_error",
    "is_loopback",
    "make_app",
    "openenv_name",
]
