"""``mpiexec -n P python -m spgnn train``: GNN training on a real or generated graph.

A thin driver over :mod:`spgnn.gnn`: ``--model`` names an entry of
:data:`spgnn.gnn.MODELS` (``gcn``: full-graph GCN on ``--algo``; ``sage``:
GraphSAGE on sampled minibatches, docs/sage_training.md; ``sage-full``:
paper 004's full-batch GraphSAGE-mean + LayerNorm, docs/communication.md;
``gat``), and every model runs through the same steps:

1. rank 0 loads the graph (a dataset name such as ``cora``, downloaded into
   the cache on first use, any file :func:`spgnn.io.load_graph` reads, or a
   generator spec such as ``sbm:300:3:0``), gives it synthetic features or
   labels when asked (``--features random:F|degree|onehot``, ``--labels
   random:C``: :mod:`spgnn.io.synthetic`), adds a random split when the
   graph has none (``--split``) and optionally projects wide features
   (``--feature-dim``);
2. the graph is distributed for the model's training (a
   :class:`~spgnn.gnn.DistGraph` for ``--algo``, or a
   :class:`~spgnn.gnn.MinibatchGraph`), the model built from its registry
   entry, Adam (L2 weight decay as the model's ``param_groups`` says);
3. ``--resume DIR`` restores the newest intact checkpoint;
4. :meth:`Trainer.fit <spgnn.gnn.Trainer.fit>` runs the epochs with hooks:
   metrics, evaluation with model selection (``--eval-every``,
   ``--model-selection``), a tqdm bar on rank 0 (stderr; ``--no-progress``
   hides it), checkpoints every ``--every`` epochs (``--checkpoint DIR``);
5. a final evaluation, ``--save-weights FILE`` (the global parameters as npz,
   written by rank 0), and the report: aligned ``key value`` lines, or one
   JSON object with ``--json``.

Checkpoints hold everything a bit-identical resume needs (parameters,
optimizer state, epoch counter, seed: dropout masks, permutations and
samples are keyed by ``(seed, epoch)``, so that pair is the whole random
state, plus the model-selection state and the per-epoch history); a
resumed run ends with exactly the weights of an uninterrupted one.  The
checkpoint must come from the same configuration (full-graph models: also
the same ``--aggregation``, ``--quantize``, ``--rounding`` when quantizing
and ``--label-prop``; a resume with other values is refused, naming them).

Errors in the arguments are reported on every rank before any
communication; a graph that cannot be loaded raises on every rank
(``Communicator.agree``).
"""

import dataclasses
import os
import time
import zlib

import numpy as np
import scipy.sparse as sp

from . import print_result
from ._backend_options import add_backend_options, resolve_backend
from ._graph_options import add_graph_options, graph_options

from ..checkpoint import DirectoryLock, load_training_state, write_npz_atomic
from ..comm import Communicator
from ..core.spmm import DISTRIBUTED_ALGORITHMS
from ..errors import CheckpointError, NonFiniteError
from ..gnn import (Adam, Checkpoint, DistGraph, EvaluateEvery, Metrics, MinibatchGraph,
                   MinibatchTrainer, ProgressBar, Trainer)
from ..gnn.compression import configure_exchange
from ..gnn.data import require_features_and_labels
from ..gnn.label_prop import LabelPropagation, LabelPropTrainer
from ..gnn.registry import MODELS
from ..grid import parse_grid
from ..io import load_graph, load_on_root
from ..io.preprocess import random_projection, row_normalize_features
from ..io.synthetic import (FEATURE_SPECS, LABEL_SPECS, check_feature_spec, check_label_spec,
                            with_synthetic)
from ..partition import PARTITIONERS
from . import hec_options
from .spmm import replication_arg
from ..sampling import GraphSAGESampler, LADIESSampler

DTYPES = ("float32", "float64")

#: Options that must match between a checkpoint and the run resuming it
#: (plus the model's own options and the rank count).
_CONFIG_KEYS = ("graph", "name", "model", "algo", "partition", "hidden", "layers", "lr",
                "weight_decay", "dropout", "bias", "replication", "grid", "dtype", "seed",
                "split", "split_seed", "feature_dim", "features", "labels")
#: Full-graph exchange options (docs/communication.md) a resume must match;
#: a checkpoint written before they were recorded resumes as their defaults.
_EXCHANGE_CONFIG = {"aggregation": "post", "quantize": "none", "rounding": None,
                    "label_prop": 0.0}
