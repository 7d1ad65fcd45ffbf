"""The `goodput` command pip installed (the console script running crates/cli in-process):
exit statuses and signals as the native binary's — the first Ctrl-C or SIGTERM stops a run and
keeps its report (exit 130), a second Ctrl-C exits at once; `python -m goodput` is the same."""

import os
import signal
import subprocess
import sys
import time

import goodput


def start(*args, **kwargs):
    return subprocess.Popen(
        [goodput.binary(), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        **kwargs,
    )


def test_the_installed_command_is_the_console_script():
    with open(goodput.binary(), "rb") as script:
        assert b"goodput._cli" in script.read(), "pip's console script runs goodput._cli.main"


def test_version_and_usage_errors_exit_as_the_binary():
    version = subprocess.run([goodput.binary(), "--version"], capture_output=True, text=True)
    assert version.returncode == 0
    assert version.stdout.startswith("goodput ")
    assert version.stdout.split()[1].startswith(goodput.__version__)
    usage = subprocess.run([goodput.binary(), "run", "--no-such-flag"], capture_output=True, text=True)
    assert usage.returncode == 2
    assert "--no-such-flag" in usage.stderr
    invalid = subprocess.run([goodput.binary(), "run", "--rate", "-1"], capture_output=True, text=True)
    assert invalid.returncode == 2
    assert invalid.stderr.startswith("error: "), invalid.stderr


def test_python_dash_m_runs_the_same_command():
    result = subprocess.run([sys.executable, "-m", "goodput", "--version"], capture_output=True, text=True)
    assert result.returncode == 0
    assert result.stdout.startswith("goodput ")


def stop_running(signals, tmp_path):
    out = tmp_path / "run"
    process = start("run", "--rate", "10", "--duration", "120s", "--warmup", "0", "--no-live", "--out", str(out))
    time.sleep(4)
    assert process.poll() is None, process.stderr.read()
    for number in signals:
        process.send_signal(number)
        time.sleep(0.2)
    _, stderr = process.communicate(timeout=60)
    return process.returncode, out, stderr.decode()


def test_ctrl_c_stops_a_run_and_keeps_its_report(tmp_path):
    status, out, stderr = stop_running([signal.SIGINT], tmp_path)
    assert status == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    report = goodput.Report.load(out)
    assert report.interrupted
    assert report.completed > 0
    assert os.path.exists(out / "report.html")


def test_sigterm_stops_a_run_and_keeps_its_report(tmp_path):
    status, out, stderr = stop_running([signal.SIGTERM], tmp_path)
    assert status == 130, stderr
    assert goodput.Report.load(out).interrupted


def test_a_second_ctrl_c_exits_at_once(tmp_path):
    status, _, stderr = stop_running([signal.SIGINT, signal.SIGINT], tmp_path)
    assert status == 130, stderr
    assert "Traceback" not in stderr, stderr
