"""encore.compare_modes, python -m encore.compare, structured retrace records and exact
bucketing, from Python. Reports are checked for what they contain, never for their times."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import encore
from encore import nn, optim


def per_step_model():
    encore.manual_seed(1)
    model = nn.Sequential([nn.Dense(4, activation="relu"), nn.Dense(1, activation="sigmoid")])
    model.build((4, 6, 3))
    return model


def make(length):
    x = encore.uniform((4, length, 3), -1.0, 1.0, generator=encore.Generator(length))
    return x, (x[:, :, 0:1] > 0.0)


def test_model_form_reports_modes_and_restores_the_model():
    model = per_step_model()
    adam = optim.Adam(model.parameters(), lr=1e-2)
    before = [p.numpy().copy() for p in model.parameters()]
    report = encore.compare_modes(model=model, loss=nn.binary_crossentropy, optimizer=adam, data=make, length=6,
                                  modes=["eager", "traced", "traced_new_length", "bucket", "predict_traced"],
                                  steps=3, warmup=1, profile_steps=2, length_args=(0, 1), buckets=[8, 16])
    d = report.to_dict()
    assert [m["mode"] for m in d["modes"]] == ["eager", "traced", "traced_new_length", "bucket", "predict_traced"]
    assert report["traced"]["traces"] == 1 and report["traced"]["baseline"] == "eager"
    assert report["traced_new_length"]["traces"] == 5  # first call, warm-up, 3 steps: a new length each
    assert report["eager"]["step_ms_median"] > 0 and len(report["eager"]["step_ms"]) == 5
    assert report["traced"]["break_even_step"] != 0 and report["traced"]["arena_bytes"] > 0
    assert report["eager"]["peak_bytes"] > 0
    # The loss averages over every step: the bucketed step averages over the valid ones.
    assert not report["bucket"].get("error") and report["bucket"]["padding_elements"] > 0
    assert report["bucket"]["retraces_saved"] > 0
    # Every retrace of the new-length mode is recorded as data.
    causes = [r["causes"][0] for r in report["traced_new_length"]["records"][1:]]
    assert all(c["kind"] == "shape" and c["arg_name"] == "x" and c["axis"] == 1 for c in causes)
    assert not d["trained"]
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)
    state = adam.state()
    assert state["lr"].item() == adam.lr
    assert all(not t.numpy().any() for name, t in state.items() if name != "lr")  # slots made meanwhile: zeroed
    text = report.table()
    assert "traced_new_length" in text and "bucket" in text and "refused" not in text
    assert json.loads(report.to_json())["modes"][0]["mode"] == "eager"
    with pytest.raises(KeyError):
        report["fast"]


def test_model_form_restores_when_the_comparison_fails():
    model = per_step_model()
    adam = optim.Adam(model.parameters(), lr=1e-2)
    before = [p.numpy().copy() for p in model.parameters()]
    calls = []

    def failing_loss(y, p):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("loss failed")
        return nn.binary_crossentropy(y, p)

    with pytest.raises(RuntimeError, match="loss failed"):
        encore.compare_modes(model=model, loss=failing_loss, optimizer=adam, data=make(6), modes=["eager"], steps=5)
    for p, b in zip(model.parameters(), before):
        np.testing.assert_array_equal(p.numpy(), b)
    assert adam.iterations == 0 and all(not t.numpy().any() for n, t in adam.state().items() if n != "lr")


def test_model_form_needs_an_optimizer_of_the_models_parameters():
    model = per_step_model()
    sgd = optim.SGD(model.parameters()[:2], lr=0.1)
    with pytest.raises(ValueError, match=r"\[compare_modes\] the sgd optimizer does not hold .*'dense_1.kernel'"):
        encore.compare_modes(model=model, loss=nn.binary_crossentropy, optimizer=sgd, data=make(6))
    unbuilt = nn.Sequential([nn.Dense(1)])
    with pytest.raises(ValueError, match=r"\[compare_modes\] build the model first"):
        encore.compare_modes(model=unbuilt, loss=nn.binary_crossentropy, optimizer=sgd, data=make(6))


def test_step_form_names_arguments_and_says_it_trains():
    model = per_step_model()
    sgd = optim.SGD(model.parameters(), lr=0.1)

    def train_step(inputs, labels):
        sgd.zero_grad()
        loss = nn.binary_crossentropy(labels, model(inputs))
        loss.backward()
        sgd.step()
        return loss

    w = model.parameters()[0].numpy().copy()
    report = encore.compare_modes(train_step, make, length=6, modes=["traced", "traced_new_length"], steps=2,
                                  warmup=0)
    assert report.to_dict()["trained"] and "trained the model" in report.table()
    assert not np.array_equal(model.parameters()[0].numpy(), w)
    record = report["traced_new_length"]["records"][1]
    assert record["causes"][0]["arg_name"] == "inputs"
    w = model.parameters()[0].numpy().copy()
    kept = encore.compare_modes(train_step, [make(6), make(6)], steps=2, warmup=0, state=model.parameters())
    assert not kept.to_dict()["trained"]
    np.testing.assert_array_equal(model.parameters()[0].numpy(), w)


def test_data_forms_and_argument_errors():
    model = per_step_model()

    def predict_step(x, y):
        return model(x)

    assert encore.compare_modes(predict_step, iter([make(6)] * 3), steps=1, warmup=0)["traced"]["traces"] == 1
    assert encore.compare_modes(predict_step, make(6), steps=1, warmup=0, modes=["eager"])["eager"]["calls"] == 2
    with pytest.raises(TypeError, match="length="):
        encore.compare_modes(predict_step, make)
    with pytest.raises(ValueError, match="unknown mode 'fast'"):
        encore.compare_modes(predict_step, make(6), modes=["fast"])
    with pytest.raises(ValueError, match="needs a batch source that makes a batch"):
        encore.compare_modes(predict_step, make(6), modes=["traced_new_length"])
    with pytest.raises(TypeError, match="loss= and optimizer="):
        encore.compare_modes(model=model, data=make(6))
    with pytest.raises(ValueError, match=r"\[compare_modes\] length_args\[1\] = 5 is not an index of the batch's 2"):
        encore.compare_modes(predict_step, make, length=6, modes=["bucket"], buckets=[8], length_args=[0, 5])
    with pytest.raises(ValueError, match="mode 'traced_new_length' needs length_args"):
        encore.compare_modes(predict_step, make, length=6, modes=["traced_new_length"], length_args=[])


def test_plot_draws_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    model = per_step_model()
    report = encore.compare_modes(lambda x, y: model(x), make(6), steps=2, warmup=0)
    path = tmp_path / "modes.png"
    assert report.plot(str(path)) is None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_raises_a_clear_import_error(tmp_path, monkeypatch):
    model = per_step_model()
    report = encore.compare_modes(lambda x, y: model(x), make(6), steps=1, warmup=0)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    path = tmp_path / "modes.png"
    with pytest.raises(ImportError, match=r"Report.plot needs matplotlib: pip install matplotlib") as raised:
        report.plot(str(path))
    assert raised.value.name == "matplotlib"
    assert not path.exists()


SCRIPT = """
import encore
from encore import nn, optim