_MINIBATCH_CONFIG_KEYS = ("sampler", "batch_size", "fanout", "bulk", "partition_mode",
                          "frontier")


def add_parser(sub):
    models = MODELS
    p = sub.add_parser("train", help="train a GNN on a graph and report accuracy, time and "
                                     "bytes per epoch")
    p.add_argument("--graph", required=True, help="dataset name (cora; python -m spgnn "
                                                  "datasets), graph file or folder, or "
                                                  "generator spec (sbm:300:3:0)")
    p.add_argument("--name", default=None, help="dataset in a folder holding several (cora)")
    add_graph_options(p)
    p.add_argument("--model", default="gcn", choices=tuple(models),
                   help="; ".join(f"{n}: {s.help}" for n, s in models.items()))
    p.add_argument("--algo", default="auto", choices=("auto",) + tuple(DISTRIBUTED_ALGORITHMS),
                   help="auto (default): the configuration the performance model predicts "
                        "fastest, with its --replication or --grid (spgnn.cli.auto)")
    p.add_argument("--partition", default="none", choices=tuple(PARTITIONERS))
    p.add_argument("--replication", type=replication_arg, default=2,
                   help="c for 15d algorithms and partitioned sampling (default 2); auto with "
                        "--algo 15d/15d-aware: the c the performance model ranks first")
    p.add_argument("--grid", default=None, help="XxYxZ for 3d (with --algo auto: use 3d on "
                                                "this grid; default for 3d: the most cubic)")
    p.add_argument("--permute", default="none", choices=("none", "double"),
                   help="3d: Plexus's double permutation (independent row and column orders, "
                        "alternating by layer) to even out the nnz per rank")
    p.add_argument("--agg-blocks", type=int, default=1, metavar="K",
                   help="3d: blocked aggregation, the SpMM and its all-reduce in K row chunks "
                        "(same bytes, smaller buffers)")
    add_backend_options(p)
    p.add_argument("--dtype", default="float32", choices=DTYPES)
    p.add_argument("--epochs", type=int, default=None,
                   help="default: " + ", ".join(f"{s.defaults['epochs']} ({n})"
                                                for n, s in models.items()))
    p.add_argument("--hidden", type=int, default=None,
                   help="default: " + ", ".join(f"{s.defaults['hidden']} ({n})"
                                                for n, s in models.items()))
    p.add_argument("--layers", type=int, default=None,
                   help="graph convolutions (default 2; --model sage: one per --fanout hop)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--weight-decay", type=float, default=5e-4,
                   help="L2 on the first layer's weight (Kipf & Welling)")
    p.add_argument("--dropout", type=float, default=None,
                   help="default: " + ", ".join(f"{s.defaults['dropout']} ({n})"
                                                for n, s in models.items()))
    p.add_argument("--heads", type=int, default=None,
                   help="attention heads of the hidden layers (--model gat; default 8)")
    p.add_argument("--bias", action="store_true", help="biases in the convolutions (Kipf: none)")
    p.add_argument("--seed", type=int, default=0, help="initialisation, dropout and partition seed")
    p.add_argument("--split", default=None,
                   help="TRAIN:VAL fractions of a random stratified split (default: the graph's "
                        "own split, or 0.6:0.2 when it has none)")
    p.add_argument("--split-seed", type=int, default=0)
    p.add_argument("--feature-dim", type=int, default=None, metavar="D",
                   help="project the row-normalised features to D columns (Gaussian random "
                        "projection, then each column standardised)")
    add_synthetic_arguments(p)
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
    sage.add_argument("--bulk", type=int, default=None,
                      help="minibatches sampled per bulk step (default 16; not with --hec)")
    sage.add_argument("--partition-mode", default="replicated",
                      choices=("replicated", "partitioned"),
                      help="graph replicated on every rank, or split over a P/c x c grid")
    sage.add_argument("--frontier", default="unique", choices=("unique", "tree"),
                      help="GraphSAGE frontier (default unique)")
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
    comp = p.add_argument_group("communication reduction (full-graph, --algo 1d-aware; "
                                "paper 004, docs/communication.md)")
    comp.add_argument("--aggregation", default="post", choices=("post", "pre", "hybrid"),
                      help="cut edges: raw source rows (post), partial sums (pre), or a minimum "
                           "vertex cover per rank pair (hybrid)")
    comp.add_argument("--quantize", default="none", choices=("none", "int8", "int4", "int2"),
                      help="training exchanges (forward and gradient) as per-row int codes")
    comp.add_argument("--rounding", default="stochastic", choices=("stochastic", "nearest"))
    comp.add_argument("--label-prop", type=float, default=0.0, metavar="RATIO",
                      help="UniMP masked label embedding: each epoch every training node's "
                           "label joins its input with probability RATIO (0: off; paper 0.62)")
    hec_options.add_arguments(p)
    p.add_argument("--json", action="store_true", help="print one JSON object at the end")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(command="train")
    return p


