"""``tau2-gym eval`` on hostile results files and output paths: each bad file is reported, the others are
scored, nothing crashes, and no temporary file outlives a failing or killed write."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from test_eval import mock_cases, read, results_26_3, write  # noqa: F401 - fixture

from tau2_gym.cli import main
from tau2_gym.core.results_file import write_json_atomic


def test_deeply_nested_and_huge_integer_files_are_unreadable_and_others_still_scored(
    tmp_path,
    capsys,
    mock_domain,
    mock_cases,  # noqa: F811 - the fixture imported from test_eval
):
    good = write(tmp_path / "good.json", results_26_3(mock_domain, mock_cases[:2]))
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 10_000 + "]" * 10_000)
    huge = tmp_path / "huge.json"
    huge.write_text('{"info": ' + "9" * 5_000 + "}")
    code = main(["eval", str(deep), str(huge), str(good), "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert "deep.json" in err and "huge.json" in err and "2 input(s) could not be read" in err
    assert read(tmp_path / "out" / "good.json")["simulations"]


@pytest.mark.parametrize("bad", [1, "x", None])
def test_simulations_that_are_not_objects_are_counted_as_errors(tmp_path, capsys, mock_domain, mock_cases, bad):  # noqa: F811 - the fixture imported from test_eval
    raw = results_26_3(mock_domain, mock_cases[:2])
    raw["simulations"].insert(1, bad)
    src = write(tmp_path / "run.json", raw)
    assert main(["eval", str(src)]) == 1  # a simulation could not be scored
    out = capsys.readouterr()
    assert "not an object" in out.err
    assert "simulations=3 scored=2" in out.out and "1 scoring error(s)" in out.out, out.out


def test_output_under_a_file_or_unwritable_folder_fails_before_scoring(
    tmp_path,
    capsys,
    mock_domain,
    mock_cases,  # noqa: F811 - the fixture imported from test_eval
    monkeypatch,
):
    import tau2_gym.cli.eval as ev

    calls = []
    monkeypatch.setattr(ev, "rescore_file", lambda *a, **k: calls.append(1))
    src = write(tmp_path / "run.json", results_26_3(mock_domain, mock_cases[:1]))
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    assert main(["eval", str(src), "-o", str(blocker / "out.json")]) == 2
    assert "is a file" in capsys.readouterr().err
    assert calls == []
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as root: permissions are not enforced")
        assert main(["eval", str(src), "-o", str(locked / "out.json")]) == 2
        assert "not writable" in capsys.readouterr().err
    finally:
        locked.chmod(0o700)
    assert calls == []


def test_failed_write_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "out.json"
    with pytest.raises(TypeError):
        write_json_atomic(target, {"x": object.__new__(type("Unserialisable", (), {}))})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_temporary_file_of_a_killed_write_is_removed_by_the_next_write(tmp_path):
    target = tmp_path / "big.json"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys; from pathlib import Path; from tau2_gym.core.results_file import write_json_atomic\n"
                "write_json_atomic(Path(sys.argv[1]), [{'k': 'v' * 50, 'n': i} for i in range(3_000_000)])"
            ),
            str(target),
        ]
    )
    try:
        deadline = time.monotonic() + 60
        while not list(tmp_path.glob(".big.json.*.tmp")) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert list(tmp_path.glob(".big.json.*.tmp")), "the child never started writing"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(30)
    assert list(tmp_path.glob(".big.json.*.tmp")) and not target.exists()  # a SIGKILL cannot clean up
    write_json_atomic(target, {"ok": True})
    assert json.loads(target.read_text()) == {"ok": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.json"]


def test_sigterm_during_a_cli_write_leaves_no_temporary_file(tmp_path):
    """SIGTERM mid-write (the CLI turns it into SystemExit): the temporary file is removed, no output appears."""
    import signal
    import subprocess
    import sys
    import textwrap

    out = tmp_path / "out.json"
    child = textwrap.dedent(f"""
        import json, sys, time
        from pathlib import Path
        import tau2_gym.core.results_file as results
        from tau2_gym import cli

        def slow_dump(obj, fh, **kw):
            fh.write("{{"); fh.flush(); print("writing", flush=True); time.sleep(60)

        results.json.dump = slow_dump
        cli._exit_on_sigterm()
        results.write_json_atomic(Path({str(out)!r}), {{"a": 1}})
    """)
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # the write is under way
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []
