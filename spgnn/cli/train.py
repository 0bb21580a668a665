"""``mpiexec -n P python -m spgnn train``: GNN training on a real or generated graph.

``--model gcn`` (default) trains a full-graph GCN, as below; ``--model sage``
trains GraphSAGE on sampled minibatches (:func:`spgnn.gnn.minibatch.train_sage`,
docs/sage_training.md) with the same progress bar, ``--json``,
``--checkpoint``/``--resume`` and ``--save-weights`` contract.

Rank 0 loads the graph (any format :func:`spgnn.io.load_graph` reads, or a
generator spec such as ``sbm:300:3:0``), adds a random split when the graph
has none (``--split``), and :meth:`DistGraph.from_graph
<spgnn.gnn.data.DistGraph.from_graph>` normalises, partitions and scatters
it for ``--algo``.  Then ``--epochs`` epochs of Kipf & Welling's GCN with Adam
(weight decay on the first layer only) and one evaluation at the end, as in
the 200-epoch protocol of the paper (no early stopping).

* Progress: a tqdm bar on rank 0 (stderr) with the loss, the training
  accuracy and the bytes all ranks sent in the epoch (``--no-progress`` hides it).
* ``--json``: one JSON object on rank 0's stdout (see :func:`train`).
* ``--checkpoint DIR --every K``: after every K-th epoch the state of every
  rank (model blocks, Adam moments and step, epoch counter, dropout seed: the
  masks are counter-based, so the RNG state is the pair ``(seed, epoch)``) is
  gathered and written by rank 0 with :func:`spgnn.checkpoint.save_checkpoint`
  (temporary file, fsync, rename: a crash mid-write leaves the previous
  checkpoint intact).
* ``--resume DIR`` continues from the newest intact checkpoint; the run ends
  with exactly the weights of an uninterrupted run.  The checkpoint must come
  from the same configuration (graph, algorithm, ranks, model, optimizer).
* ``--save-weights FILE``: the final parameters, assembled on rank 0, as npz.

Errors in the arguments are reported on every rank before any
communication; a graph that cannot be loaded raises on every rank
(``Communicator.agree``).
"""

import sys
import time

import numpy as np

from . import print_result

from spgnn.core.spmm import DISTRIBUTED_ALGORITHMS as ALGORITHMS

PARTITIONS = ("none", "random", "metis", "balanced")
DTYPES = ("float32", "float64")

#: Options that must match between a checkpoint and the run resuming it.
_CONFIG_KEYS = ("graph", "name", "model", "algo", "partition", "hidden", "layers", "lr",
                "weight_decay", "dropout", "bias", "replication", "grid", "dtype", "seed",
                "split", "split_seed", "ranks")