# ------------------------------------------------------------------ checks
def add_synthetic_arguments(p):
    """``--features`` and ``--labels`` (spgnn.io.synthetic), shared with ``bench``."""
    p.add_argument("--features", default=None, metavar="SPEC",
                   help="replace (or provide) the node features: " + " | ".join(FEATURE_SPECS)
                        + " (seeded; docs/data.md)")
    p.add_argument("--labels", default=None, metavar="SPEC",
                   help="replace (or provide) the labels: " + " | ".join(LABEL_SPECS)
                        + " (seeded; chance accuracy)")


def check_synthetic(args):
    """Raise ValueError for a malformed ``--features`` / ``--labels`` spec. Local."""
    if args.features is not None:
        check_feature_spec(args.features, "--features")
    if args.labels is not None:
        check_label_spec(args.labels, "--labels")


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


def _parse_fanout(value):
    try:
        out = tuple(int(v) for v in str(value).replace(" ", "").split(",") if v)
    except ValueError:
        raise ValueError(f"train: --fanout must look like 15,10,5, but got {value!r}") from None
    if not out or min(out) < 1:
        raise ValueError(f"train: --fanout needs positive ints, but got {value!r}")
    return out


def apply_model_defaults(args):
    """Fill the options the user left out with the model's defaults; refuse options of other
    models. Local (every rank, before MPI starts)."""
    spec = MODELS[args.model]
    for key, value in spec.defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    # --bulk: None means "not given" (--hec refuses an explicit one, hec_options.check)
    args.bulk_given = args.bulk is not None
    if args.bulk is None:
        args.bulk = 16
    others = {o for s in MODELS.values() for o in s.options} - set(spec.options)
    keys = [k for k in sorted(others) if getattr(args, k) is not None]
    given = [f"--{k.replace('_', '-')}" for k in keys]
    if given:
        # the models those options belong to, not every model with options of its own
        owners = sorted(n for n, s in MODELS.items() if set(s.options) & set(keys))
        raise ValueError(f"train: {', '.join(given)} only apply to "
                         f"{' or '.join('--model ' + n for n in owners)}")
    if spec.training == "minibatch":
        if args.model_selection == "best-val" and not args.eval_every:
            raise ValueError("train: --model-selection best-val needs --eval-every >= 1")
        hops = len(_parse_fanout(args.fanout))
        if args.layers is None:
            args.layers = hops
        elif args.layers != hops:
            raise ValueError(f"train: --model {args.model} has one layer per --fanout hop "
                             f"({hops}), but --layers {args.layers} was given")


