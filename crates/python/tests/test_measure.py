"""goodput.measure against functions whose cost is known: sleep-based and compute-based NumPy
"models" (within 2 % of a direct timing), coroutines at concurrency 8, failures as data, and
Ctrl-C keeping a partial report. The timing tests compare goodput with a
perf_counter timing of the very same calls (so a busy machine slows both alike) and retry up to
three times."""

import _thread
import asyncio
import json
import signal
import threading
import time

import numpy as np
import pytest

import goodput

TOLERANCE = 0.02


def relative(a, b):
    return abs(a - b) / b


def direct_timing(model, inputs, calls, batch_size):
    """The seed's loop, timing each call with perf_counter: median ms per call and items/s."""
    times = []
    for i in range(calls):
        start = time.perf_counter()
        model(inputs[i % len(inputs)])
        times.append(time.perf_counter() - start)
    return 1000 * float(np.median(times)), calls * batch_size / sum(times)


def check_known_cost(model, inputs, calls, batch_size):
    """goodput's e2e p50 and items/s against a direct timing of the same calls: each call is
    also timed with perf_counter around the model, as seed 001's loop does, so a busy machine
    slows both alike. Up to 3 attempts. A separate timing loop right before is printed too."""
    own = []

    def timed(x):
        start = time.perf_counter()
        model(x)
        own.append(time.perf_counter() - start)

    attempts = []
    for _ in range(3):
        loop_ms, loop_items = direct_timing(model, inputs, calls, batch_size)
        own.clear()
        report = goodput.measure(timed, inputs, warmup=5, requests=calls, batch_size=batch_size)
        measured = own[5:]  # warm-up excluded, as goodput excludes it
        # Nearest-rank p50, as goodput computes it.
        direct_ms = 1000 * sorted(measured)[(calls + 1) // 2 - 1]
        direct_items = calls * batch_size / sum(measured)
        p50, items = report.e2e_ms.p50, report.items_per_sec
        attempts.append((p50, direct_ms, items, direct_items, loop_ms, loop_items))
        if relative(p50, direct_ms) <= TOLERANCE and relative(items, direct_items) <= TOLERANCE:
            assert report.completed == calls and report.failed == 0
            return report, attempts
    pytest.fail(f"goodput vs direct (p50 ms, direct ms, items/s, direct items/s, loop ms, loop items/s): {attempts}")


def test_sleep_based_numpy_model_matches_a_direct_timing():
    weights = np.random.default_rng(0).standard_normal((64, 16))
    batches = [np.random.default_rng(i).standard_normal((32, 64)) for i in range(8)]

    def model(batch):  # a small matmul and 10 ms of "device time"
        out = np.tanh(batch @ weights)
        time.sleep(0.010)
        return out

    report, attempts = check_known_cost(model, batches, calls=150, batch_size=32)
    print('sleep-based (goodput p50 ms, direct ms, items/s, direct items/s, loop ms, loop items/s):', attempts)
    assert 10.0 <= report.e2e_ms.p50 < 12.0, report.e2e_ms
    assert report.stable


def test_compute_based_numpy_model_matches_a_direct_timing():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((192, 192))
    batches = [rng.standard_normal((192, 192)) for _ in range(4)]

    def model(batch):  # pure compute: twenty 192×192 matmuls
        out = batch
        for _ in range(20):
            out = np.tanh(out @ a)
        return out

    report, attempts = check_known_cost(model, batches, calls=100, batch_size=1)
    print('compute-based (goodput p50 ms, direct ms, items/s, direct items/s, loop ms, loop items/s):', attempts)
    assert report.e2e_ms.count == 100


def test_coroutines_run_eight_at_a_time():
    in_flight = 0
    most = 0

    async def generate(prompt):
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.020)
        in_flight -= 1
        return 7  # tokens generated

    report = goodput.measure(generate, ["a", "b", "c"], warmup=8, concurrency=8, requests=400)
    assert most == 8
    assert report.completed == 400 and report.failed == 0
    # Eight 20 ms calls at a time: 400 calls/s, 2800 tokens/s (event-loop slack allowed).
    assert 300 < report.requests_per_sec <= 410, report.summary()
    assert report.output_tokens_per_sec == pytest.approx(7 * report.requests_per_sec, rel=1e-9)
    assert 20.0 <= report.e2e_ms.p50 < 26.0, report.e2e_ms


