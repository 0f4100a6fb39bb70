"""Every CLI mistake is one ``error:`` line naming the fix; no traceback without ``TAU2_GYM_DEBUG``; a closed
pipe ends the output quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tau2_gym.cli import main


@pytest.fixture()
def files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"x":')
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([1, 2]))
    return {"bad": str(bad), "list": str(listed), "missing": str(tmp_path / "missing.json"), "tmp": str(tmp_path)}


MISTAKES = [
    ("demo --envs nope", "unknown env or domain 'nope'"),
    ("demo --num-tasks x", "invalid int value"),
    ("demo --num-tasks -1", "--num-tasks must be 0 (all) or more"),
    ("demo --agents nobody", "unknown scripted agent 'nobody'"),
    ("demo --data-version nope==1", "unknown data version"),
    ("demo --data-dir {missing}", "does not exist"),
    ("data", "the following arguments are required"),
    ("data fetch --version nope", "unknown data version"),
    ("data verify --data-dir {missing}", "does not exist"),
    ("eval {missing}", "no such file"),
    ("eval {bad}", "is not readable JSON"),
    ("eval {list} --judge bogus:x", "unknown judge"),
    ("export {missing} --output {tmp}/out", "no such file"),
    ("export {list} --output {tmp}/out", "is not a tau2 results file"),
    ("export {list} --output {tmp}/out --format tokens", "needs a tokenizer"),
    ("replay {missing} --output {tmp}/r.json", "no such file"),
    ("replay {bad} --output {tmp}/r.json", "is not readable JSON"),
    ("replay {list}", "--output REPORT.json is required"),
    ("report {missing} --output {tmp}/r.html", "no such file"),
    ("report {list} --output {tmp}/r.html", "a results file holds a JSON object"),
    ("report --bootstrap-samples -3 {bad} --output {tmp}/r.html", "--bootstrap-samples must be >= 0"),
    ("generate --domain nope --n 2 --out {tmp}/g", "unknown domain 'nope'; domains with a task generator are"),
    ("generate --domain mock --n 0 --out {tmp}/g", "--n: must be a positive integer, got 0"),
    ("generate --domain mock --n 2 --intents fly --out {tmp}/g", "unknown intent 'fly' for mock; intents are"),
    ("generate --domain mock --n 2 --out {tmp}", "exists and is not a generated task set"),
]


@pytest.mark.parametrize("command, says", MISTAKES, ids=[m[0].split(" {")[0] for m in MISTAKES])
def test_each_cli_mistake_is_one_error_line(command, says, files, capsys, monkeypatch):
    monkeypatch.delenv("TAU2_GYM_DEBUG", raising=False)
    argv = command.format(**files).split()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own mistakes exit from parse_args
        code = exc.code
    out, err = capsys.readouterr()
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code not in (0, None), (argv, out, err)
    assert len(errors) == 1 and says in errors[0], err
    assert "Traceback" not in err and "usage:" not in err
    assert not out.strip(), out  # nothing half-printed before the mistake is found


def test_an_unexpected_failure_is_one_line_and_debug_shows_the_traceback(capsys, monkeypatch):
    from tau2_gym.cli import demo

    def boom(args):
        raise RuntimeError("something broke\non two lines")

    monkeypatch.setattr(demo, "run", boom)
    monkeypatch.delenv("TAU2_GYM_DEBUG", raising=False)
    assert main(["demo"]) == 1
    err = capsys.readouterr().err
    assert err == "error: RuntimeError: something broke on two lines (TAU2_GYM_DEBUG=1 shows the traceback)\n"
    monkeypatch.setenv("TAU2_GYM_DEBUG", "1")
    with pytest.raises(RuntimeError, match="something broke"):
        main(["demo"])


@pytest.mark.slow
def test_demo_into_a_closed_pipe_exits_quietly():
    """``tau2-gym demo | head -5``: the reader leaves after five lines; no BrokenPipeError traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tau2_gym.cli", "demo", "--num-tasks", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "TAU2_GYM_DEBUG"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    head = [proc.stdout.readline() for _ in range(5)]
    proc.stdout.close()  # as `head` does
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert head[0].startswith(b"data: ")
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert code == 0
