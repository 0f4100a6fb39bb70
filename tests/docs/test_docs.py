"""The docs cannot rot: every Python and shell block of ``README.md`` and ``docs/*.md`` runs here.

A page's blocks run in order in a fresh temporary folder (``examples/`` and ``tests/`` of this checkout linked
into it), so a later block may use what an earlier one wrote or defined: Python blocks share one interpreter
per page (a subprocess, so a block that registers a domain or an env id cannot leak into other tests), shell
blocks run in ``bash -e`` with this interpreter's ``bin`` first on ``PATH``.

An HTML comment right before a block says how to treat it:

- ``<!-- docs-test: skip: REASON -->``: not run (a GPU, a remote service, a long training run); counted and
  listed with its reason (:func:`test_marked_blocks_give_a_reason`).
- ``<!-- docs-test: llm-stub -->``: run against a local OpenAI-compatible stub (``tests/openai_stub.py``) that
  answers ``###STOP###`` to every request; ``http://localhost:8000/v1`` in the block becomes its address.
- ``<!-- docs-test: requires MODULE -->``: run when ``MODULE`` imports (an optional extra), else skipped;
  ``requires MODULE llm-stub`` also points the block at the stub.
- ``<!-- docs-test: file PATH -->``: the block is a file's content, written to ``PATH`` for later blocks.

Shell lines are run as written except: ``pip install ...`` lines (the package under test is installed
already); ``tau2-gym demo`` gets ``--num-tasks 1 --agents oracle`` (``tests/cli/test_demo.py`` runs the rest);
``python -m pytest -q [-n auto]`` becomes ``python -m pytest --version`` (the suite is CI's own step, and this file is
part of it). Blocks of other languages (``text``, ``json`` without a ``file`` marker) are output samples and
are not run.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest
from datautil import REPO
from openai_stub import OpenAIStub

ROOT = REPO
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LANGS = {"python": "python", "py": "python", "bash": "shell", "sh": "shell", "shell": "shell", "console": "shell"}
MARKER = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->$")
STUB_URL = "http://localhost:8000/v1"


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str  # as written after the fence
    code: str
    marker: Optional[str]

    @property
    def kind(self) -> Optional[str]:
        return LANGS.get(self.lang)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of a page, each with the ``docs-test`` marker right above it (if any)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        fence = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent, lang = fence.group(1), fence.group(2)
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        code = textwrap.dedent("\n".join(ln[len(indent) :] if ln.startswith(indent) else ln for ln in lines[i + 1 : j]))
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mark = MARKER.match(lines[k].strip()) if k >= 0 else None
        out.append(Block(page, i + 1, lang, code + "\n", mark.group(1) if mark else None))
        i = j + 1
    return out


def runnable(block: Block) -> bool:
    return block.kind is not None or (block.marker or "").startswith("file ")


def shell_script(code: str) -> str:
    """The shell block as it is run (see the module docstring for the three rewrites)."""
    out = []
    for line in code.splitlines():
        stripped = line.strip()
        if stripped.startswith("pip install") or stripped.startswith("python -m pip install"):
            continue
        line = re.sub(r"^(\s*)tau2-gym demo\b", r"\1tau2-gym demo --num-tasks 1 --agents oracle", line)
        line = re.sub(r"^(\s*)python -m pytest -q( -n auto)?(\s*(#.*)?)$", r"\1python -m pytest --version\3", line)
        out.append(line)
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------ the page runner

WORKER = r"""
import contextlib, io, json, sys, traceback

namespace = {"__name__": "__main__"}
channel = sys.stdout
for request in sys.stdin:
    request = json.loads(request)
    buffer = io.StringIO()
    try:
        with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
            exec(compile(request["code"], request["where"], "exec"), namespace)
        reply = {"ok": True, "output": buffer.getvalue()}
    except BaseException:
        reply = {"ok": False, "output": buffer.getvalue(), "error": traceback.format_exc()}
    channel.write(json.dumps(reply) + "\n")
    channel.flush()
"""


class PythonSession:
    """One interpreter per page: blocks run in it in order and share their names."""

    def __init__(self, cwd: Path, env: dict) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, code: str, where: str) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"code": code, "where": where}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            return {"ok": False, "output": "", "error": f"the interpreter exited ({self.proc.wait()})"}
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module")
def stub():
    with OpenAIStub(lambda body, n: "###STOP###") as server:
        yield server


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("OPENAI_API_KEY", "docs-test-key")
    env.pop("TAU2_GYM_DEBUG", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (".", env.get("PYTHONPATH", "")) if p)
    return env


@functools.cache
def importable(module: str) -> bool:
    """Whether ``module`` imports in a fresh interpreter (asked once per module: a heavy extra takes seconds)."""
    return subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True).returncode == 0


def run_page(page: Path, cwd: Path, stub_url: str) -> list[str]:
    """Run a page's blocks; returns a line per block that was not run, with why."""
    for name in ("examples", "tests"):
        (cwd / name).symlink_to(ROOT / name, target_is_directory=True)
    env = _env()
    session: Optional[PythonSession] = None
    not_run = []
    try:
        for block in blocks(page):
            if not runnable(block):
                continue
            marker = block.marker or ""
            if marker.startswith("skip"):
                not_run.append(f"{block.where}: {marker}")
                continue
            if marker.startswith("file "):
                path = cwd / marker[len("file ") :].strip()
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(block.code)
                continue
            if marker.startswith("requires "):
                module = marker.split()[1]
                if not importable(module):
                    not_run.append(f"{block.where}: {module} is not installed")
                    continue
            stubbed = marker == "llm-stub" or (marker.startswith("requires ") and marker.endswith(" llm-stub"))
            code = block.code.replace(STUB_URL, stub_url) if stubbed else block.code
            if block.kind == "python":
                if session is None:
                    session = PythonSession(cwd, env)
                result = session.run(code, block.where)
                assert result["ok"], f"{block.where} failed:\n{result['error']}\noutput:\n{result['output'][-3000:]}"
            else:
                script = shell_script(code)
                proc = subprocess.run(
                    ["bash", "-e", "-o", "pipefail", "-c", script],
                    cwd=cwd,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                )
                assert proc.returncode == 0, (
                    f"{block.where} failed ({proc.returncode}):\n{script}\nstdout:\n{proc.stdout[-3000:]}\n"
                    f"stderr:\n{proc.stderr[-3000:]}"
                )
    finally:
        if session is not None:
            session.close()
    return not_run


