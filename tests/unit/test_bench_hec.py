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


def test_wallclock_table_reads_the_steady_epochs_phases_memory_and_load():
    def rec(name, secs, push, rss, load):
        return {"bench_graph": "g", "ranks": 4, "hec": name, "bench_extra": ["--hec", name],
                "epochs": len(secs), "epochs_this_run": len(secs), "epoch_seconds_history": secs,
                "epoch_seconds_by_phase": {"compute": 2.0, "comm": {
                    "halo-fetch:rows": 0.5, "hec:want": 0.25, "hec:push:L1:rows": push,
                    "hec:grad-allreduce": 1.0}},
                "cpu_seconds": 40.0, "setup_seconds": 10.0,
                "peak_rss_bytes": {"max": rss, "per_rank": [rss]},
                "bench_load": {"before": [load, 0, 0], "after": [load + 1, 0, 0]}}
    # the first epoch (kernel compilation) is left out of the median; memory is the max rank's
    off = rec("off", [100.0, 3.0, 5.0, 4.0], 0.0, 2**30, 2.0)
    on = rec("on", [100.0, 1.0, 2.0], 0.125, 2**31, 4.0)
    table = bench.wallclock_table([off, on]).splitlines()
    assert table[2] == ("| g | 4 | off | 1 | 4 | 4.0 | 2.0 | 0.50 / 0.25 / 0.00 | 1.00 | 40 | 10 "
                        "| 1.00 GiB | 2.0 / 3.0 |")
    assert table[3].startswith("| g | 4 | on | 1 | 3 | 1.5 | 2.0 | 0.50 / 0.25 / 0.12 |")
    assert table[3].endswith("| 2.00 GiB | 4.0 / 5.0 |")


def test_cross_sbm_puts_the_label_on_the_edges_between_communities():
    cfg = dict(n=3000)
    a, x, y, comm = bench.cross_sbm_arrays(cfg)
    b, x2, _, _ = bench.cross_sbm_arrays(cfg)
    assert (a != b).nnz == 0 and (x == x2).all()                 # a pure function of cfg
    assert (a != a.T).nnz == 0 and a.diagonal().sum() == 0 and a.shape == (3000, 3000)
    r, c = a.nonzero()
    inside = comm[r] == comm[c]
    same = y[r] == y[c]
    c0 = bench.CROSS_SBM
    q, C, K, h = c0["intra"], c0["num_classes"], c0["communities"], c0["homophily"]
    cls = (1 - q) * (h + (1 - h) / C)       # share of edges drawn to the source's class ...
    # `intra` of the edges are drawn inside the community, plus the 1/K of the others that land
    # there (the draw is blind to the community)
    assert abs(inside.mean() - (q + (1 - q) / K)) < 0.02
    # the community's edges are blind to the class (up to those stray ones); the edges between
    # communities carry it
    assert abs(same[inside].mean() - (q / C + cls / K) / (q + (1 - q) / K)) < 0.03
    assert abs(same[~inside].mean() - (h + (1 - h) / C)) < 0.03
    assert x.shape == (3000, c0["num_features"]) and x.min() >= 0
