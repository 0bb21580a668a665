"""What every benchmark shares: thread settings, graphs by name, the record, the figure.

* :func:`threads_from_argv` / :data:`THREAD_VARS`: the ``--threads`` value and
  the environment variables the libraries read once, at import (``python -m
  spgnn bench`` re-executes itself when they differ, see
  :mod:`spgnn.cli.bench`);
* graphs are named as in every command (:func:`spgnn.io.load_graph`: a
  dataset name, a file or a generator spec); :func:`use_shared_data` (run by
  ``python -m spgnn bench`` before a suite) points ``SPGNN_DATA`` at the
  project's shared data folder when it is unset, so a development checkout
  reads the datasets there instead of downloading;
* :data:`ROOT`: the checkout this folder is in (``benchmarks/results/``,
  ``docs/figures/``);
* :func:`write_record`: the report to ``--out`` and stdout;
* :func:`save_bar_figure`: the ``--plot`` figure -- for each case, one bar
  per implementation (median seconds, log scale), a whisker from the fastest
  to the slowest repetition, and the ratio to the reference implementation
  written on each bar.

Timing rules (warm-ups, medians, slowest rank) are :mod:`spgnn.bench`'s.
"""

from __future__ import annotations

import json
import os

from pathlib import Path

__all__ = ["ROOT", "THREAD_VARS", "threads_from_argv", "thread_env", "use_shared_data",
           "write_record", "save_bar_figure", "Case"]

#: The repository checkout holding this folder (results and figures are written below it).
ROOT = Path(__file__).resolve().parents[1]

#: Variables that OpenMP, BLAS and Numba read when they start.
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def threads_from_argv(argv, default=2) -> int:
    """The value of ``--threads N`` / ``--threads=N`` in ``argv`` (``default`` when absent)."""
    value = default
    argv = list(argv)
    for k, a in enumerate(argv):
        if a == "--threads" and k + 1 < len(argv):
            value = argv[k + 1]
        elif a.startswith("--threads="):
            value = a.split("=", 1)[1]
    try:
        return max(1, int(value))
    except ValueError:
        return default


def thread_env(argv, default=2, numba_at_least_cores=False) -> dict:
    """The thread variables for ``argv``'s ``--threads``.  ``numba_at_least_cores``: set
    ``NUMBA_NUM_THREADS`` to the core count (the pool's size; the benchmark then calls
    ``numba.set_num_threads``), as the sampling benchmark needs."""
    t = str(threads_from_argv(argv, default))
    env = {v: t for v in THREAD_VARS}
    if numba_at_least_cores:
        env["NUMBA_NUM_THREADS"] = str(max(int(t), os.cpu_count() or 1))
    return env


def use_shared_data():
    """Point ``SPGNN_DATA`` (the dataset cache) at the shared data folder
    (:func:`spgnn.testing.data.find_shared_data`) when it is unset and that folder exists."""
    if not os.environ.get("SPGNN_DATA"):
        from spgnn.testing.data import find_shared_data

        shared = find_shared_data()
        if shared is not None:
            os.environ["SPGNN_DATA"] = str(shared)


def write_record(record, out, as_json, print_table):
    """A benchmark's end: the record to ``out`` (if given) as JSON, then the record as one
    JSON line (``as_json``) or ``print_table()``."""
    if out:
        with open(out, "w") as f:
            json.dump(record, f)
    if as_json:
        print(json.dumps(record))
    else:
        print_table()


class Case:
    """One group of bars: ``label`` and ``{implementation: (median, fastest, slowest)}``."""

    def __init__(self, label, timings):
        self.label = label
        self.timings = {k: tuple(float(x) for x in v) for k, v in timings.items()}


def save_bar_figure(cases, path, *, title, reference="spgnn", unit="s"):
    """Write the grouped bar chart of ``cases`` (a list of :class:`Case`) to ``path``.

    Bars: medians on a log axis; whiskers: fastest..slowest repetition; the
    text on each bar: its median divided by the ``reference``'s median in the
    same case (``3x``: three times the reference's time).  Returns ``path``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if not cases:
        raise ValueError("save_bar_figure: no cases to plot")
    impls = []
    for c in cases:
        impls += [k for k in c.timings if k not in impls]
    if reference in impls:
        impls.remove(reference)
        impls.insert(0, reference)
    width = 0.8 / len(impls)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(cases) * max(1, len(impls)) ** 0.5), 4.2))
    x = np.arange(len(cases))
    for j, impl in enumerate(impls):
        xs, med, lo, hi, ratio = [], [], [], [], []
        for i, c in enumerate(cases):
            if impl not in c.timings:
                continue
            m, fast, slow = c.timings[impl]
            xs.append(x[i] - 0.4 + width * (j + 0.5))
            med.append(m)
            lo.append(max(0.0, m - fast))
            hi.append(max(0.0, slow - m))
            ref = c.timings.get(reference, (None,))[0]
            ratio.append(None if not ref else m / ref)
        bars = ax.bar(xs, med, width, yerr=[lo, hi], capsize=2, label=impl)
        for b, r in zip(bars, ratio):
            if r is not None:
                ax.annotate(f"{r:.2g}x", (b.get_x() + b.get_width() / 2, b.get_height()),
                            xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=7, rotation=90 if len(impls) > 3 else 0)
    ax.set_xticks(x, [c.label for c in cases], rotation=20 if len(cases) > 4 else 0,
                  ha="right" if len(cases) > 4 else "center", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel(f"median {unit} (whiskers: fastest..slowest)")
    ax.set_title(f"{title}\n(text on a bar: its time / {reference}'s time)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

