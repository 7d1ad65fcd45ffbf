"""goodput.run / goodput.capacity: the installed goodput command in the background (against its
embedded simulator), returning the same report as report.json; stopping keeps the results."""

import asyncio
import os
import time

import goodput


def test_run_is_non_blocking_and_returns_the_cli_report(tmp_path):
    started = time.monotonic()
    run = goodput.run(rate=20, requests=30, warmup=5, out=str(tmp_path / "run"))
    assert time.monotonic() - started < 1.0, "run() must return at once"
    report = run.wait(timeout=120)
    assert run.returncode == 0, run.log
    assert report.completed == 25
    assert report.to_dict() == goodput.Report.load(tmp_path / "run").to_dict()
    assert os.path.exists(tmp_path / "run" / "report.html")
    assert report.ttft_ms.count == 25


def test_a_run_can_be_awaited():
    async def main():
        return await goodput.run(concurrency=2, requests=10, warmup=2)

    report = asyncio.run(main())
    assert report.completed == 8


def test_stopping_a_run_keeps_its_results():
    run = goodput.run(rate=10, duration=120, warmup=0)
    time.sleep(4)
    assert not run.done()
    report = run.stop()
    assert run.returncode == 130, run.log
    assert report.interrupted
    assert report.completed > 0


def test_bad_options_are_reported_with_the_commands_message():
    run = goodput.run(rate=-1, requests=5)
    try:
        run.wait(timeout=60)
    except goodput.GoodputError as error:
        assert "--rate" in str(error)
    else:
        raise AssertionError("a negative rate must fail")


def test_capacity_runs_the_capacity_search(tmp_path):
    run = goodput.capacity(virtual_time=True, slo="ttft=1s,tpot=50ms", out=str(tmp_path / "cap"))
    report = run.wait(timeout=300)
    assert run.returncode == 0, run.log
    assert report.capacity is not None
    assert report.capacity["max_sustainable_rate_per_sec"] > 0


def test_virtual_time_runs_what_a_live_run_against_the_simulator_runs(tmp_path):
    # Reasoning and correlation ids go through the one runner on the simulator's clock: a
    # minute of load in a fraction of a second, its report the live run's.
    started = time.monotonic()
    run = goodput.run(virtual_time=True, rate=20, duration=60, warmup=0, sim_reasoning_tokens=4,
                      input_tokens=32, output_tokens=8, seed=3, out=str(tmp_path / "virtual"))
    report = run.wait(timeout=120)
    assert run.returncode == 0, run.log
    assert time.monotonic() - started < 60, "virtual time does not wait"
    step = report.to_dict()["steps"][0]
    assert step["reasoning"]["reasoning_tokens_total"] == 4 * report.completed
    assert report.completed > 1000