def add_parser(sub):
    p = sub.add_parser("train", help="train a GCN on a graph (full batch) and report accuracy, "
                                     "time and bytes per epoch")
    p.add_argument("--graph", required=True, help="graph file or folder, or generator spec "
                                                  "(sbm:300:3:0)")
    p.add_argument("--name", default=None, help="dataset in a folder holding several (cora)")
    p.add_argument("--model", default="gcn", choices=("gcn", "sage"),
                   help="gcn: full-graph GCN; sage: GraphSAGE on sampled minibatches")
    p.add_argument("--algo", default="1d-aware", choices=ALGORITHMS)
    p.add_argument("--partition", default="none", choices=PARTITIONS)
    p.add_argument("--replication", type=int, default=2, help="c for 15d algorithms (default 2)")
    p.add_argument("--grid", default=None, help="XxYxZ for 3d (default: the most cubic)")
    p.add_argument("--backend", default=None, help="numpy | numba (default numba)")
    p.add_argument("--dtype", default="float32", choices=DTYPES)
    p.add_argument("--epochs", type=int, default=None, help="default 200 (gcn), 50 (sage)")
    p.add_argument("--hidden", type=int, default=None, help="default 16 (gcn), 64 (sage)")
    p.add_argument("--layers", type=int, default=2, help="graph convolutions (default 2)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4,
                   help="L2 on the first layer's weight (Kipf & Welling)")
    p.add_argument("--dropout", type=float, default=None, help="default 0.5 (gcn), 0.6 (sage)")
    p.add_argument("--bias", action="store_true", help="biases in the convolutions (Kipf: none)")
    p.add_argument("--seed", type=int, default=0, help="initialisation, dropout and partition seed")
    p.add_argument("--split", default=None,
                   help="TRAIN:VAL fractions of a random stratified split (default: the graph's "
                        "own split, or 0.6:0.2 when it has none)")
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--checkpoint", default=None, metavar="DIR",
                   help="write a checkpoint into DIR every --every epochs")
    p.add_argument("--every", type=int, default=10, metavar="K")
    p.add_argument("--resume", default=None, metavar="DIR",
                   help="continue from the newest checkpoint in DIR (and keep checkpointing "
                        "there unless --checkpoint says otherwise)")
    p.add_argument("--save-weights", default=None, metavar="FILE",
                   help="write the final parameters (global matrices) as npz from rank 0")
    sage = p.add_argument_group("minibatch training (--model sage)")
    sage.add_argument("--sampler", default="sage", choices=("sage", "ladies"))
    sage.add_argument("--batch-size", type=int, default=512)
    sage.add_argument("--fanout", default="15,10,5",
                      help="neighbours per hop, one hop per layer (default 15,10,5)")
    sage.add_argument("--bulk", type=int, default=16, help="minibatches sampled per bulk step")
    sage.add_argument("--partition-mode", default="replicated",
                      choices=("replicated", "partitioned"),
                      help="graph replicated on every rank, or split over a P/c x c grid")
    sage.add_argument("--ladies-size", type=int, default=None,
                      help="vertices LADIES samples per layer (default: --batch-size)")
    sage.add_argument("--input-dropout", type=float, default=None,
                      help="dropout on the input features (default 0.5)")
    sage.add_argument("--eval-every", type=int, default=None, metavar="K",
                      help="full-neighbourhood evaluation every K epochs (default 1; 0: only "
                           "at the end)")
    sage.add_argument("--model-selection", default=None, choices=("best-val", "last"),
                      help="report the model of the epoch with the best validation accuracy "
                           "(default when evaluating) or of the last epoch")
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(command="train")
    return p


# ------------------------------------------------------------------ checks
def _parse_split(text):
    if text is None:
        return None
    try:
        train, val = (float(v) for v in text.split(":"))
    except ValueError:
        raise ValueError(f"train: --split must look like 0.6:0.2, but got {text!r}") from None
    if not (0 < train < 1 and 0 <= val < 1 and train + val <= 1):
        raise ValueError(f"train: --split fractions must satisfy 0 < train, 0 <= val, "
                         f"train + val <= 1, but got {text!r}")
    return train, val


def _parse_grid(text, p):
    if text is None:
        return None
    try:
        grid = tuple(int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"train: --grid must look like 2x2x1, but got {text!r}") from None
    if len(grid) != 3 or min(grid) < 1 or int(np.prod(grid)) != p:
        raise ValueError(f"train: --grid needs three positive factors whose product is the {p} "
                         f"ranks, but got {text!r}")
    return grid


def check_args(args, p):
    """Raise ValueError for arguments every rank can judge alone (no communication)."""
    if args.epochs < 0:
        raise ValueError(f"train: --epochs must be >= 0, but got {args.epochs}")
    if args.hidden < 1 or args.layers < 1:
        raise ValueError(f"train: --hidden and --layers must be >= 1, but got {args.hidden} and "
                         f"{args.layers}")
    if not args.lr > 0 or args.weight_decay < 0:
        raise ValueError(f"train: --lr must be > 0 and --weight-decay >= 0, but got {args.lr} "
                         f"and {args.weight_decay}")
    if not 0 <= args.dropout < 1:
        raise ValueError(f"train: --dropout must lie in [0, 1), but got {args.dropout}")
    if args.every < 1:
        raise ValueError(f"train: --every must be >= 1, but got {args.every}")
    if args.algo in ("15d", "15d-aware") and (args.replication < 1 or p % args.replication):
        raise ValueError(f"train: --replication must divide the {p} ranks, but got "
                         f"{args.replication}")
    if args.grid is not None and args.algo != "3d":
        raise ValueError("train: --grid applies to --algo 3d only")
    if args.backend is not None:
        from spgnn.backends import get_backend

        get_backend(args.backend)          # unknown or unavailable: raises the same everywhere
    _parse_split(args.split)
    _parse_grid(args.grid, p)