def check_args(args, p):
    """Raise ValueError for arguments every rank can judge alone (no communication)."""
    spec = MODELS[args.model]
    if args.epochs < 0:
        raise ValueError(f"train: --epochs must be >= 0, but got {args.epochs}")
    if args.hidden < 1 or args.layers < 1:
        raise ValueError(f"train: --hidden and --layers must be >= 1, but got {args.hidden} and "
                         f"{args.layers}")
    if not args.lr > 0 or not args.weight_decay >= 0:
        raise ValueError(f"train: --lr must be > 0 and --weight-decay >= 0, but got {args.lr} "
                         f"and {args.weight_decay}")
    for option in ("lr", "weight_decay"):
        if not np.isfinite(getattr(args, option)):
            raise NonFiniteError(f"train: --{option.replace('_', '-')} must be finite, but got "
                                 f"{getattr(args, option)}")
    if not 0 <= args.dropout < 1:
        raise ValueError(f"train: --dropout must lie in [0, 1), but got {args.dropout}")
    if args.every < 1:
        raise ValueError(f"train: --every must be >= 1, but got {args.every}")
    if args.feature_dim is not None and args.feature_dim < 1:
        raise ValueError(f"train: --feature-dim must be >= 1, but got {args.feature_dim}")
    _parse_split(args.split)
    check_synthetic(args)
    if not 0 <= args.label_prop < 1:
        raise ValueError(f"train: --label-prop must lie in [0, 1), but got {args.label_prop}")
    reduced = args.aggregation != "post" or args.quantize != "none" or args.label_prop
    if reduced and spec.training == "full-graph" and args.algo == "auto":
        args.algo = "1d-aware"          # the one algorithm these exchanges exist for
    if reduced and (spec.training != "full-graph" or args.algo != "1d-aware"):
        raise ValueError("train: --aggregation, --quantize and --label-prop need a full-graph "
                         "model with --algo 1d-aware")
    if spec.training == "full-graph":
        if spec.algorithms and (args.algo not in ("auto",) + spec.algorithms
                                or args.grid is not None or _wants_3d(args)):
            raise ValueError(f"train: --model {args.model} trains with --algo "
                             f"{' or '.join(spec.algorithms)} (or auto), not "
                             f"{'--grid' if args.grid is not None else '--permute/--agg-blocks' if _wants_3d(args) else args.algo}")
        if args.replication == "auto" and args.algo not in ("15d", "15d-aware", "auto"):
            raise ValueError(f"train: --replication auto applies to --algo 15d, 15d-aware or "
                             f"auto, not {args.algo}")
        if args.replication == "auto" and (_wants_3d(args) or args.grid is not None):
            raise ValueError("train: --replication auto chooses a 1.5D c; --grid, --permute "
                             "and --agg-blocks choose 3d")
        if (args.algo in ("15d", "15d-aware") and args.replication != "auto"
                and (args.replication < 1 or p % args.replication)):
            raise ValueError(f"train: --replication must divide the {p} ranks, but got "
                             f"{args.replication}")
        if args.grid is not None and args.algo not in ("3d", "auto"):
            raise ValueError("train: --grid applies to --algo 3d (or auto) only")
        if args.agg_blocks < 1:
            raise ValueError(f"train: --agg-blocks must be >= 1, but got {args.agg_blocks}")
        if _wants_3d(args) and args.algo not in ("3d", "auto"):
            raise ValueError("train: --permute and --agg-blocks apply to --algo 3d (or auto, "
                             "which then chooses among 3d grids) only")
        if args.grid is not None:
            parse_grid(args.grid, p, ndim=3, what="train: --grid")
        return
    _parse_fanout(args.fanout)
    if args.replication == "auto":
        raise ValueError("train: --replication auto applies to full-graph models only")
    if args.batch_size < 1 or args.bulk < 1:
        raise ValueError(f"train: --batch-size and --bulk must be >= 1, but got "
                         f"{args.batch_size} and {args.bulk}")
    if not 0 <= args.input_dropout < 1:
        raise ValueError(f"train: --input-dropout must lie in [0, 1), but got "
                         f"input_dropout={args.input_dropout}")
    if args.eval_every < 0:
        raise ValueError(f"train: --eval-every must be >= 0, but got {args.eval_every}")
    if args.ladies_size is not None and args.ladies_size < 1:
        raise ValueError(f"train: --ladies-size must be >= 1, but got {args.ladies_size}")
    if args.partition_mode == "partitioned" and (args.replication < 1 or p % args.replication):
        raise ValueError(f"train: --replication {args.replication} must divide the {p} ranks")
    hec_options.check(args, p)


def _wants_3d(args):
    """Options of 3d training only: ``--algo auto`` then ranks 3d grids only."""
    return getattr(args, "permute", "none") != "none" or getattr(args, "agg_blocks", 1) != 1


def _config(args, p):
    spec = MODELS[args.model]
    keys = _CONFIG_KEYS + ((_MINIBATCH_CONFIG_KEYS + spec.options)
                           if spec.training == "minibatch" else ())
    if spec.training == "minibatch" and hec_options.enabled(args):
        keys += hec_options.CONFIG_KEYS
    cfg = {k: getattr(args, k) for k in keys}
    # ./x and x are one file: compare real paths (a generator spec stays as given)
    cfg["graph"] = os.path.realpath(args.graph) if os.path.exists(args.graph) else str(args.graph)
    if spec.training == "minibatch":
        cfg["fanout"] = list(_parse_fanout(args.fanout))
    else:
        cfg.update({k: getattr(args, k) for k in _EXCHANGE_CONFIG})
        cfg["label_prop"] = float(args.label_prop)
        if args.quantize == "none":
            cfg["rounding"] = None          # only quantized exchanges round
    cfg["ranks"] = p
    return cfg


