"""``benchmarks/hec.py`` (``python -m spgnn bench hec``): the push-cap rule and the tables, on made-up records (no runs)."""

from spgnn._benchmarks import hec as bench


def _off(P=8, M=4, h=1000, f=100, hidden=10):
    ids = h * P * M * 8                           # halo-fetch:ids bytes per epoch
    return {"ranks": P, "iterations_per_epoch": M, "features": f, "hidden": hidden,
            "fanout": [3, 2, 2], "hec": "off", "test_acc": 0.8, "epochs": 2, "bench_graph": "g",
            "bench_extra": ["--hec", "off"], "halo_bytes": ids + h * P * M * f * 4,
            "grad_bytes": 10, "bytes_per_epoch_by_label": {"halo-fetch:ids": ids}}


def test_push_cap_rule_bounds_the_push_bytes_by_a_third_of_the_fetch():
    off = _off()
    nc = bench.push_cap_rule(off)
    b = [100 * 4 + 8, 10 * 4 + 8, 10 * 4 + 8]
    assert nc == int(1000 * b[0] // (3 * 7 * sum(b)))
    # the most a --hec on epoch can push: nc rows per peer per level per iteration
    worst = off["ranks"] * off["iterations_per_epoch"] * 7 * nc * sum(b)
    assert 3 * worst <= off["halo_bytes"]
    assert bench.push_cap_rule(_off(P=1)) >= 1 and bench.push_cap_rule(_off(h=0)) == 1


def test_summary_and_sweep_tables():
    off = _off()
    on = dict(off, hec="on", test_acc=0.79, halo_bytes=off["halo_bytes"] // 4,
              bench_extra=["--hec", "on", "--hec-push-cap", "5"], bench_name="on nc=rule",
              hit_rate_per_level={"L0": 0.5, "L1": 0.25, "L2": 0.1}, hec_config={"nc": 5})
    text = bench.summary([off, on])
    assert "| g | 8 | on nc=rule | 1 | 2 | 0.790 | -1.0 |" in text and "4.00x" in text
    assert "50 / 25 / 10" in text
    sw = bench.sweep_table([dict(off, sweep=None), dict(on, sweep=["nc", 5])])
    assert "| nc | 5 | 0.790 | -1.0 |" in sw


def test_time_to_accuracy_sums_the_epochs_until_the_target():
    def rec(name, curve, secs, best=None):
        return {"bench_graph": "g", "ranks": 4, "hec": name, "bench_extra": ["--hec", name],
                "seconds_per_epoch": sum(secs) / len(secs), "epoch_seconds_history": secs,
                "eval_history": curve, "best_val_acc": best}
    off = rec("off", [[1, 0.5, 0.5], [2, 0.8, 0.7]], [1.0, 2.0], best=0.8)
    on = rec("on", [[1, 0.795, 0.7], [2, 0.9, 0.9]], [0.5, 0.5])
    none = rec("none", [[1, 0.3, 0.3], [2, 0.4, 0.4]], [0.1, 0.1])
    assert bench.seconds_to(off, 0.79) == 3.0 and bench.seconds_to(on, 0.79) == 0.5
    assert bench.seconds_to(none, 0.79) is None and bench.seconds_to({}, 0.5) is None
    table = bench.time_to_accuracy([off, on, none]).splitlines()
    assert table[2].endswith("| off | 1.500 | 0.790 | 1 of 1 | 3.00 |")
    assert table[3].endswith("| on | 0.500 | 0.790 | 1 of 1 | 0.50 |")
    assert table[4].endswith("| none | 0.100 | 0.790 | 0 of 1 | - |")
