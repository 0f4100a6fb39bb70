"""The client of the tau2 OpenEnv server: OpenEnv's ``EnvClient`` with tau2's wire types (OpenEnv's ``client.py``).

Any OpenEnv client speaks to the server (``GenericEnvClient`` with ``{"action": ...}`` dicts, a token in
``headers={"Authorization": "Bearer ..."}``); this one adds what a tau2 session wants: raw actions (text, an
assistant message, calls) without the ``{"action": ...}`` wrapper, incremental observations put back together,
the bearer token as ``token=``, and OpenEnv's Task API (``list_splits`` ... ``get_task_range``) over HTTP.
"""

from __future__ import annotations

from typing import Any, Optional
from urllib.parse import quote

import httpx
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient

from tau2_gym.frameworks.openenv.models import Tau2Action, Tau2Observation, Tau2State

__all__ = ["Tau2Client"]


class Tau2Client(EnvClient[Tau2Action, Tau2Observation, Tau2State]):
    """OpenEnv's ``EnvClient`` for a tau2 server: ``step`` takes a :class:`Tau2Action` or any raw action form
    (text, an assistant message dict, calls); ``token`` is sent as a bearer token (on the WebSocket handshake and
    the Task API's requests). Async by default; ``.sync()`` gives OpenEnv's synchronous wrapper. Other keyword
    arguments are ``EnvClient``'s (``message_timeout_s``, ``headers``, ...).

    >>> with Tau2Client("http://127.0.0.1:8000").sync() as env:   # doctest: +SKIP
    ...     result = env.reset(task_id="0")
    ...     tools = result.observation.tools
    ...     while not result.done:
    ...         result = env.step(my_policy(result.observation.messages, tools))
    ...     print(result.reward, result.observation.termination_reason)
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: Optional[str] = None,
        incremental: bool = True,
        headers: Optional[dict[str, str]] = None,
        **kwargs: Any,
    ) -> None:
        if token:
            headers = {**(headers or {}), "Authorization": f"Bearer {token}"}
        super().__init__(base_url, headers=headers, **kwargs)
        self._incremental = incremental
        self._messages: list = []  # the session's view so far (incremental observations are appended to it)
        self._task_api: Optional[str] = None  # the Task API's base URL, /{name}

    async def _reset_async(self, **kwargs: Any) -> StepResult[Tau2Observation]:
        """OpenEnv's reset; ``incremental`` (default: the client's) has the server send only the messages each
        step adds -- this client puts the whole view back together, so ``observation.messages`` is always whole."""
        if self._incremental:
            kwargs.setdefault("incremental", True)
        return await super()._reset_async(**kwargs)

    def _step_payload(self, action: Any) -> dict[str, Any]:
        if isinstance(action, Tau2Action):
            return action.model_dump(exclude_defaults=True) | {"action": action.action}
        return {"action": action}

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[Tau2Observation]:
        fields = dict(payload.get("observation") or {})
        messages, offset = fields.get("messages"), int(fields.get("messages_offset") or 0)
        if isinstance(messages, list):
            if offset:
                if offset > len(self._messages):
                    raise RuntimeError(f"incremental observation from message {offset}, but {len(self._messages)} held")
                messages = fields["messages"] = self._messages[:offset] + messages
                fields["messages_offset"] = 0
            self._messages = list(messages)
        reward, done = payload.get("reward"), bool(payload.get("done", False))
        observation = Tau2Observation.model_construct(**fields, reward=reward, done=done)
        return StepResult(observation=observation, reward=reward, done=done)

    def _parse_state(self, payload: dict[str, Any]) -> Tau2State:
        return Tau2State.model_validate(payload)

    # -------------------------------------------------------------- OpenEnv's Task API

    def list_splits(self) -> Any:
        """The served splits, ``[{"name": ..., "type": ...}]``, the env's own pool first."""
        return self._dispatch(lambda: self._task_api_call("GET", "splits"))

    def list_tasks(self, split: str) -> Any:
        """Every task of ``split`` in order: ``id``, ``split``, ``index``, ``domain`` and its public fields."""
        return self._dispatch(lambda: self._task_api_call("POST", "tasks", {"split": split}, "tasks"))

    def num_tasks(self, split: str) -> Any:
        return self._dispatch(lambda: self._task_api_call("POST", "num_tasks", {"split": split}, "num_tasks"))

    def get_task(self, split: str, index: int) -> Any:
        """Task ``index`` of ``split``, what ``reset(split=split, index=index)`` plays."""
        body = {"split": split, "index": index}
        return self._dispatch(lambda: self._task_api_call("POST", "task", body, "task"))

    def get_task_range(self, split: str, start: Optional[int] = None, stop: Optional[int] = None) -> Any:
        body = {"split": split, "start": start, "stop": stop}
        return self._dispatch(lambda: self._task_api_call("POST", "task_range", body, "tasks"))

    async def _task_api_call(self, method: str, route: str, body: Optional[dict] = None, key: Optional[str] = None):
        if self._base_url is None:
            raise RuntimeError("Tau2Client has no base URL")
        http = self._base_url.replace("ws://", "http://", 1).replace("wss://", "https://", 1)
        async with httpx.AsyncClient(base_url=http, headers=self._headers, timeout=self._message_timeout) as client:
            if self._task_api is None:
                names = _json(await client.get("/list_environments"), "/list_environments")
                self._task_api = "/" + quote(str(names[0]), safe="")
            path = f"{self._task_api}/{route}"
            reply = await client.request(method, path, json=body)
        out = _json(reply, path)
        return out if key is None else out[key]


def _json(reply: httpx.Response, path: str) -> Any:
    if reply.status_code != 200:
        try:
            detail = reply.json().get("detail", reply.text)
        except ValueError:
            detail = reply.text
        raise RuntimeError(f"Task API {path}: HTTP {reply.status_code}: {detail}")
    return reply.json()