# ------------------------------------------------------------------ loading
def load_root(args):
    """Rank 0: the graph with a split, its features projected when asked. Local."""
    graph = with_synthetic(load_graph(args.graph, name=args.name, **graph_options(args)), args.features, args.labels)
    split = _parse_split(args.split)
    if split is None and graph.train_mask is None:
        split = (0.6, 0.2)
    if split is not None:
        graph = graph.random_split(*split, seed=args.split_seed)
    if graph.train_mask is None or not np.any(graph.train_mask):
        raise ValueError(f"train: {graph.name} has no training vertices (its split, or --split "
                         f"{args.split}); nothing would be trained")
    if getattr(args, "model_selection", None) == "best-val" and args.eval_every and (
            graph.val_mask is None or not np.any(graph.val_mask)):
        raise ValueError(f"train: --model-selection best-val needs validation vertices, but "
                         f"{graph.name}'s split has none (choose --model-selection last)")
    if args.feature_dim:
        # project the row-normalised features, then standardise each column:
        # projected rows hold both signs (row-normalising them again would
        # divide by sums near 0) and are small (~1/sqrt(words per row))
        z = random_projection(row_normalize_features(graph.features, np.float64),
                              args.feature_dim, args.seed)
        z -= z.mean(axis=0)
        z /= np.where(z.std(axis=0) > 0, z.std(axis=0), 1.0)
        graph = dataclasses.replace(graph, features=z)
    return graph


# ------------------------------------------------------------------ building
def _options(args):
    o = vars(args).copy()
    if o.get("fanout") is not None:
        o["fanout"] = _parse_fanout(o["fanout"])
    return o


def _build_full_graph(comm, args, graph, spec):
    if args.algo == "auto" or args.replication == "auto":
        _choose_auto(comm, args, graph)
    kw = {}
    if args.algo == "3d" and args.grid:
        kw["grid"] = parse_grid(args.grid, comm.size, ndim=3, what="train: --grid")
    if args.algo == "3d":
        kw.update(permute=args.permute, agg_blocks=args.agg_blocks)
    dg = DistGraph.from_graph(graph, comm, algorithm=args.algo, partition=args.partition,
                              replication=args.replication, backend=args.backend,
                              seed=args.seed, dtype=np.dtype(args.dtype),
                              normalize_features=not args.feature_dim,
                              aggregation=spec.adjacency, **kw)
    configure_exchange(dg, args.aggregation, args.quantize, args.rounding, seed=args.seed)
    lp = LabelPropagation(dg, args.label_prop, args.seed).attach() if args.label_prop else None
    model = spec.build(dg.num_features, dg.num_classes, _options(args))
    opt = Adam(model.param_groups(args.weight_decay), lr=args.lr)
    trainer = Trainer(model, dg, opt) if lp is None else LabelPropTrainer(model, dg, opt, lp)
    return trainer, args.algo


def _choose_auto(comm, args, graph):
    """Replace ``--algo auto`` by the model's choice (agreed by all ranks), log the top 3."""
    import sys

    from ..plan.choose import choose, describe

    dims, err = None, None
    if graph is not None:       # rank 0: the model ranks configurations by the layer widths
        try:
            require_features_and_labels(graph)
        except ValueError as exc:
            err = exc
    comm.agree(err)
    if graph is not None:       # rank 0; --feature-dim is already applied by load_root
        dims = ([int(graph.features.shape[1])] + [args.hidden] * (args.layers - 1)
                + [int(graph.num_classes)])
    algo, c, grid, top = choose(comm, graph, dims, partition=args.partition, seed=args.seed,
                                grid=args.grid,
                                algorithms=("3d",) if _wants_3d(args)
                                else (args.algo,) if args.algo.startswith("15d")
                                else MODELS[args.model].algorithms,
                                permute=args.permute, agg_blocks=args.agg_blocks)
    args.algo, args.auto_choice = algo, top
    if algo.startswith("15d") or args.replication == "auto":
        args.replication = c
    if grid is not None:
        args.grid = "x".join(map(str, grid))
    if comm.rank == 0:
        print(f"--algo auto chose {top[0]['algorithm']}"
              f"{' --grid ' + args.grid if grid else ''}"
              f"{' --replication %d' % c if algo.startswith('15d') else ''}:\n{describe(top)}",
              file=sys.stderr, flush=True)


