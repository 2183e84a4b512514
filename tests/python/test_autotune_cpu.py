"""The CPU's per-shape convolution choices through Python: each policy's pick, the exhaustive
search's timings, and a saved file that spares a later search."""

import encore
import pytest


@pytest.fixture(autouse=True)
def heuristic_afterwards():
    yield
    encore.autotune.set_policy("heuristic")
    encore.autotune.clear()


def conv_step():
    x = encore.normal((4, 48, 64), generator=encore.Generator(1)).requires_grad_()
    w = encore.normal((12, 64, 64), generator=encore.Generator(2)).requires_grad_()
    y = encore.conv1d(x, w, padding="same")
    (y * y).sum().backward()
    return y, x.grad, w.grad


def cpu_choices():
    return {e["op"]: e for e in encore.autotune.entries() if e["backend"] == "onednn"}


def test_policies_pick_as_documented_and_agree():
    results = {}
    for policy in ("exhaustive", "heuristic", "off"):
        encore.autotune.clear()
        encore.autotune.set_policy(policy)
        results[policy] = conv_step()
        chosen = cpu_choices()
        assert set(chosen) == {"conv1d", "conv1d_backward_data", "conv1d_backward_filter"}
        assert all(e["source"] == policy for e in chosen.values())
        if policy == "exhaustive":
            searched = chosen
            for e in chosen.values():
                assert e["timings"] and e["time_ms"] == min(ms for _, ms in e["timings"])
        else:
            assert all(e["time_ms"] is None and not e["timings"] for e in chosen.values())
    for op, e in cpu_choices().items():  # off: the GEMM-based implementation where offered
        if any("gemm" in impl and "brg" not in impl for impl, _ in searched[op]["timings"]):
            assert "gemm" in e["algorithm"]
    for policy in ("exhaustive", "off"):
        for ref, got in zip(results["heuristic"], results[policy]):
            assert (ref - got).abs().max().item() <= 1e-5 * ref.abs().max().item()


def test_saved_choices_spare_the_search(tmp_path):
    encore.autotune.set_policy("exhaustive")
    conv_step()
    path = tmp_path / "choices.txt"
    encore.autotune.save(path)
    encore.autotune.clear()
    encore.autotune.load(path)
    before = encore.ledger.as_dict()
    conv_step()
    after = encore.ledger.as_dict()
    assert after["autotunes"] == before["autotunes"]
    assert after["autotune_hits"] - before["autotune_hits"] == 3
    assert all(e["from_file"] for e in cpu_choices().values())
    path.write_text(path.read_text().replace("\tonednn", "\tmkl"))
    with pytest.raises(encore.InvalidValueError, match="unknown backend 'mkl'"):
        encore.autotune.load(path)


def test_graph_dump_names_each_convolutions_implementation():
    encore.autotune.set_policy("off")
    w = encore.normal((3, 4, 8), generator=encore.Generator(3))
    step = encore.trace(lambda x: encore.conv1d(x, w, padding="same").sum())
    step(encore.normal((2, 30, 4)))
    line = next(l for l in step.graph().splitlines() if "conv1d(" in l)
    assert line.endswith("# " + cpu_choices()["conv1d"]["algorithm"]) and "gemm" in line


def test_compare_modes_reports_the_implementation_per_convolution():
    from encore import nn, optim
    model = nn.Sequential([nn.Conv1D(8, 3, padding="same"), nn.GlobalAveragePooling1D(), nn.Dense(1)])
    model.build((4, 20, 6))
    x = encore.normal((4, 20, 6), generator=encore.Generator(1))
    y = encore.normal((4, 1), generator=encore.Generator(2))
    report = encore.compare_modes(model=model, loss=nn.mean_squared_error, optimizer=optim.SGD(model.parameters()),
                                  data=(x, y), modes=["eager", "traced"], steps=2, warmup=0, profile_steps=1)
    for mode in ("eager", "traced"):
        ops = {a.split(":")[0] for a in report[mode]["algorithms"]}
        assert {"conv1d", "conv1d_backward_filter"} <= ops, report[mode]["algorithms"]
    forward = next(a for a in report["eager"]["algorithms"] if a.startswith("conv1d: "))
    assert "eager ran conv1d: " + forward.split(": ")[1].split(" (")[0] in report.table()