encore.manual_seed(0)
model = nn.Sequential([nn.Dense(4, activation="relu"), nn.Dense(1, activation="sigmoid")])
model.build((4, 6, 3))
loss = nn.binary_crossentropy
optimizer = optim.Adam(model.parameters(), lr=1e-2)

def data(length):
    x = encore.uniform((4, length, 3), -1.0, 1.0, generator=encore.Generator(length))
    return x, (x[:, :, 0:1] > 0.0)

length = 6
length_args = [0, 1]
modes = ["eager", "traced", "traced_new_length"]
"""


def run_cli(tmp_path, *args):
    script = tmp_path / "my_model.py"
    script.write_text(textwrap.dedent(SCRIPT))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-m", "encore.compare", str(script), *args], capture_output=True,
                          text=True, env=env, timeout=300)


def test_cli_runs_a_script_and_rejects_unknown_flags(tmp_path):
    out = tmp_path / "report.json"
    done = run_cli(tmp_path, "--steps", "2", "--warmup", "0", "--json", str(out))
    assert done.returncode == 0, done.stderr
    assert "traced_new_length" in done.stdout
    assert [m["mode"] for m in json.loads(out.read_text())["modes"]] == ["eager", "traced", "traced_new_length"]
    assert "RuntimeWarning" not in done.stderr  # runpy's "found in sys.modules" warning
    bad = run_cli(tmp_path, "--stpes", "2")
    assert bad.returncode == 2 and "unrecognized arguments: --stpes" in bad.stderr


def test_cli_help_gives_no_runpy_warning():
    # `import encore` must not import encore.compare, or runpy warns before running it as __main__.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-W", "error", "-m", "encore.compare", "--help"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and "usage: python -m encore.compare" in done.stdout


def test_cli_plot_without_matplotlib_stops_before_comparing(tmp_path):
    script = tmp_path / "my_model.py"
    script.write_text(textwrap.dedent(SCRIPT))
    hide = ("import runpy, sys; sys.modules['matplotlib'] = None; sys.argv = ['encore.compare'] + sys.argv[1:]; "
            "runpy.run_module('encore.compare', run_name='__main__', alter_sys=True)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    done = subprocess.run([sys.executable, "-c", hide, str(script), "--plot", str(tmp_path / "p.png")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "--plot: Report.plot needs matplotlib" in done.stderr and done.stdout == ""


def test_structured_retrace_records_and_axis_values():
    f = encore.trace(lambda x, k: x * k, name="scale")
    f(encore.ones(4, 3), 2.0)
    f(encore.ones(4, 5), 2.0)
    f(encore.ones(4, 5), 3.0)
    f(encore.ones(4, 5), 3.0)
    first, shape, static = (r["causes"] for r in f.stats["records"])
    assert first == [{"kind": "first_call", "arg": None, "arg_name": "", "axis": None, "old": "", "new": "",
                      "text": "first call"}]
    assert shape[0]["kind"] == "shape" and (shape[0]["arg"], shape[0]["axis"]) == (0, 1)
    assert (shape[0]["old"], shape[0]["new"]) == ("3", "5")
    assert shape[0]["text"] == "arg 0 (x): shape (4, 3) -> (4, 5), axis 1: 3 -> 5"
    assert static[0]["kind"] == "static_arg" and static[0]["arg_name"] == "k"
    axis1 = [a for a in f.axis_values() if a["arg"] == 0 and a["axis"] == 1][0]
    assert axis1["counts"] == {3: 1, 5: 3} and axis1["arg_name"] == "x"


def test_bucketing_is_exact_or_refused():
    # The model: Conv1D -> GlobalAveragePooling1D -> Dense gave (2, 0) at length 12.
    # The pooling now averages over the valid steps: bucketed == eager over random lengths.
    encore.manual_seed(0)
    pooled = nn.Sequential([nn.Conv1D(4, 3), nn.GlobalAveragePooling1D(), nn.Dense(4)])
    pooled.build((2, 12, 3))
    per_step = nn.Sequential([nn.Conv1D(4, 3, padding="causal", activation="relu"), nn.Dense(2)])
    per_step.build((2, 12, 3))
    rng = np.random.default_rng(3)
    for model in (pooled, per_step):
        g = encore.trace(lambda x: model(x), shapes=encore.bucket(1, [16, 32, 48]))
        for length in rng.integers(4, 49, size=20):
            x = encore.tensor(rng.standard_normal((2, int(length), 3)).astype(np.float32))
            np.testing.assert_allclose(g(x).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)
        assert g.stats["traces"] == 3 and g.stats["padding_elements"] > 0 and g.stats["retraces_saved"] > 0
    # Flatten over the padded axis cannot be exact: refused at trace time, naming the layer.
    flat = nn.Sequential([nn.Flatten(), nn.Dense(2)])
    flat.build((2, 12, 3))
    f = encore.trace(lambda x: flat(x), shapes=encore.bucket(1, [16, 32]))
    with pytest.raises(ValueError, match=r"\[flatten\] cannot be exact under a bucket policy"):
        f(encore.randn(2, 12, 3))


def test_retrace_warning_suggests_a_bucket_only_where_exact():
    per_step = encore.trace(lambda x: encore.relu(x) * 2.0, retrace_warning=2)
    pooled = encore.trace(lambda x: encore.mean(x, 1), retrace_warning=2)
    for fn, exact in ((per_step, True), (pooled, False)):
        with pytest.warns(encore.RetraceWarning) as caught:
            for n in (4, 5, 6):
                fn(encore.ones(2, n, 3))
        message = str(caught[0].message)
        assert ("is exact for this function: bucket(axis 1" in message) == exact, message
        assert ("would not be exact" in message) == (not exact), message


def test_byte_budget_and_break_even_in_stats():
    f = encore.trace(lambda x: encore.exp(x) * 2.0 + 1.0, max_cached_bytes=1)
    f(encore.ones(64))
    f(encore.ones(63))  # over budget: the older graph goes, the latest stays
    assert f.cache_size == 1 and f.cached_bytes > 0 and f.stats["evictions"] == 1
    f(encore.ones(64))
    assert f.stats["records"][-1]["causes"][0]["kind"] == "eviction"
    for _ in range(3):
        f(encore.ones(64))
    assert f.stats["break_even_replays"] != 0 and f.stats["eager_ms"] > 0
    assert "break-even" in f.stats_table()


def conv_model():
    encore.manual_seed(2)
    model = nn.Sequential([nn.Conv1D(8, 3, padding="same", activation="relu"), nn.GlobalAveragePooling1D(),
                           nn.Dense(1, activation="sigmoid")])
    model.build((4, 6, 3))
    return model


def make_pooled(length):
    x = encore.uniform((4, length, 3), -1.0, 1.0, generator=encore.Generator(length))
    return x, (x[:, 0, 0:1] > 0.0)


def test_each_mode_pays_its_own_setups_whatever_the_order_of_modes():
    """A mode never finds a shape another mode set up (a new-length mode used to reuse the
    convolution primitives of the mode before it in the round, and swapping the order swapped
    the verdict): what each mode sets up and traces is the same in either order, and the caller's
    per-shape state (here an autotune choice) is back afterwards."""
    encore.autotune.clear()
    conv_model()(make_pooled(21)[0])  # the caller's own choices for length 21
    before = encore.autotune.entries()
    order = ["eager", "eager_new_length", "traced_new_length", "traced"]
    counts = []
    for modes in (order, order[::-1]):
        model = conv_model()
        report = encore.compare_modes(model=model, loss=nn.binary_crossentropy, optimizer=optim.SGD(model.parameters()),
                                      data=make_pooled, length=6, modes=modes, steps=3, warmup=0, profile_steps=0)
        counts.append({m: (report[m]["setups"], report[m]["traces"]) for m in order})
    assert counts[0] == counts[1]
    setups = {m: counts[0][m][0] for m in order}
    assert setups["eager"] > 0
    assert setups["eager_new_length"] == 4 * setups["eager"]  # every call a new length
    assert setups["traced_new_length"] == 4 * setups["traced"] > 0
    assert encore.autotune.entries() == before


def test_table_numbers_have_few_digits():
    report = encore.compare_modes(lambda x: encore.exp(x).sum(), data=(encore.ones(4),), modes=["eager", "traced"],
                                  steps=2)
    table = report.table()
    assert "e-0" not in table and "e+0" not in table, table