def _build_minibatch(comm, args, graph, spec):
    fanout = _parse_fanout(args.fanout)
    c = args.replication if args.partition_mode == "partitioned" else 1
    dtype = np.dtype(args.dtype)
    if hec_options.enabled(args):
        return hec_options.build(comm, args, graph, spec, fanout, dtype, _options(args))
    mg = MinibatchGraph.from_graph(graph, comm, mode=args.partition_mode, replication=c, root=0,
                                   dtype=dtype, backend=args.backend,
                                   normalize_features=not args.feature_dim)
    if args.sampler == "sage":
        sampler = GraphSAGESampler(fanout, frontier=args.frontier, include_dst=True,
                                   seed=args.seed)
    else:
        sampler = LADIESSampler((args.ladies_size or args.batch_size,) * len(fanout),
                                seed=args.seed)
    model = spec.build(mg.num_features, mg.num_classes, _options(args))
    opt = Adam(model.param_groups(args.weight_decay), lr=args.lr)
    trainer = MinibatchTrainer(model, mg, sampler, opt, batch_size=args.batch_size,
                               bulk=args.bulk, seed=args.seed, dtype=dtype)
    return trainer, f"{args.model}-minibatch"


def _save_weights(comm, path, model):
    """Assemble every parameter (collective) and write them from rank 0."""
    arrays = {name: p.to_global() for name, p in model.named_parameters()}
    err = None
    if comm.rank == 0:
        try:
            write_npz_atomic(path, arrays)
        except OSError as exc:                   # a full disk: the message names the file
            err = exc
    comm.agree(err)


# ------------------------------------------------------------------ the run
def train(comm, args):
    """Run the command's training on ``comm``; the result dict on every rank.

    ``args`` is the parsed command line (:func:`apply_model_defaults` applied).
    Collective over ``comm``.

    Returns
    -------
    dict
        ``test_acc``, ``val_acc``, ``train_acc`` (evaluation mode, the
        reported model), ``test_loss``, ``val_loss``, ``final_loss`` (training
        loss of the last epoch), ``loss_history`` (the training loss of each
        epoch of this run), ``epochs`` (in total, resumed ones included),
        ``epochs_this_run``, ``resumed_from`` (epoch, or None),
        ``seconds_per_epoch`` (mean over this run's epochs after the first,
        slowest rank; the first, which loads compiled kernels, is
        ``first_epoch_seconds``), ``setup_seconds``, ``bytes_per_epoch``
        (bytes all ranks sent in the last epoch, from the ledger),
        ``bytes_per_epoch_constant``, ``bytes_per_epoch_max_rank``,
        ``algorithm``, ``model``, ``ranks``, ``graph``, ``seed``, ``n``,
        ``features``, ``classes``; full-graph models also ``partition``,
        ``hidden``, ``layers``, ``dtype``, ``sparse_features``; minibatch
        models ``sampler``, ``fanout``, ``batch_size``, ``bulk``,
        ``partition_mode``, ``replication``, ``steps_per_epoch``,
        ``fetch_bytes_per_epoch``, ``model_selection``,
        ``last_epoch_test_acc``, ``last_epoch_val_acc``, ``best_val_acc``,
        ``test_acc_at_best_val``, ``best_epoch``.
    """
    spec = MODELS[args.model]
    p = comm.size
    try:
        check_args(args, p)
        err = None
    except (ValueError, TypeError, NonFiniteError) as exc:
        err = exc
    # every rank judges the arguments alike: agreeing (one tiny all-reduce)
    # makes the error one clean message from rank 0 instead of an MPI_Abort
    comm.agree(err)
    # unknown, or no usable device on some rank (cupy): the same error on every rank
    resolve_backend(comm, args)
    cfg = _config(args, p)
    t_setup = time.perf_counter()
    ckpt_dir = args.checkpoint or args.resume
    lock = _lock(comm, ckpt_dir) if ckpt_dir else None      # before the long set-up
    try:
        return _setup_and_run(comm, args, spec, cfg, ckpt_dir, t_setup)
    finally:
        if lock is not None:
            lock.release()