@pytest.fixture(scope="module")
def ran(stub, tmp_path_factory) -> dict:
    """Every page run once, pages side by side (each is a chain of subprocesses, so threads overlap them)."""

    def one(page: Path):
        try:
            return run_page(page, tmp_path_factory.mktemp(page.stem), stub.base_url)
        except AssertionError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        return dict(zip(PAGES, pool.map(one, PAGES)))


@pytest.mark.slow  # every code block of every page runs (the README's runs the demo)
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_code_block_of_the_page_runs(page, ran):
    result = ran[page]
    if isinstance(result, AssertionError):
        raise result
    for line in result:
        print("not run:", line)


# ------------------------------------------------------------------------------------------ the rules


def test_marked_blocks_give_a_reason():
    """Every skipped block says why; no marker names an unknown treatment."""
    for page in PAGES:
        for block in blocks(page):
            if block.marker is None:
                continue
            kind = block.marker.split()[0].rstrip(":")
            assert kind in {"skip", "llm-stub", "requires", "file"}, f"{block.where}: unknown marker {block.marker!r}"
            if kind == "skip":
                assert len(block.marker.split(":", 1)[-1].strip()) > 10, f"{block.where}: skip without a reason"


def test_the_parser_finds_the_blocks_it_should():
    """The extraction itself: fences, languages, markers and indentation (a test that can fail)."""
    page = ROOT / "README.md"
    found = blocks(page)
    assert [b.kind for b in found].count("python") >= 1 and [b.kind for b in found].count("shell") >= 2
    assert all(b.code.strip() for b in found)
    assert shell_script("pip install -e .\ntau2-gym demo   # x\npython -m pytest -q\n") == (
        "tau2-gym demo --num-tasks 1 --agents oracle   # x\npython -m pytest --version\n"
    )
    assert shell_script("python -m pytest -q -n auto   # y\n") == "python -m pytest --version   # y\n"


def test_the_readmes_first_tool_call_succeeds_on_the_task_reset_draws():
    """The README's first episode: its tool call is about the customer of the task ``reset(seed=0)`` draws."""
    import gymnasium as gym

    import tau2_gym  # noqa: F401 - registers the ids

    first = next(b for b in blocks(ROOT / "README.md") if b.kind == "python")
    tree = ast.parse(first.code)
    make = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "make")
    action = next(
        ast.literal_eval(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "action"
    )
    env = gym.make(ast.literal_eval(make.args[0]))
    obs, info = env.reset(seed=0)
    user_id = action["arguments"]["user_id"]
    assert user_id in obs[-1]["content"], "the customer of the drawn task is someone else"
    assert any(a.arguments.get("user_id") == user_id for a in info["task"].evaluation_criteria.actions)
    obs, *_ = env.step(action)
    result = obs[-1]
    assert result["role"] == "tool" and not result["content"].startswith("Error")
    assert json.loads(result["content"])["user_id"] == user_id


def test_count_of_blocks_run_written_and_marked(capsys):
    """The tally the docs promise: most blocks run; the few that cannot are marked with their reason."""
    tally: dict[str, list[str]] = {"run": [], "file": [], "marked": [], "requires": [], "sample": []}
    for page in PAGES:
        for block in blocks(page):
            marker = block.marker or ""
            if marker.startswith("file "):
                tally["file"].append(block.where)
            elif block.kind is None:
                tally["sample"].append(block.where)
            elif marker.startswith("skip"):
                tally["marked"].append(f"{block.where} ({marker.split(':', 1)[1].strip()})")
            elif marker.startswith("requires "):
                tally["requires"].append(block.where)
            else:
                tally["run"].append(block.where)
    with capsys.disabled():
        print(
            f"\ndocs blocks: {len(tally['run'])} run, {len(tally['requires'])} run when an extra is installed, "
            f"{len(tally['file'])} written as files, {len(tally['marked'])} marked: {'; '.join(tally['marked'])}"
        )
    # most blocks run: at least four run (always, or with their extra) for each one that is only marked
    assert len(tally["run"]) + len(tally["requires"]) >= 4 * len(tally["marked"])
