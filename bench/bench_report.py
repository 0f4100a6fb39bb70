"""``tau2-gym report`` on 10,000 simulations: build time, output size, and page load in headless Chromium.

    python bench/bench_report.py                       # 10,000 simulations (airline, mixed scripted agents)
    python bench/bench_report.py --sims 2000 --no-browser
    python bench/bench_report.py --screenshot docs/report.png   # also the README's screenshot (two small runs)

The simulations are a real ``tau2-gym rollout`` (every airline task, mixed scripted agents: passes, wrong
arguments, hallucinated tools, dropped writes, give-ups) repeated with new ids and trial numbers until there are
``--sims`` of them. Scripted conversations are short (about 7 messages); the report's size grows with the
conversations' text, so the "bytes per simulation" row says what to expect for longer ones. Timed once each
(a report is built once): reading + validating + analysing the file, rendering the HTML, the whole
``write_report``, plain and ``--compress``; then Chromium's navigation timing of each written file
(DOMContentLoaded, load) and the time from opening the last simulation to its details on screen. There is no
upstream counterpart (upstream has no report).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests"))

from _common import fmt_bytes, fmt_time, print_table  # noqa: E402 - after sys.path gets the helpers' folder
from test_report import CHROMEDRIVER, CHROMIUM, CHROMIUM_FLAGS, mixed_rollout  # noqa: E402 - after sys.path gets the helpers' folder

from tau2_gym.core.results_file import read_json_any, write_json_atomic  # noqa: E402 - after sys.path gets the helpers' folder
from tau2_gym.results.report import build_report, load_run, write_report  # noqa: E402 - after sys.path gets the helpers' folder


def synthesise(real: dict, n: int) -> dict:
    """``real`` with its simulations repeated (new ids, trial numbers continuing) up to ``n``."""
    out = copy.copy(real)
    sims = real["simulations"]
    trials = 1 + max(s["trial"] for s in sims)
    made = []
    for i in range(n):
        s = dict(sims[i % len(sims)])
        s["id"] = str(uuid.UUID(int=i))
        s["trial"] = s["trial"] + trials * (i // len(sims))
        made.append(s)
    out["simulations"] = made
    out["info"] = dict(real["info"], num_trials=trials * -(-n // len(sims)))
    return out


def timed(fn, *a, **k):
    """(wall seconds, CPU seconds of this process, result): the machine may be shared, CPU time is steadier."""
    w, c = time.perf_counter(), time.process_time()
    out = fn(*a, **k)
    return time.perf_counter() - w, time.process_time() - c, out


def browser(width: int = 1400, height: int = 1000):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS + (f"--user-data-dir={tempfile.mkdtemp()}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def page_timing(path: Path, click: int) -> dict:
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser()
    try:
        t0 = time.perf_counter()
        driver.get(path.resolve().as_uri())
        wall = time.perf_counter() - t0
        nav = driver.execute_script(
            "const e = performance.getEntriesByType('navigation')[0];"
            "return [e.domContentLoadedEventEnd, e.loadEventEnd];"
        )
        t1 = time.perf_counter()
        driver.execute_script("location.hash = arguments[0]", f"#s{click}")
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return document.querySelectorAll('#detail .conversation .msg').length") > 0
        )
        detail = time.perf_counter() - t1
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        return {"dcl": nav[0] / 1000, "load": nav[1] / 1000, "wall": wall, "detail": detail, "errors": errors}
    finally:
        driver.quit()


def screenshot(out: Path, work: Path) -> None:
    """Two small airline runs side by side, a failed simulation with a DB diff open: the README's picture."""
    from selenium.webdriver.support.ui import WebDriverWait
    from test_report import MixedPolicy

    from tau2_gym.runner.collect import collect

    a = work / "agent_v1.json"
    b = work / "agent_v2.json"
    collect(
        None,
        MixedPolicy(("oracle", "wrong_arguments", "oracle", "hallucinating", "oracle", "give_up")),
        domain="airline",
        num_tasks=12,
        num_trials=3,
        output=str(a),
        progress=False,
    )
    collect(
        None,
        MixedPolicy(("oracle", "oracle", "wrong_arguments", "oracle", "skip_last_action", "oracle")),
        domain="airline",
        num_tasks=12,
        num_trials=3,
        output=str(b),
        progress=False,
    )
    html = work / "report.html"
    write_report([a, b], html)
    raw = json.loads(a.read_text())
    pick = next(
        (
            i
            for i, s in enumerate(raw["simulations"])
            if s["reward_info"] and (s["reward_info"].get("info") or {}).get("db_diff")
        ),
        next(i for i, s in enumerate(raw["simulations"]) if s["reward_info"]["reward"] < 1),
    )
    driver = browser(1800, 1050)
    try:
        driver.get(html.resolve().as_uri() + f"#s{pick}")
        WebDriverWait(driver, 10).until(
            lambda d: d.execute_script("return document.querySelectorAll('#detail .conversation .msg').length") > 0
        )
        driver.execute_script(
            "for (const d of document.querySelectorAll('#detail details.call')) d.open = true;"
            "document.body.style.margin = '0'; document.getElementById('detail').style.width = '50%';"
            "window.scrollTo(0, 0);"
        )  # the summary beside the open simulation
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))
    finally:
        driver.quit()
    print(f"screenshot: {out}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sims", type=int, default=10_000)
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--screenshot", help="also write the README's screenshot to this PNG")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_report_"))
    t0 = time.perf_counter()
    real = mixed_rollout(work / "real.json", num_tasks=50, num_trials=4)
    rollout_s = time.perf_counter() - t0
    raw = read_json_any(real)
    big = work / "big.json"
    write_json_atomic(big, synthesise(raw, args.sims), indent=None)

    json_s, json_cpu, _ = timed(read_json_any, big)
    load_s, load_cpu, run = timed(load_run, big)
    render_s, render_cpu, text = timed(build_report, [run])
    out = work / "report.html"
    total_s, total_cpu, result = timed(write_report, [big], out)
    assert result.simulations == args.sims and len(text) > 0
    size_in, size_out = big.stat().st_size, out.stat().st_size
    rows = [
        (
            "simulations (real rollout repeated)",
            f"{args.sims:,} ({len(raw['simulations'])} real, {rollout_s:.1f} s)",
            "-",
            "-",
        ),
        ("results file (compact JSON)", fmt_bytes(size_in), "-", "-"),
        ("json.load of the results file (wall / CPU)", f"{fmt_time(json_s)} / {fmt_time(json_cpu)}", "-", "-"),
        (
            "read + validate + analyse (load_run)",
            f"{fmt_time(load_s)} / {fmt_time(load_cpu)}",
            "-",
            f"{load_cpu / json_cpu:.1f}x json.load (CPU)",
        ),
        ("render HTML (build_report)", f"{fmt_time(render_s)} / {fmt_time(render_cpu)}", "-", "-"),
        (
            "tau2-gym report end to end (write_report)",
            f"{fmt_time(total_s)} / {fmt_time(total_cpu)}",
            "-",
            f"{args.sims / total_cpu:,.0f} sims per CPU-s",
        ),
        ("report size", fmt_bytes(size_out), "-", f"{size_out / size_in:.2f}x the results file"),
        ("report bytes per simulation", f"{size_out / args.sims:,.0f} B", "-", "-"),
    ]
    packed = work / "report_compressed.html"
    packed_s, packed_cpu, _ = timed(write_report, [big], packed, compress=True)
    rows += [
        (
            "--compress: end to end",
            f"{fmt_time(packed_s)} / {fmt_time(packed_cpu)}",
            "-",
            f"{args.sims / packed_cpu:,.0f} sims per CPU-s",
        ),
        (
            "--compress: report size",
            fmt_bytes(packed.stat().st_size),
            "-",
            f"{packed.stat().st_size / size_in:.2f}x the results file",
        ),
    ]
    browser_ok = os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)
    if not args.no_browser and not browser_ok:
        print(f"[no {CHROMIUM} / {CHROMEDRIVER}: page timing skipped]", file=sys.stderr)
    if not args.no_browser and browser_ok:
        for name, path in (("plain", out), ("--compress", packed)):
            t = page_timing(path, args.sims - 1)
            rows += [
                (f"Chromium {name}: DOMContentLoaded", fmt_time(t["dcl"]), "-", "-"),
                (f"Chromium {name}: load event", fmt_time(t["load"]), "-", "-"),
                (f"Chromium {name}: click -> details shown (last sim)", fmt_time(t["detail"]), "-", "-"),
                (f"Chromium {name}: console errors", str(len(t["errors"])), "-", "-"),
            ]
    print_table(f"tau2-gym report, {args.sims:,} simulations (airline)", rows)
    if args.screenshot:
        screenshot(Path(args.screenshot), work)


if __name__ == "__main__":
    main()