def _setup_and_run(comm, args, spec, cfg, ckpt_dir, t_setup):
    """Load, distribute, build, then :func:`_run`. Collective."""
    graph = load_on_root(comm, lambda: load_root(args))     # a bad path raises on every rank
    # the data a resume must match, not only the --graph string: another file
    # with the same shapes, or the same file edited, is another run
    cfg["data"] = comm.bcast_obj(graph_fingerprint(graph) if graph is not None else None,
                                 root=0, label="train:meta")
    build = _build_full_graph if spec.training == "full-graph" else _build_minibatch
    trainer, algorithm = build(comm, args, graph, spec)
    name = comm.bcast_obj(graph.name if graph is not None else None, root=0, label="train:meta")
    del graph
    selection = EvaluateEvery(args.eval_every, args.model_selection) \
        if spec.training == "minibatch" and args.eval_every else None
    return _run(comm, args, spec, cfg, trainer, algorithm, name, selection, ckpt_dir, t_setup)


def graph_fingerprint(graph):
    """Sizes and CRC-32s of a loaded graph's arrays (what a resume must match). Local."""
    parts = {"adj": graph.adj}
    if graph.features is not None:
        parts["features"] = graph.features
    for key in ("labels", "train_mask", "val_mask", "test_mask"):
        if getattr(graph, key) is not None:
            parts[key] = getattr(graph, key)
    out = {}
    for key, a in parts.items():
        arrays = (a.indptr, a.indices, a.data) if sp.issparse(a) else (np.asarray(a),)
        out[key] = [list(np.shape(a)), [int(zlib.crc32(np.ascontiguousarray(x).view(np.uint8)
                                                       .reshape(-1))) for x in arrays]]
    return out


def _lock(comm, directory):
    """Rank 0 locks the checkpoint directory for this run; an error on every rank if taken.

    Collective (one agreement).
    """
    lock, err = None, None
    if comm.rank == 0:
        try:
            lock = DirectoryLock(directory).acquire()
        except (CheckpointError, OSError) as exc:
            err = exc
    comm.agree(err)
    return lock


def _resume(comm, args, spec, cfg, trainer, selection):
    """Restore the newest usable checkpoint; ``(history, resumed_from)``. Collective."""
    state = load_training_state(comm, args.resume, spec.checkpoint_format, cfg,
                                f"--model {spec.name} training",
                                defaults=_EXCHANGE_CONFIG if spec.training == "full-graph"
                                else None)
    try:
        trainer.restore_state(state["trainer"])
        err = None
    except (ValueError, NonFiniteError) as exc:      # a rank may hold its own part
        err = exc
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        err = CheckpointError(f"train: the checkpoint in {args.resume} holds a malformed "
                              f"training state ({type(exc).__name__}: {exc})")
    comm.agree(err)
    if trainer.epoch > args.epochs:
        raise ValueError(f"train: the checkpoint in {args.resume} holds {trainer.epoch} epochs, "
                         f"more than --epochs {args.epochs}; ask for at least {trainer.epoch} "
                         f"(or start a new run in another directory)")
    if selection is not None and state.get("selection"):
        selection.best = dict(state["selection"]["best"])
        selection.best_state = state["selection"]["best_state"]
    return state.get("history", []), trainer.epoch