def test_a_call_that_raises_is_a_failed_request_of_its_kind():
    def flaky(x):
        if x % 3 == 0:
            raise ValueError(f"bad input {x}")
        if x % 3 == 1:
            raise TimeoutError("too slow")
        return None

    report = goodput.measure(flaky, list(range(30)), warmup=0)
    assert report.completed == 10
    assert report.failed == 20
    assert report.failed_by_kind == {"error": 10, "timeout": 10}
    assert report.failure_examples["error"] == "ValueError: bad input 0"
    assert "failures" in [w.code for w in report.warnings]
    assert "no_warmup" in [w.code for w in report.warnings]


def test_ctrl_c_inside_measure_returns_a_partial_report():
    def model(x):
        time.sleep(0.005)

    # Python's own Ctrl-C handler, as in a terminal: a process started in the background by a
    # non-interactive shell inherits SIGINT ignored, and then `interrupt_main` does nothing.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.8, _thread.interrupt_main)  # what Ctrl-C does
    timer.start()
    try:
        started = time.monotonic()
        report = goodput.measure(model, [1], warmup=0, duration=60)
        elapsed = time.monotonic() - started
    finally:
        timer.join()
        signal.signal(signal.SIGINT, inherited)
    assert elapsed < 5, elapsed
    assert report.interrupted
    assert report.completed > 20
    assert "interrupted" in [w.code for w in report.warnings]


def test_keyboard_interrupt_raised_by_the_function_stops_the_measurement():
    def model(x):
        if x >= 50:
            raise KeyboardInterrupt
        time.sleep(0.001)

    report = goodput.measure(model, list(range(1000)), warmup=0)
    assert report.interrupted
    assert report.completed == 50
    assert report.failed_by_kind == {"cancelled": 1}


def test_sync_items_and_tokens_are_applied():
    synced = []

    def generate(batch):
        time.sleep(0.002)
        return {"generated_tokens": 10 * len(batch)}

    report = goodput.measure(
        generate,
        [[1, 2], [3, 4, 5, 6]],
        warmup=2,
        requests=40,
        sync=lambda: synced.append(1),
        items=len,
        tokens=lambda out: out["generated_tokens"],
    )
    assert len(synced) == 42
    step = report.step
    assert step["tokens"]["output_total"] == 20 * 20 + 20 * 40
    assert report.items_per_sec == pytest.approx(3 * report.requests_per_sec, rel=0.05)


def test_report_exports(tmp_path):
    report = goodput.measure(lambda: 3, warmup=1, requests=20, label="three tokens")
    data = report.to_dict()
    assert data["run"]["api"] == "in-process"
    assert data["run"]["model"] == "three tokens"
    assert json.loads(report.to_json()) == data
    page = report.to_html(tmp_path / "report.html")
    with open(page, encoding="utf-8") as f:
        text = f.read()
    assert 'id="goodput-data"' in text and "three tokens" in text
    assert goodput.Report.from_json(report.to_json()).to_dict() == data


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"concurrency": 0}, "concurrency"),
        ({"batch_size": 0}, "batch_size"),
        ({"duration": "ten seconds"}, "duration"),
        ({"slo": "latency<fast"}, "slo"),
        ({"warmup": -1}, "warmup"),
    ],
)
def test_bad_settings_are_clear_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        goodput.measure(lambda: None, **{"requests": 5, **kwargs})


def test_open_loop_rate_schedules_calls_regardless_of_completions():
    def model(x):
        time.sleep(0.001)

    report = goodput.measure(model, [0], warmup=0, rate=200, duration=1.0, concurrency=4)
    step = report.step
    assert step["load"]["mode"] == "open"
    assert step["load"]["rate_per_sec"] == 200
    assert 150 < report.completed < 260, report.summary()
    assert report.e2e_ms.p50 >= 1.0


def test_the_documented_pytorch_cpu_example():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64)
    ).eval()
    batches = [torch.randn(8, 64) for _ in range(10)]

    @torch.inference_mode()
    def forward(batch):
        return model(batch)

    sync = torch.cuda.synchronize if torch.cuda.is_available() else None
    report = goodput.measure(
        forward, batches, warmup=5, batch_size=8, requests=50, sync=sync,
        tags={"hardware": "cpu", "dtype": "float32"},
    )
    assert report.completed == 50
    assert report.items_per_sec == pytest.approx(8 * report.requests_per_sec, rel=1e-9)
    assert "hardware_not_recorded" not in [w.code for w in report.warnings]