def _config(args, p):
    cfg = {k: getattr(args, k) for k in _CONFIG_KEYS if k != "ranks"}
    cfg["graph"] = str(args.graph)
    cfg["ranks"] = p
    return cfg


# ------------------------------------------------------------------ pieces
def _load_root(args):
    """Rank 0: the graph with a split."""
    from spgnn.io import load_graph

    graph = load_graph(args.graph, name=args.name)
    split = _parse_split(args.split)
    if split is None and graph.train_mask is None:
        split = (0.6, 0.2)
    if split is not None:
        graph = graph.random_split(*split, seed=args.split_seed)
    return graph


def _gather_state(comm, trainer):
    """Every rank's :meth:`Trainer.state_dict`, on every rank (rank 0 writes them). Collective."""
    return comm.allgather_obj(trainer.state_dict(), label="train:checkpoint")


def _save(comm, directory, trainer, cfg, history):
    from spgnn.checkpoint import save_checkpoint_collective

    states = _gather_state(comm, trainer)
    state = {"format": "spgnn-train", "config": cfg, "epoch": trainer.epoch,
             # The dropout masks are a pure function of (seed, epoch, layer,
             # node, column): this pair is the whole RNG state.
             "rng": {"kind": "counter-based splitmix64", "seed": trainer.seed,
                     "epoch": trainer.epoch},
             "ranks": states, "history": history}
    save_checkpoint_collective(comm, directory, state if comm.rank == 0 else None,
                               step=trainer.epoch)


def _resume(comm, directory, trainer, cfg):
    from spgnn.checkpoint import load_training_state

    state = load_training_state(comm, directory, "spgnn-train", cfg)
    trainer.load_state_dict(state["ranks"][comm.rank])
    return list(state.get("history", []))


def _save_weights(comm, path, model):
    """Assemble every parameter (collective) and write them from rank 0."""
    from spgnn.checkpoint import write_npz_atomic

    arrays = {name: p.to_global() for name, p in model.named_parameters()}
    if comm.rank == 0:
        write_npz_atomic(path, arrays)