def _run(comm, args, spec, cfg, trainer, algorithm, name, selection, ckpt_dir, t_setup):
    """Resume, train, evaluate and report (the second half of :func:`train`). Collective."""
    p = comm.size
    minibatch = spec.training == "minibatch"
    history, resumed_from = [], None
    if args.resume:
        history, resumed_from = _resume(comm, args, spec, cfg, trainer, selection)
    metrics = Metrics(history)

    def checkpoint_state(tr):
        return {"format": spec.checkpoint_format, "config": cfg, "epoch": tr.epoch,
                "rng": {"kind": "counter-based, keyed by (seed, epoch)", "seed": tr.seed,
                        "epoch": tr.epoch},
                "trainer": tr.gather_state(), "history": metrics.history,
                "selection": None if selection is None else
                {"best": selection.best, "best_state": selection.best_state}}

    hooks = [metrics] + ([selection] if selection is not None else [])
    if not args.no_progress:
        hooks.append(ProgressBar(args.epochs, f"{name} {algorithm} P={p}"))
    if ckpt_dir:
        hooks.append(Checkpoint(ckpt_dir, args.every, checkpoint_state))
    setup_seconds = time.perf_counter() - t_setup
    trainer.fit(max(0, args.epochs - trainer.epoch), evaluate=False, hooks=hooks)
    last_ev = trainer.evaluate()
    restored = selection is not None and selection.restore_best(trainer)
    ev = trainer.evaluate() if restored else last_ev
    if args.save_weights:
        _save_weights(comm, args.save_weights, trainer.model)

    # Slowest rank's epoch times; the first epoch of a run loads the kernels.
    t = np.asarray(metrics.seconds, dtype=np.float64)
    steady = t[1:] if t.size > 1 else t
    red = comm.allreduce(np.array([steady.sum(), t[:1].sum()]), op="max", label="train:report")
    per_rank = comm.allgather_obj(metrics.bytes[-1] if metrics.bytes else 0,
                                  label="train:report")
    bytes_epoch = [h[2] for h in metrics.history]
    g = trainer.graph
    out = {"graph": name, "ranks": p, "algorithm": algorithm, "model": args.model,
           **({"auto": args.auto_choice} if getattr(args, "auto_choice", None) else {}),
           "seed": args.seed, "n": trainer.eval_graph.num_nodes,
           "features": trainer.eval_graph.num_features,
           "classes": trainer.eval_graph.num_classes,
           "epochs": trainer.epoch, "epochs_this_run": len(metrics.seconds),
           "resumed_from": resumed_from,
           "test_acc": ev["test_acc"], "val_acc": ev["val_acc"], "train_acc": ev["train_acc"],
           "test_loss": ev["test_loss"], "val_loss": ev["val_loss"],
           "final_loss": metrics.history[-1][0] if metrics.history else None,
           "loss_history": metrics.losses,
           "seconds_per_epoch": float(red[0] / steady.size) if steady.size else None,
           "first_epoch_seconds": float(red[1]) if t.size else None,
           "setup_seconds": setup_seconds,
           "bytes_per_epoch": int(bytes_epoch[-1]) if bytes_epoch else 0,
           "bytes_per_epoch_constant": len(set(bytes_epoch)) <= 1,
           "bytes_per_epoch_max_rank": max(per_rank),
           "bytes_per_epoch_by_label": _bytes_by_label(comm, metrics.last)}
    if args.backend == "cupy":         # node data on the device; how its buffers moved
        out.update(backend="cupy", gpu_comm=comm.gpu_comm)
    if not minibatch:
        out.update({"aggregation": args.aggregation, "quantize": args.quantize,
                    "rounding": args.rounding, "label_prop": args.label_prop})
        if algorithm == "3d":
            out.update({"permute": args.permute, "agg_blocks": args.agg_blocks})
        if algorithm.startswith("15d"):
            out["replication"] = args.replication
        out.update({"partition": args.partition, "hidden": args.hidden, "layers": args.layers,
                    "dtype": args.dtype,
                    "sparse_features": type(g.features).__name__ == "SparseBackedMatrix"})
        return out
    last = metrics.last or {"fetch_bytes": 0}
    fetch = int(comm.allreduce(np.array([last.get("fetch_bytes", 0)], dtype=np.int64),
                               label="train:report")[0])
    best = selection.best if selection is not None else \
        {"best_val_acc": None, "test_acc_at_best_val": None, "best_epoch": None}
    out.update({"sampler": args.sampler, "fanout": list(_parse_fanout(args.fanout)),
                "batch_size": args.batch_size, "bulk": args.bulk,
                "partition_mode": args.partition_mode, "replication": g.replication,
                "hidden": args.hidden,
                "steps_per_epoch": int(getattr(trainer, "iterations", None)
                                       or trainer.schedule().shape[0]),
                "fetch_bytes_per_epoch": fetch,
                "model_selection": "best-val" if restored else "last",
                "last_epoch_test_acc": last_ev["test_acc"],
                "last_epoch_val_acc": last_ev["val_acc"], **best})
    if hec_options.enabled(args):
        out.update(hec_options.report(comm, trainer, last))
    return out


def _bytes_by_label(comm, last):
    """Ledger label -> bytes all ranks sent in the last epoch (codec data and params apart,
    the gradient all-reduce under ``gnn:grad-*``). Collective."""
    mine = (last or {}).get("bytes_by_label", {})
    out = {}
    for part in comm.allgather_obj(mine, label="train:report"):
        for k, v in part.items():
            out[k] = out.get(k, 0) + int(v)
    return dict(sorted(out.items()))


def run(args):
    apply_model_defaults(args)         # every rank, before MPI starts
    comm = Communicator.world()        # initialises MPI; train() checks before communicating
    result = train(comm, args)
    print_result(comm, result, args.json)
    return 0
