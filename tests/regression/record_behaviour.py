"""Record, or check, the exact training behaviour of a fixed set of runs.

A refactor that claims "behaviour does not change" proves it with this
script: run it before (``--out``), commit the record, run it after
(``--check``).  Every run goes through the real command line under
``mpiexec`` (``python -m spgnn train ... --json --save-weights``), so the
record does not depend on any library API that the refactor may move.

What is recorded per run: the training loss of every epoch as an exact
float (``float.hex``), the SHA-256 of every final weight array, the final
accuracies (exact), and the bytes per epoch.  Bit-identity of floating-point
results holds on one machine (BLAS and the JIT pick instructions per CPU), so
the record names the CPU it was taken on, and ``--check`` says when it runs
elsewhere.

Usage::

    python tests/regression/record_behaviour.py --out tests/regression/behaviour.json
    python tests/regression/record_behaviour.py --check tests/regression/behaviour.json
    python tests/regression/record_behaviour.py --check ... --only gcn-1d-aware-p1
    python tests/regression/record_behaviour.py --check ... --old-sage-masks

``--old-sage-masks`` runs every process with the GraphSAGE dropout masks of
before issue 21 (``tests/regression/old_sage_masks/``): the one intended
change of the GNN unification is that minibatch dropout now uses the
counter-based scheme of every other model, and with the old masks patched
back in every run must match.

Needs ``../shared/data/planetoid`` (Cora) or ``SPGNN_SHARED_DATA``.
"""

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CORA = ["--name", "cora"]
GCN = ["--model", "gcn", "--epochs", "20", "--seed", "3"]
SAGE = ["--model", "sage", "--sampler", "sage", "--batch-size", "32", "--fanout", "10,5",
        "--bulk", "3", "--epochs", "3", "--seed", "5"]
LADIES = ["--model", "sage", "--sampler", "ladies", "--batch-size", "32", "--fanout", "64,64",
          "--ladies-size", "64", "--bulk", "3", "--epochs", "3", "--seed", "5"]


def _runs():
    """``{name: (ranks, args)}``: the fixed configurations (Cora)."""
    runs = {}
    for p in (1, 4):
        for algo in ("1d", "1d-aware", "15d", "15d-aware", "3d"):
            extra = ["--replication", "1" if p == 1 else "2"] if algo.startswith("15d") else []
            runs[f"gcn-{algo}-p{p}"] = (p, GCN + ["--algo", algo] + extra)
        runs[f"sage-p{p}"] = (p, SAGE)
        runs[f"ladies-p{p}"] = (p, LADIES)
    runs["gcn-1d-aware-metis-p4"] = (4, GCN + ["--algo", "1d-aware", "--partition", "metis"])
    runs["gcn-1d-aware-balanced-p4"] = (4, GCN + ["--algo", "1d-aware", "--partition", "balanced"])
    runs["gcn-15d-aware-random-p4"] = (4, GCN + ["--algo", "15d-aware", "--partition", "random",
                                                 "--replication", "2"])
    runs["gcn-3d-bias-float64-p4"] = (4, GCN + ["--algo", "3d", "--bias", "--dtype", "float64",
                                                "--layers", "3"])
    runs["sage-partitioned-p4"] = (4, SAGE + ["--partition-mode", "partitioned",
                                              "--replication", "2"])
    runs["sage-nodropout-p4"] = (4, SAGE + ["--dropout", "0", "--input-dropout", "0"])
    return runs


#: Checkpoint/resume pairs: run ``first`` epochs with checkpoints, resume to
#: ``total``; the resumed run's weights must equal the uninterrupted run's.
RESUME = {"gcn-resume-p4": (4, GCN[:2] + ["--algo", "1d-aware", "--seed", "3"], 10, 20),
          "sage-resume-p2": (2, SAGE[:-4] + ["--seed", "5"], 2, 4)}


#: Set by ``--old-sage-masks``: a folder put first on every run's PYTHONPATH.
OLD_SAGE_MASKS = None


def _data_root():
    env = os.environ.get("SPGNN_SHARED_DATA")
    here = Path(__file__).resolve().parents[2]
    root = Path(env) if env else here.parent / "shared" / "data"
    planetoid = root / "planetoid"
    if not planetoid.is_dir():
        sys.exit(f"record_behaviour: no Cora at {planetoid} (set SPGNN_SHARED_DATA)")
    return planetoid