def train(comm, args):
    """Run the command's training on ``comm`` and return its result dict (on every rank).

    Collective over ``comm``.

    Returns
    -------
    dict
        ``test_acc``, ``val_acc``, ``train_acc`` (evaluation mode, after the
        last epoch), ``final_loss`` (training loss of the last epoch),
        ``epochs`` (epochs trained in total, resumed ones included),
        ``loss_history`` (the training loss of each epoch of this run),
        ``seconds_per_epoch`` (mean over this run's epochs after the first,
        slowest rank; the first, which loads compiled kernels, is
        ``first_epoch_seconds``), ``bytes_per_epoch`` (bytes sent by all
        ranks together in one training epoch, from the ledger; the same in
        every epoch), ``bytes_per_epoch_max_rank``, ``setup_seconds``,
        ``algorithm``, ``ranks``, ``graph``, ``seed``, ``resumed_from``
        (epoch, or None), ``history`` is not included (see ``--json``).
    """
    from spgnn.gnn import GCN, Adam, DistGraph, Trainer
    from spgnn.io import load_on_root

    p = comm.size
    check_args(args, p)
    cfg = _config(args, p)
    t_setup = time.perf_counter()
    graph = load_on_root(comm, lambda: _load_root(args))   # a bad path raises on every rank
    kw = {}
    if args.algo == "3d" and args.grid:
        kw["grid"] = _parse_grid(args.grid, p)
    dg = DistGraph.from_graph(graph, comm, algorithm=args.algo, partition=args.partition,
                              replication=args.replication, backend=args.backend,
                              seed=args.seed, dtype=np.dtype(args.dtype), **kw)
    name = comm.bcast_obj(graph.name if graph is not None else None, root=0, label="train:meta")
    del graph
    model = GCN(dg.num_features, args.hidden, dg.num_classes, layers=args.layers,
                dropout=args.dropout, seed=args.seed, bias=args.bias)
    trainer = Trainer(model, dg, Adam(model.param_groups(args.weight_decay), lr=args.lr))
    history = []          # per epoch: [loss, train_acc, bytes of all ranks]
    resumed_from = None
    if args.resume:
        history = _resume(comm, args.resume, trainer, cfg)
        resumed_from = trainer.epoch
    ckpt_dir = args.checkpoint or args.resume
    setup_seconds = time.perf_counter() - t_setup

    bar = None
    if comm.rank == 0 and not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=args.epochs, initial=min(trainer.epoch, args.epochs), unit="epoch",
                   file=sys.stderr, desc=f"{name} {args.algo} P={p}", dynamic_ncols=True)
    times, mine, losses = [], [], []
    while trainer.epoch < args.epochs:
        t0 = time.perf_counter()
        rec = trainer.train_epoch()
        times.append(time.perf_counter() - t0)
        mine.append(rec["bytes"])
        losses.append(float(rec["loss"]))
        total = int(comm.allreduce(np.array([rec["bytes"]], dtype=np.int64),
                                   label="train:report")[0])
        history.append([float(rec["loss"]), float(rec["train_acc"]), total])
        if bar is not None:
            bar.set_postfix(loss=f"{rec['loss']:.4f}", acc=f"{rec['train_acc']:.3f}",
                            bytes=f"{total:,}", refresh=False)
            bar.update(1)
        if ckpt_dir and trainer.epoch % args.every == 0:
            _save(comm, ckpt_dir, trainer, cfg, history)
    if bar is not None:
        bar.close()
    ev = trainer.evaluate()
    if args.save_weights:
        _save_weights(comm, args.save_weights, model)

    # Slowest rank's epoch times; the first epoch of a run loads the kernels.
    t = np.asarray(times, dtype=np.float64)
    steady = t[1:] if t.size > 1 else t
    red = comm.allreduce(np.array([steady.sum(), t[:1].sum()]), op="max", label="train:report")
    per_rank = comm.allgather_obj(int(mine[-1]) if mine else 0, label="train:report")
    bytes_epoch = [h[2] for h in history]
    return {"graph": name, "ranks": p, "algorithm": args.algo, "partition": args.partition,
            "model": args.model, "hidden": args.hidden, "layers": args.layers,
            "dtype": args.dtype, "seed": args.seed,
            "n": dg.num_nodes, "features": dg.num_features, "classes": dg.num_classes,
            "sparse_features": type(dg.features).__name__ == "SparseBackedMatrix",
            "epochs": trainer.epoch, "epochs_this_run": len(times), "resumed_from": resumed_from,
            "test_acc": ev["test_acc"], "val_acc": ev["val_acc"], "train_acc": ev["train_acc"],
            "test_loss": ev["test_loss"], "val_loss": ev["val_loss"],
            "final_loss": history[-1][0] if history else None,
            "loss_history": losses,
            "seconds_per_epoch": float(red[0] / steady.size) if steady.size else None,
            "first_epoch_seconds": float(red[1]) if times else None,
            "setup_seconds": setup_seconds,
            "bytes_per_epoch": int(bytes_epoch[-1]) if bytes_epoch else 0,
            "bytes_per_epoch_constant": len(set(bytes_epoch)) <= 1,
            "bytes_per_epoch_max_rank": max(per_rank)}


def _apply_model_defaults(args):
    # sage: input dropout, dropout 0.6 and model selection on the validation
    # set were chosen on Cora's validation accuracy (docs/sage_training.md)
    defaults = {"gcn": {"epochs": 200, "hidden": 16, "dropout": 0.5},
                "sage": {"epochs": 50, "hidden": 64, "dropout": 0.6, "input_dropout": 0.5,
                         "eval_every": 1, "model_selection": "best-val"}}
    for key, value in defaults[args.model].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.model == "sage" and args.model_selection == "best-val" and not args.eval_every:
        raise ValueError("train: --model-selection best-val needs --eval-every >= 1")
    if args.model == "gcn":
        given = [f"--{k.replace('_', '-')}" for k in ("ladies_size", "input_dropout", "eval_every",
                                                      "model_selection")
                 if getattr(args, k) is not None]
        if given:
            raise ValueError(f"train: {', '.join(given)} only apply to --model sage")


def run(args):
    from spgnn import Communicator

    _apply_model_defaults(args)        # every rank, before MPI starts
    comm = Communicator.world()        # initialises MPI; train() checks before communicating
    if args.model == "sage":
        from spgnn.gnn.minibatch import train_sage

        result = train_sage(args, comm)
    else:
        result = train(comm, args)
    print_result(comm, result, args.json)
    return 0