def _mpiexec():
    cand = Path(sys.executable).with_name("mpiexec")
    return str(cand) if cand.exists() else "mpiexec"


def _train(ranks, args, graph, workdir, tag):
    weights = Path(workdir) / f"{tag}.npz"
    cmd = [_mpiexec(), "-n", str(ranks), sys.executable, "-m", "spgnn", "train", "--graph",
           str(graph), *CORA, *args, "--json", "--no-progress", "--save-weights", str(weights)]
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    if OLD_SAGE_MASKS:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [OLD_SAGE_MASKS,
                                                         env.get("PYTHONPATH")]))
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900,
                          stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"{tag}: exit {proc.returncode}\n{' '.join(cmd)}\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    with np.load(weights) as z:
        hashes = {k: hashlib.sha256(np.ascontiguousarray(z[k]).tobytes()).hexdigest()[:16]
                  for k in sorted(z.files)}
    return result, hashes


def _exact(x):
    return None if x is None else float(x).hex()


def _record(result, hashes):
    return {"loss_history": [_exact(v) for v in result["loss_history"]],
            "weights": hashes,
            "test_acc": _exact(result["test_acc"]), "val_acc": _exact(result["val_acc"]),
            "bytes_per_epoch": result["bytes_per_epoch"]}


def machine():
    """What bit-identity depends on: the CPU and the numeric libraries."""
    import numba
    import scipy

    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu or platform.processor(), "numpy": np.__version__, "scipy": scipy.__version__,
            "numba": numba.__version__, "llvm_cpu": numba.config.CPU_NAME or _llvm_host()}


def _llvm_host():
    try:
        import llvmlite.binding as ll

        return ll.get_host_cpu_name()
    except Exception:  # a record without it is still a record
        return ""


def run_all(only=None):
    graph = _data_root()
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (ranks, args) in _runs().items():
            if only and name not in only:
                continue
            t0 = time.perf_counter()
            out[name] = _record(*_train(ranks, args, graph, tmp, name))
            print(f"{name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        for name, (ranks, args, first, total) in RESUME.items():
            if only and name not in only:
                continue
            t0 = time.perf_counter()
            ck = Path(tmp) / f"{name}-ckpt"
            every = ["--every", str(max(1, first // 2))]
            _train(ranks, args + ["--epochs", str(first), "--checkpoint", str(ck)] + every,
                   graph, tmp, name + "-a")
            resumed = _record(*_train(ranks, args + ["--epochs", str(total), "--resume", str(ck)]
                                      + every, graph, tmp, name + "-b"))
            straight = _record(*_train(ranks, args + ["--epochs", str(total)], graph, tmp,
                                       name + "-c"))
            if resumed["weights"] != straight["weights"]:
                raise RuntimeError(f"{name}: the resumed run's weights differ from the "
                                   f"uninterrupted run's")
            out[name] = {"resumed": resumed, "uninterrupted": straight}
            print(f"{name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write a new record here")
    ap.add_argument("--check", help="compare a new run with this record")
    ap.add_argument("--only", nargs="*", help="run only these configurations")
    ap.add_argument("--old-sage-masks", action="store_true",
                    help="GraphSAGE dropout masks as before issue 21 (check mode)")
    args = ap.parse_args(argv)
    if args.old_sage_masks:
        global OLD_SAGE_MASKS
        OLD_SAGE_MASKS = str(Path(__file__).resolve().parent / "old_sage_masks")
    if bool(args.out) == bool(args.check):
        ap.error("give exactly one of --out and --check")
    runs = run_all(set(args.only) if args.only else None)
    if args.out:
        import subprocess as sp

        commit = sp.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                        cwd=Path(__file__).parent).stdout.strip()
        Path(args.out).write_text(json.dumps({"commit": commit, "machine": machine(),
                                              "runs": runs}, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(runs)} runs to {args.out}")
        return 0
    ref = json.loads(Path(args.check).read_text())
    if ref["machine"] != machine():
        print(f"note: recorded on {ref['machine']}, checking on {machine()}: floating-point "
              f"bits may differ for that reason alone")
    bad = [name for name, rec in runs.items() if ref["runs"].get(name) != rec]
    for name in bad:
        print(f"DIFFERS: {name}\n  recorded {ref['runs'].get(name)}\n  now      {runs[name]}")
    print(f"{len(runs) - len(bad)} of {len(runs)} runs bit-identical to {args.check} "
          f"(recorded at {ref['commit']})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
