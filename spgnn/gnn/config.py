"""``TrainConfig``: one frozen description of a training run, with every default and check.

Built from Python (``TrainConfig(graph="cora", model="sage", fanout="10,5")``)
or from the command line (``python -m spgnn train`` generates its flags from
this class's fields: their help, choices and groups are the field metadata,
the choices the library's own constants).  Construction fills the model's
defaults (:data:`~spgnn.gnn.registry.MODELS`) and checks every value a rank can
judge alone; :meth:`TrainConfig.check_ranks` adds what depends on the rank
count.  An option that does not apply to the chosen model, algorithm or mode
is refused by name (:data:`APPLIES`: one table, checked once), never ignored.

:meth:`TrainConfig.load_graph` reads the graph (rank 0) and
:meth:`TrainConfig.build` (collective) turns the config into a
:class:`~spgnn.gnn.train.Trainer` over the right batch source:

====================  ==================================================================
model's training      source
====================  ==================================================================
full-graph            :class:`~spgnn.gnn.sources.FullGraph` of a
                      :class:`~spgnn.gnn.data.DistGraph` placed by :meth:`placement`
                      (``algo auto``: the time model's choice), label propagation as
                      its transform
minibatch             :class:`~spgnn.gnn.sources.Sampled` (``hec`` not given) or
                      :class:`~spgnn.gnn.sources.Halo` (``hec on|off``)
====================  ==================================================================
"""

import dataclasses
import os
from dataclasses import dataclass, field

import numpy as np

from ..backends._quant import ROUNDINGS
from ..comm.communicator import agreed_like
from ..comm.watchdog import check_timeout
from ..core.codec import QUANTIZE_CHOICES
from ..core.hybrid import AGGREGATIONS
from ..core.spmm import DISTRIBUTED_ALGORITHMS
from ..errors import GridError, NonFiniteError, ShardError
from ..grid import default_grid_3d, parse_grid
from ..plan.host import note_default
from ..io import is_shard_dir, load_graph, read_manifest
from ..io.preprocess import random_projection, row_normalize_features
from ..io.synthetic import check_feature_spec, check_label_spec, with_synthetic
from ..partition import PARTITIONERS
from ..plan.choose import choose
from ..sampling import FRONTIERS, GraphSAGESampler, LADIESSampler
from .hec import MISS_POLICIES, HECConfig, HECRunner
from .hooks import SELECTIONS, EvaluateEvery, StalledLoss
from .label_prop import LabelPropagation
from .minibatch import MODES, MinibatchGraph
from .optim import Adam
from .partitioned import HaloGraph
from .placement import PERMUTES, Exchange, placement_for
from .data import DistGraph, require_features_and_labels
from .registry import MODELS
from .sources import FullGraph, Halo, Sampled
from .train import Trainer

__all__ = ["TrainConfig", "Built", "APPLIES", "DTYPES", "SAMPLERS", "HEC_MODES", "HEC_RESETS"]

DTYPES = ("float32", "float64")
SAMPLERS = ("sage", "ladies")
HEC_MODES = ("on", "off", "none")
HEC_RESETS = ("epoch", "never")


def push_cap_arg(text):
    """``--hec-push-cap``: ``auto`` or an int."""
    return text if text == "auto" else int(text)


def _opt(default, help, group=None, **cli):
    """A field with the command line's description of it (``cli``: type, choices, metavar)."""
    return field(default=default, metadata=dict(help=help, group=group, **cli))


_MINIBATCH = "minibatch training (--model sage)"
_EXCHANGE = ("communication reduction (full-graph, --algo 1d-aware; paper 004, "
             "docs/communication.md)")
_HEC = ("partitioned minibatch training with a historical embedding cache (--model sage; "
        "docs/hec.md)")
_HEC_DEFAULTS = HECConfig()


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of one training run.  Local; frozen (``dataclasses.replace`` makes another).

    ``None`` means "not given": the model's default (:data:`MODELS`), the
    training mode's default, or nothing where the option does not apply.
    Options of another model, algorithm or mode raise ValueError naming them
    (:data:`APPLIES`).  Fields are the command's flags with ``-`` as ``_``;
    ``model_options`` holds the options a model declares itself
    (:class:`~spgnn.gnn.registry.ModelOption`, e.g. GAT's ``heads``).
    """

    # --- the data (no group: the command's own options)
    graph: str = _opt(None, "dataset name (cora; python -m spgnn datasets), graph file or "
                            "folder, or generator spec (sbm:300:3:0)", required=True)
    name: str = _opt(None, "dataset in a folder holding several (cora)")
    num_nodes: int = None            # the shared --num-nodes / --relabel (cli/_graph_options)
    relabel: bool = False
    features: str = None             # the shared --features / --labels (io.synthetic)
    labels: str = None
    split: str = _opt(None, "TRAIN:VAL fractions of a random stratified split (default: the "
                            "graph's own split, or 0.6:0.2 when it has none)")
    split_seed: int = _opt(0, "seed of --split", type=int)
    feature_dim: int = _opt(None, "project the row-normalised features to D columns (Gaussian "
                                  "random projection, then each column standardised)",
                            type=int, metavar="D")
    # --- the model and its optimisation
    model: str = _opt("gcn", "; ".join(f"{n}: {s.help}" for n, s in MODELS.items()),
                      choices=tuple(MODELS))
    epochs: int = _opt(None, "default: " + ", ".join(f"{s.defaults['epochs']} ({n})"
                                                     for n, s in MODELS.items()), type=int)
    hidden: int = _opt(None, "default: " + ", ".join(f"{s.defaults['hidden']} ({n})"
                                                     for n, s in MODELS.items()), type=int)
    layers: int = _opt(None, "graph convolutions (default 2; --model sage: one per --fanout "
                             "hop)", type=int)
    lr: float = _opt(0.01, "learning rate (Adam)", type=float)
    weight_decay: float = _opt(5e-4, "L2 on the first layer's weight (Kipf & Welling)",
                               type=float)
    dropout: float = _opt(None, "default: " + ", ".join(f"{s.defaults['dropout']} ({n})"
                                                        for n, s in MODELS.items()), type=float)
    bias: bool = _opt(False, "biases in the convolutions (Kipf: none)", action="store_true")
    seed: int = _opt(0, "initialisation, dropout and partition seed", type=int)
    dtype: str = _opt("float32", "parameter and feature dtype", choices=DTYPES)
    model_options: dict = field(default_factory=dict)
    # --- full-graph placement
    algo: str = _opt("auto", "auto (default): the configuration the performance model "
                             "predicts fastest, with its --replication or --grid",
                     choices=("auto",) + tuple(DISTRIBUTED_ALGORITHMS))
    partition: str = _opt("none", "vertex partition (renumbering) of the graph",
                          choices=tuple(PARTITIONERS))
    replication: object = _opt(2, "c for 15d algorithms and partitioned sampling (default 2); "
                                  "auto with --algo 15d/15d-aware: the c the performance model "
                                  "ranks first", metavar="C")
    grid: str = _opt(None, "XxYxZ for 3d (with --algo auto: use 3d on this grid; default for "
                           "3d: the most cubic)")
    memory_limit: str = _opt(None, "bytes per rank (e.g. 2G): --algo auto skips configurations "
                                   "whose predicted peak (spgnn.plan.memory) exceeds it, an "
                                   "explicit --algo or --model sage --hec is refused over it "
                                   "(default: this host's memory over the ranks on it; none: "
                                   "no check)", metavar="BYTES")
    permute: str = _opt("none", "3d: Plexus's double permutation (independent row and column "
                                "orders, alternating by layer) to even out the nnz per rank",
                        choices=PERMUTES)
    agg_blocks: int = _opt(1, "3d: blocked aggregation, the SpMM and its all-reduce in K row "
                              "chunks (same bytes, smaller buffers)", type=int, metavar="K")
    # --- full-graph exchanges (1d-aware)
    aggregation: str = _opt("post", "cut edges: raw source rows (post), partial sums (pre), or "
                                    "a minimum vertex cover per rank pair (hybrid)", _EXCHANGE,
                            choices=AGGREGATIONS)
    quantize: str = _opt("none", "training exchanges (forward and gradient) as per-row int "
                                 "codes", _EXCHANGE, choices=QUANTIZE_CHOICES)
    rounding: str = _opt("stochastic", "rounding of the quantized codes", _EXCHANGE,
                         choices=ROUNDINGS)
    label_prop: float = _opt(0.0, "UniMP masked label embedding: each epoch every training "
                                  "node's label joins its input with probability RATIO (0: "
                                  "off; paper 0.62)", _EXCHANGE, type=float, metavar="RATIO")
    # --- minibatch training
    sampler: str = _opt(None, "neighbour sampler (default sage)", _MINIBATCH, choices=SAMPLERS)
    batch_size: int = _opt(None, "training vertices per minibatch (default 512)", _MINIBATCH,
                           type=int)
    fanout: object = _opt(None, "neighbours per hop, one hop per layer (default 15,10,5)",
                          _MINIBATCH)
    bulk: int = _opt(None, "minibatches sampled per bulk step (default 16; not with --hec)",
                     _MINIBATCH, type=int)
    partition_mode: str = _opt(None, "graph replicated on every rank (default), or split over a "
                                     "P/c x c grid (a shard directory as --graph: partitioned)",
                            _MINIBATCH, choices=MODES)
    frontier: str = _opt(None, "GraphSAGE frontier (default unique)", _MINIBATCH,
                         choices=FRONTIERS)
    ladies_size: int = _opt(None, "vertices LADIES samples per layer (default: --batch-size)",
                            _MINIBATCH, type=int)
    eval_every: int = _opt(None, "full-neighbourhood evaluation every K epochs (default 1; 0: "
                                 "only at the end)", _MINIBATCH, type=int, metavar="K")
    model_selection: str = _opt(None, "report the model of the epoch with the best validation "
                                      "accuracy (default when evaluating) or of the last epoch",
                                _MINIBATCH, choices=SELECTIONS)
    # --- partitioned minibatch training and the HEC
    hec: str = _opt(None, "partitioned training (needs --partition metis|random|balanced, or a "
                          "shard directory as --graph: its parts): 'on' "
                          "caches halo embeddings pushed asynchronously, 'off' fetches halo "
                          "features exactly every iteration, 'none' drops remote neighbours "
                          "(no halo traffic: the baseline)", _HEC, choices=HEC_MODES)
    hec_capacity: int = _opt(None, f"cache rows per level per rank (default "
                                   f"{_HEC_DEFAULTS.cs})", _HEC, type=int, metavar="CS")
    hec_life: int = _opt(None, f"life span in iterations (default {_HEC_DEFAULTS.ls})", _HEC,
                         type=int, metavar="LS")
    hec_push_cap: object = _opt(None, f"rows pushed per peer per level per iteration, or auto "
                                      f"(default {_HEC_DEFAULTS.nc}: push what the peers will "
                                      f"read, within a quarter of the fetch's bytes; "
                                      f"docs/hec.md)", _HEC, type=push_cap_arg, metavar="NC")
    hec_delay: int = _opt(None, f"iterations between a push and its use (default "
                                f"{_HEC_DEFAULTS.d})", _HEC, type=int, metavar="D")
    miss_policy: str = _opt(None, f"what a cache miss does (default "
                                  f"{_HEC_DEFAULTS.miss_policy})", _HEC, choices=MISS_POLICIES)
    hec_prefill: bool = _opt(False, "fill the level-0 cache with every halo's features each "
                                    "epoch", _HEC, action="store_true")
    hec_levels: int = _opt(None, "cache levels 0..L-1 only (default: all)", _HEC, type=int,
                           metavar="L")
    hec_reset: str = _opt(None, "empty the caches at each epoch start (default) or never", _HEC,
                          choices=HEC_RESETS)
    # --- running
    backend: str = None              # the shared --backend / --gpu-comm (cli/_backend_options)
    gpu_comm: str = None
    checkpoint: str = _opt(None, "write a checkpoint into DIR every --every epochs",
                           metavar="DIR")
    every: int = _opt(10, "checkpoint every K epochs", type=int, metavar="K")
    resume: str = _opt(None, "continue from the newest checkpoint in DIR (and keep "
                             "checkpointing there unless --checkpoint says otherwise)",
                       metavar="DIR")
    save_weights: str = _opt(None, "write the final parameters (global matrices) as npz from "
                                   "rank 0", metavar="FILE")
    collective_timeout: float = _opt(None, "seconds a collective may wait before the job ends, "
                                           "naming the ranks that did not arrive (default "
                                           "$SPGNN_COLLECTIVE_TIMEOUT or 600; 0: never; "
                                           "docs/reliability.md)", type=float,
                                     metavar="SECONDS")
    phases: bool = _opt(False, "measure the waiting in each epoch: a timed barrier before every "
                               "collective of the epochs (costs one barrier per collective); "
                               "without it epoch_seconds_by_phase reports wait as null and the "
                               "waiting inside the communication (docs/performance.md)",
                        action="store_true")

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"train: unknown --model {self.model!r}; expected one of "
                             f"{tuple(MODELS)}")
        if self.graph is None:
            raise ValueError("train: a graph is needed (--graph)")
        self._refuse_options_that_do_not_apply()
        self._fill_defaults()
        self._check()

    # ------------------------------------------------------------------ reading
    @property
    def spec(self):
        """The model's :class:`~spgnn.gnn.registry.ModelSpec`."""
        return MODELS[self.model]

    @property
    def minibatch(self) -> bool:
        return self.spec.training == "minibatch"

    @property
    def sharded(self) -> bool:
        """``graph`` is a shard directory (``spgnn partition``): every rank reads its own part."""
        return is_shard_dir(self.graph)

    @property
    def generated(self) -> bool:
        """Full-graph training on a generator spec that each rank draws its rows of
        (:meth:`DistGraph.from_generator`): a full-graph model, ``partition none``, no
        ``feature_dim``/``num_nodes``/``relabel``, not ``permute double`` (``algo auto``
        ranks the ranks' rows, :func:`spgnn.plan.from_rows.choose_from_rows`).  Other runs
        on a generator spec load the whole graph on rank 0."""
        from ..io.generators import parse_spec
        try:
            spec = parse_spec(self.graph)
        except ValueError:
            return False
        return (spec is not None and not self.minibatch and self.partition == "none"
                and not self.feature_dim and not self.num_nodes and not self.relabel
                and self.permute == "none" and self.name is None)

    def generated_split(self):
        """``(train, val, seed)`` of a generated graph's per-vertex split: ``--split`` with
        ``--split-seed``, else an SBM's own (0.6:0.2, the spec's seed) or 0.6:0.2 with
        ``--split-seed`` -- what :meth:`load_graph` gives the whole graph."""
        from ..io.generators import parse_spec
        split = _parse_split(self.split)
        if split is not None:
            return split + (self.split_seed,)
        spec = parse_spec(self.graph)
        return (0.6, 0.2, spec.seed if spec.has_data else self.split_seed)

    @property
    def reduced_exchange(self) -> bool:
        """Pre/hybrid aggregation, quantization or label propagation: ``1d-aware`` only."""
        return self.aggregation != "post" or self.quantize != "none" or bool(self.label_prop)

    def option(self, name):
        """The value of the model's own option ``name`` (its default when not given)."""
        return self.model_options[name]

    def flag_values(self, name):
        """``--flag value`` as the user would write it (for messages)."""
        return f"{_flag(name)} {getattr(self, name)}"

    # ------------------------------------------------------------------ checks
    def _given(self, name):
        default = _DEFAULTS[name]
        return getattr(self, name) != default

    def _refuse_options_that_do_not_apply(self):
        for names, applies, message in APPLIES:
            given = [n for n in names if self._given(n)]
            if given and not applies(self):
                raise ValueError("train: " + message.format(
                    flags=", ".join(_flag(n) for n in given),
                    apply="applies" if len(given) == 1 else "apply",
                    need="needs" if len(given) == 1 else "need",
                    values=", ".join(self.flag_values(n) for n in given),
                    minibatch=" or --model ".join(n for n, s in MODELS.items()
                                                  if s.training == "minibatch")))
        mine = {o.name for o in self.spec.options}
        others = sorted(k for k, v in self.model_options.items() if v is not None and k not in mine)
        if others:
            owners = sorted(n for n, s in MODELS.items()
                            if {o.name for o in s.options} & set(others))
            verb = "applies" if len(others) == 1 else "apply"
            raise ValueError(f"train: {', '.join(_flag(k) for k in others)} {verb} only to "
                             f"{' or '.join('--model ' + n for n in owners)}")

    def _set(self, **values):
        for k, v in values.items():
            object.__setattr__(self, k, v)

    def _fill_defaults(self):
        spec = self.spec
        self._set(**{k: v for k, v in spec.defaults.items() if getattr(self, k) is None})
        given = dict(self.model_options)
        self._set(model_options={o.name: o.default if given.get(o.name) is None
                                 else o.kind(given[o.name]) for o in spec.options})
        if self.reduced_exchange and not self.minibatch and self.algo == "auto":
            self._set(algo="1d-aware")      # the one algorithm these exchanges exist for
        if not self.minibatch:
            return
        self._set(fanout=_parse_fanout(self.fanout if self.fanout is not None else "15,10,5"))
        filled = dict(sampler="sage", batch_size=512, partition_mode="replicated",
                      frontier="unique", eval_every=1, model_selection="best-val")
        if self.hec is None:
            filled["bulk"] = 16
        else:
            filled.update(hec_reset=_HEC_DEFAULTS.reset)
        if self.hec == "on":
            filled.update(hec_capacity=_HEC_DEFAULTS.cs, hec_life=_HEC_DEFAULTS.ls,
                          hec_push_cap=_HEC_DEFAULTS.nc, hec_delay=_HEC_DEFAULTS.d,
                          miss_policy=_HEC_DEFAULTS.miss_policy)
        self._set(**{k: v for k, v in filled.items() if getattr(self, k) is None})
        if self.model_selection == "best-val" and not self.eval_every:
            raise ValueError("train: --model-selection best-val needs --eval-every >= 1")
        if self.layers is None:
            self._set(layers=len(self.fanout))
        elif self.layers != len(self.fanout):
            raise ValueError(f"train: --model {self.model} has one layer per --fanout hop "
                             f"({len(self.fanout)}), but --layers {self.layers} was given")

    def _check(self):
        """Every check a rank can make alone, without the rank count."""
        for f in dataclasses.fields(self):          # the command's choices, from Python too
            choices, value = f.metadata.get("choices"), getattr(self, f.name)
            if choices is not None and value is not None and value not in choices:
                raise ValueError(f"train: {_flag(f.name)} must be one of {tuple(choices)}, but "
                                 f"got {value!r}")
        if self.epochs < 0:
            raise ValueError(f"train: --epochs must be >= 0, but got {self.epochs}")
        if self.hidden < 1 or self.layers < 1:
            raise ValueError(f"train: --hidden and --layers must be >= 1, but got {self.hidden} "
                             f"and {self.layers}")
        if not self.lr > 0 or not self.weight_decay >= 0:
            raise ValueError(f"train: --lr must be > 0 and --weight-decay >= 0, but got "
                             f"{self.lr} and {self.weight_decay}")
        for option in ("lr", "weight_decay"):
            if not np.isfinite(getattr(self, option)):
                raise NonFiniteError(f"train: {_flag(option)} must be finite, but got "
                                     f"{getattr(self, option)}")
        if not 0 <= self.dropout < 1:
            raise ValueError(f"train: --dropout must lie in [0, 1), but got {self.dropout}")
        for o in self.spec.options:
            o.check(self.option(o.name))
        if self.collective_timeout is not None:
            check_timeout(self.collective_timeout, "train: --collective-timeout")
        self._at_least(seed=0, split_seed=0, every=1, feature_dim=1)   # seeds key random streams
        _parse_split(self.split)
        if self.features is not None:
            check_feature_spec(self.features, "--features")
        if self.labels is not None:
            check_label_spec(self.labels, "--labels", alone=self.generated)
        if not 0 <= self.label_prop < 1:
            raise ValueError(f"train: --label-prop must lie in [0, 1), but got {self.label_prop}")
        if self.minibatch:
            self._check_minibatch()
        else:
            self._check_full_graph()
        if self.sharded:
            self._check_shards()

    def _check_shards(self):
        """What a shard directory fixes at ``spgnn partition`` time, or cannot do."""
        halo = self.minibatch and self.hec is not None
        why = {"partition_mode": "minibatch training in this mode samples the whole graph "
                                 "on every rank; give --partition-mode partitioned (bulk sampling "
                                 "on block rows) or --hec off|on|none (one part per rank)"
               if self.minibatch and not halo and self.partition_mode != "partitioned"
               else None,
               "permute": "the double permutation needs the whole adjacency"
               if self.permute != "none" else None}
        # --hec trains on the shards' partition: --partition may name it (checked on reading)
        fixed = [n for n in ("partition", "features", "labels", "split", "feature_dim",
                             "num_nodes", "relabel") if self._given(n)
                 and not (halo and n == "partition")]
        for name, reason in why.items():
            if reason is not None:
                raise ValueError(f"train: --graph {self.graph} holds shards: {reason} "
                                 f"({self.flag_values(name)})")
        if fixed:
            raise ValueError(f"train: --graph {self.graph} holds shards, partitioned and "
                             f"preprocessed when they were written (spgnn partition): "
                             f"{', '.join(_flag(n) for n in fixed)} cannot apply")

    def _at_least(self, **lows):
        """Raise ValueError naming the first option (not None) below its lower bound."""
        for name, low in lows.items():
            value = getattr(self, name)
            if value is not None and value < low:
                raise ValueError(f"train: {_flag(name)} must be >= {low}, but got {value}")

    def _check_full_graph(self):
        spec, algo = self.spec, self.algo
        if spec.algorithms and (algo not in ("auto",) + spec.algorithms or self.grid is not None
                                or self.wants_3d):
            what = ("--grid" if self.grid is not None else
                    "--permute/--agg-blocks" if self.wants_3d else algo)
            raise ValueError(f"train: --model {self.model} trains with --algo "
                             f"{' or '.join(spec.algorithms)} (or auto), not {what}")
        if self.replication == "auto" and algo not in ("15d", "15d-aware", "auto"):
            raise ValueError(f"train: --replication auto applies to --algo 15d, 15d-aware or "
                             f"auto, not {algo}")
        if self.replication == "auto" and (self.wants_3d or self.grid is not None):
            raise ValueError("train: --replication auto chooses a 1.5D c; --grid, --permute "
                             "and --agg-blocks choose 3d")
        self._at_least(agg_blocks=1)

    def _check_minibatch(self):
        if self.replication == "auto":
            raise ValueError("train: --replication auto applies to full-graph models only")
        if self.batch_size < 1 or (self.bulk is not None and self.bulk < 1):
            raise ValueError(f"train: --batch-size and --bulk must be >= 1, but got "
                             f"{self.batch_size} and {self.bulk}")
        self._at_least(eval_every=0, ladies_size=1)
        if self.hec is not None and self.partition not in _HALO_PARTITIONS and not self.sharded:
            raise ValueError(f"train: --hec {self.hec} trains on a partitioned graph: give "
                             f"--partition {'|'.join(_HALO_PARTITIONS)} (a replicated graph has "
                             f"no halo vertices), not --partition {self.partition}")

    def check_ranks(self, ranks):
        """The checks that need the rank count ``ranks``. Local (every rank judges alike)."""
        p = int(ranks)
        if self.minibatch:
            if self.partition_mode == "partitioned" and (self.replication < 1
                                                         or p % self.replication):
                raise ValueError(f"train: --replication {self.replication} must divide the {p} "
                                 f"ranks")
            if self.hec == "on":
                self.hec_config().validate(p)
            return
        if (self.algo in ("15d", "15d-aware") and self.replication != "auto"
                and (self.replication < 1 or p % self.replication)):
            raise ValueError(f"train: --replication must divide the {p} ranks, but got "
                             f"{self.replication}")
        if self.grid is not None:
            parse_grid(self.grid, p, ndim=3, what="train: --grid")

    @property
    def wants_3d(self) -> bool:
        """Options of 3d training only: ``--algo auto`` then ranks 3d grids only."""
        return self.permute != "none" or self.agg_blocks != 1

    # ------------------------------------------------------------------ records
    def record(self, ranks):
        """What a resumed run must match: the run's settings as a plain dict. Local.

        The keys of the checkpoint format ``spgnn-train-*/2``: the shared
        settings, the mode's own (minibatch, HEC, exchanges), the model's
        options, and ``ranks``.
        """
        keys = _RECORD_KEYS
        if self.minibatch:
            keys += _MINIBATCH_RECORD_KEYS + (_HEC_RECORD_KEYS if self.hec is not None else ())
        out = {k: getattr(self, k) for k in keys}
        out.update(self.model_options)
        # ./x and x are one file: compare real paths (a generator spec stays as given)
        out["graph"] = os.path.realpath(self.graph) if os.path.exists(self.graph) else self.graph
        if self.minibatch:
            out["fanout"] = list(self.fanout)
        else:
            out.update({k: getattr(self, k) for k in EXCHANGE_RECORD_DEFAULTS})
            out["label_prop"] = float(self.label_prop)
            if self.quantize == "none":
                out["rounding"] = None          # only quantized exchanges round
        out["ranks"] = int(ranks)
        return out

    def data_name(self):
        """A sharded graph's name (from its manifest; rank 0 reads it). Local."""
        return read_manifest(self.graph).get("name") or str(self.graph)

    def hec_config(self):
        """The :class:`~spgnn.gnn.hec.HECConfig` of ``hec on``."""
        return HECConfig(cs=self.hec_capacity, ls=self.hec_life, nc=self.hec_push_cap,
                         d=self.hec_delay, miss_policy=self.miss_policy, levels=self.hec_levels,
                         reset=self.hec_reset, prefill=self.hec_prefill)

    def placement(self):
        """The full-graph placement value of ``algo`` (not ``auto``) and its options."""
        kw = {}
        if self.algo in ("15d", "15d-aware"):
            kw["c"] = self.replication
        if self.algo == "3d":
            kw.update(grid=_grid_shape(self.grid), permute=self.permute,
                      agg_blocks=self.agg_blocks)
        if self.algo == "1d-aware":
            kw["exchange"] = Exchange(self.aggregation, self.quantize, self.rounding,
                                      seed=self.seed)
        return placement_for(self.algo, **kw)

    # ------------------------------------------------------------------ the run
    def load_graph(self):
        """The graph with its split, synthetic data and projection, as rank 0 loads it. Local."""
        opts = {k: v for k, v in (("num_nodes", self.num_nodes), ("relabel", self.relabel)) if v}
        graph = with_synthetic(load_graph(self.graph, name=self.name, **opts), self.features,
                               self.labels)
        split = _parse_split(self.split)
        if split is None and graph.train_mask is None:
            split = (0.6, 0.2)
        if split is not None:
            # generated graphs: the per-vertex split (each rank can make its rows' masks)
            graph = graph.random_split(*split, seed=self.split_seed,
                                       per_vertex=_is_generator_spec(self.graph))
        if graph.train_mask is None or not np.any(graph.train_mask):
            raise ValueError(f"train: {graph.name} has no training vertices (its split, or "
                             f"--split {self.split}); nothing would be trained")
        if self.model_selection == "best-val" and self.eval_every and (
                graph.val_mask is None or not np.any(graph.val_mask)):
            raise ValueError(f"train: --model-selection best-val needs validation vertices, but "
                             f"{graph.name}'s split has none (choose --model-selection last)")
        if self.feature_dim:
            # project the row-normalised features, then standardise each column:
            # projected rows hold both signs (row-normalising them again would
            # divide by sums near 0) and are small (~1/sqrt(words per row))
            z = random_projection(row_normalize_features(graph.features, np.float64),
                                  self.feature_dim, self.seed)
            z -= z.mean(axis=0)
            z /= np.where(z.std(axis=0) > 0, z.std(axis=0), 1.0)
            graph = dataclasses.replace(graph, features=z)
        return graph

    def build(self, comm, graph, *, clock=None, progress=None):
        """The trainer of this run, over ``graph`` (rank 0; others pass None). Collective.

        A sharded ``graph`` directory needs no ``graph`` (pass None): every
        rank reads its own parts (:meth:`DistGraph.from_shards`).

        Returns a :class:`Built`.  With ``algo auto`` (or ``replication
        auto``) the time model chooses first (rank 0 ranks the whole graph,
        or, on a generator spec or shards that no rank loaded, the counts
        gathered from the rows each rank draws or reads; every rank gets the
        choice) and ``Built.config`` holds the resolved algorithm.
        """
        self.check_ranks(comm.size)
        if not self.minibatch:
            return self._build_full_graph(comm, graph, clock, progress)
        dtype = np.dtype(self.dtype)
        if self.sharded:            # each rank reads its part: no graph
            if self.hec is not None:
                hg = HaloGraph.from_shards(self.graph, comm, partition=self.partition,
                                           dtype=dtype, backend=self.backend, clock=clock)
                mg = hg.mg
            else:                       # --partition-mode partitioned (_check_shards)
                mg = MinibatchGraph.from_shards(self.graph, comm, replication=self.replication,
                                                dtype=dtype, backend=self.backend, clock=clock)
            if self.model_selection == "best-val" and self.eval_every and \
                    not mg.full.counts.get("val"):       # the manifest's: every rank alike
                comm.agree(ValueError(f"train: --model-selection best-val needs validation "
                                      f"vertices, but the shards in {self.graph} have none "
                                      f"(choose --model-selection last)"))
        elif self.hec is not None:
            hg = HaloGraph.build(graph, comm, method=self.partition, seed=self.seed, dtype=dtype,
                                 backend=self.backend, clock=clock)
            mg = hg.mg
        else:
            c = self.replication if self.partition_mode == "partitioned" else 1
            mg = MinibatchGraph.from_graph(graph, comm, mode=self.partition_mode, replication=c,
                                           root=0, dtype=dtype, backend=self.backend,
                                           normalize_features=not self.feature_dim)
        rows = min(mg.n, self.batch_size * int(np.prod([f + 1 for f in self.fanout])))
        self.check_model_size(comm, mg.num_features, mg.num_classes, rows)
        memory = self._check_sage_memory(comm, hg if self.hec is not None else mg)
        model = self.spec.build(mg.num_features, mg.num_classes, self)
        opt = Adam(model.param_groups(self.weight_decay), lr=self.lr)
        if self.hec is not None:
            runner = HECRunner(self.hec_config()) if self.hec == "on" else None
            source = Halo(hg, self._sampler(), batch_size=self.batch_size, hec=runner,
                          drop_halos=self.hec == "none")
            label = f"sage-partitioned-hec-{self.hec}"
        else:
            source = Sampled(mg, self._sampler(), batch_size=self.batch_size, bulk=self.bulk)
            label = f"{self.model}-minibatch"
        trainer = Trainer(model, source, opt, seed=self.seed)
        hooks = [EvaluateEvery(self.eval_every, self.model_selection)] if self.eval_every else []
        return Built(trainer, hooks + [StalledLoss()], self, label, memory=memory)

    def _sampler(self):
        if self.sampler == "sage":
            return GraphSAGESampler(self.fanout, frontier=self.frontier, include_dst=True,
                                    seed=self.seed)
        return LADIESSampler((self.ladies_size or self.batch_size,) * len(self.fanout),
                             seed=self.seed)

    def _build_full_graph(self, comm, graph, clock=None, progress=None):
        cfg, auto, block = self, None, None
        if self.algo == "auto" or self.replication == "auto":
            if (self.sharded or self.generated) and not any(
                    comm.allgather_obj(graph is not None, label="gnn-setup:meta")):
                # no rank holds the graph: rank from the rows each rank reads or draws
                cfg, auto, block = self._choose_from_rows(comm, clock, progress)
            else:
                cfg, auto = self._choose(comm, graph)
        elif self.memory_limit is not None and self.memory_limit.strip().lower() != "none":
            if (self.sharded or self.generated) and not any(
                    comm.allgather_obj(graph is not None, label="gnn-setup:meta")):
                # price this one configuration on the counts gathered from the ranks' rows
                cfg, _, block = self._choose_from_rows(comm, clock, progress, explicit=True)
            else:
                self._check_memory(comm, graph)
        common = dict(adjacency=cfg.spec.adjacency, backend=cfg.backend,
                      dtype=np.dtype(cfg.dtype), normalize_features=not cfg.feature_dim)
        if cfg.sharded:          # the "read shards" step instead of "scatter"
            dg = DistGraph.from_shards(cfg.graph, comm, cfg.placement(), block=block,
                                       clock=clock, **common)
        elif cfg.generated and not any(comm.allgather_obj(graph is not None,
                                                          label="gnn-setup:meta")):
            # no rank loaded the graph: each rank draws its own rows
            train, val, split_seed = cfg.generated_split()
            dg = DistGraph.from_generator(cfg.graph, comm, cfg.placement(),
                                          features=cfg.features, labels=cfg.labels,
                                          split=(train, val), split_seed=split_seed,
                                          clock=clock, progress=progress, block=block, **common)
        else:
            dg = DistGraph.from_graph(graph, comm, cfg.placement(), partition=cfg.partition,
                                      seed=cfg.seed, **common)
        lp = LabelPropagation(dg, cfg.label_prop, cfg.seed) if cfg.label_prop else None
        in_dim = dg.num_features if lp is None else lp.num_features
        cfg.check_model_size(comm, in_dim, dg.num_classes, -(-dg.num_nodes // comm.size))
        model = cfg.spec.build(in_dim, dg.num_classes, cfg)
        opt = Adam(model.param_groups(cfg.weight_decay), lr=cfg.lr)
        trainer = Trainer(model, FullGraph(dg, transform=lp), opt)
        return Built(trainer, [StalledLoss()], cfg, cfg.algo, auto)

    def model_size_bytes(self, in_dim, num_classes, rows):
        """``(bytes, weights)``: about what the model allocates per rank for ``rows`` rows. Pure.

        The weights with their gradients and Adam's two moments (4 copies;
        GraphSAGE has two weight matrices per layer, GAT's hidden layers are
        ``hidden x heads`` wide), and three activations of every layer's width
        (output, saved input, gradient) over ``rows`` rows: the arrays that
        ``--hidden`` and ``--heads`` size, estimated before any is allocated.
        """
        heads = int(self.option("heads")) if "heads" in self.model_options else 1
        width = int(self.hidden) * heads
        dims = [int(in_dim)] + [width] * (int(self.layers) - 1) + [int(num_classes)]
        per_layer = 2 if self.model.startswith("sage") else 1
        weights = per_layer * sum(a * b for a, b in zip(dims[:-1], dims[1:]))
        item = np.dtype(self.dtype).itemsize
        return item * (4 * weights + 3 * int(rows) * sum(dims[1:])), weights

    def check_model_size(self, comm, in_dim, num_classes, rows):
        """Refuse a model too large for this machine before allocating it (issue 38:
        ``--hidden 100000000`` ended in a MemoryError traceback). One agreed
        :class:`~spgnn.errors.InputTooLarge` on every rank. Collective."""
        from ..io._files import check_alloc

        nbytes, weights = self.model_size_bytes(in_dim, num_classes, rows)
        flags = f"--hidden {self.hidden}" + (f" --heads {self.option('heads')}"
                                             if "heads" in self.model_options else "")
        err = None
        try:
            check_alloc(nbytes, "train", f"{flags} (--model {self.model}: {weights:,} weights "
                                         f"with their gradients and Adam state, activations of "
                                         f"{int(rows):,} rows per rank)")
        except ValueError as exc:       # every rank computes the same estimate
            err = exc
        comm.agree(err)

    def _auto_algorithms(self):
        return (("3d",) if self.wants_3d else (self.algo,) if self.algo.startswith("15d")
                else self.spec.algorithms)

    def _resolved(self, algo, c, grid):
        changes = {"algo": algo}
        if algo.startswith("15d") or self.replication == "auto":
            changes["replication"] = c
        if grid is not None:
            changes["grid"] = "x".join(map(str, grid))
        return dataclasses.replace(self, **changes)

    def _choose_from_rows(self, comm, clock=None, progress=None, explicit=False):
        """``(resolved config, top 3, this rank's rows)``: the time model's choice from the
        rows each rank reads (shards) or draws (a generator spec), 1d's row blocks, without
        any rank holding the graph (:func:`~spgnn.plan.from_rows.choose_from_rows`). The rows
        are reused by the placement when they are the rows it needs.  ``explicit``: the
        explicit ``--algo`` (its ``--replication``, ``--grid``) is the one candidate, priced
        against ``--memory-limit`` (one agreed ValueError when over it). Collective."""
        import contextlib

        from ..io import shards as shard_io
        from ..layout import block_offsets
        from ..plan.from_rows import choose_from_rows
        from ..plan.model import candidate_configs
        from .data import part_blocks

        stage = clock.stage if clock is not None else (lambda name: contextlib.nullcontext())
        p, r = comm.size, comm.rank
        row_blocks = None
        if self.sharded:
            man, err = None, None
            if r == 0:
                try:
                    man = shard_io.read_manifest(self.graph)
                except ShardError as exc:
                    err = exc
            comm.agree(err)
            man = comm.bcast_obj(man, root=0, label="gnn-setup:meta")
            n, f, classes = man["n"], man["num_features"], man["num_classes"]

            def row_blocks(blocks):
                return part_blocks(man["offsets"], blocks)

            algos = self._auto_algorithms()
            cands = candidate_configs(p, algos) if algos else candidate_configs(p)
            if self.grid is None and all(cf[0] != "3d" and row_blocks(p // cf[1]) is None
                                         for cf in cands):
                k = len(man["offsets"]) - 1
                raise GridError(f"train: --graph {self.graph} has K={k} parts, and no "
                                f"configuration of --model {self.model} ({', '.join(algos)}) "
                                f"on {p} ranks cuts the graph into a divisor or multiple of "
                                f"{k} row blocks; re-partition with --parts {p} (or run on a "
                                f"rank count that divides or is a multiple of {k})")

            off = row_blocks(p) or block_offsets(n, p)
            block, err = None, None
            with stage("read-rows"):
                try:
                    block = shard_io.read_rows(self.graph, man, off[r], off[r + 1])
                except ShardError as exc:
                    err = exc
                comm.agree(err)
        else:
            from .rows import as_generator_spec, generate_rows

            gen = as_generator_spec(self.graph)
            n = gen.n
            off = block_offsets(n, p)
            train, val, split_seed = self.generated_split()
            with stage("generate"):
                block = generate_rows(comm, gen, rows=(off[r], off[r + 1]),
                                      features=self.features, labels=self.labels,
                                      split=(train, val), split_seed=split_seed,
                                      progress=progress)
            f = int(block.x.shape[1])
            classes = int(comm.allreduce(np.array([block.label.max(initial=-1)], dtype=np.int64),
                                         op="max", label="gnn-setup:meta")[0]) + 1
        dims = [f] + [self.hidden] * (self.layers - 1) + [classes]
        self.check_model_size(comm, f, classes, -(-n // p))     # named before the memory model
        algorithms, grid = self._auto_algorithms(), self.grid
        if explicit:
            algorithms = (self.algo,)
            if self.algo == "3d" and grid is None:
                grid = "x".join(map(str, default_grid_3d(p)))
        with stage("auto"):
            # Â's pattern: A' (symmetric) and the diagonal, counted without a copy
            try:
                algo, c, grid, top = choose_from_rows(
                    comm, block.adj, off[r], n, dims, grid=grid, algorithms=algorithms,
                    permute=self.permute, agg_blocks=self.agg_blocks, row_blocks=row_blocks,
                    add_identity=True, memory_limit=self._memory_limit_bytes(comm),
                    quantize=self.quantize, replication=self.replication if explicit and self.algo.startswith("15d")
                    else None)
            except ValueError as exc:    # every rank alike
                if not explicit or "no configuration fits" not in str(exc):
                    raise note_default(exc, self.memory_limit) from None
                raise agreed_like(ValueError(f"--algo {self.algo}: " + str(exc).replace(
                    "--algo auto: ", "").replace("no configuration fits", "does not fit")),
                    exc) from None
        return self._resolved(algo, c, grid), top, [block]    # placement empties the list

    def _choose(self, comm, graph):
        """``(resolved config, top-3 ranking)``: the time model's choice. Collective."""
        err = None
        if graph is not None:       # rank 0: the model ranks configurations by the layer widths
            try:
                require_features_and_labels(graph)
            except ValueError as exc:
                err = exc
        comm.agree(err)
        dims = None
        if graph is not None:       # --feature-dim is already applied by load_graph
            dims = ([int(graph.features.shape[1])] + [self.hidden] * (self.layers - 1)
                    + [int(graph.num_classes)])
        # a size option too large (--hidden, --heads) is named before the memory model would
        # refuse every configuration for it (the default --memory-limit always applies)
        dims_n = comm.bcast_obj(None if graph is None else (dims, graph.num_nodes),
                                label="gnn-setup:meta")
        self.check_model_size(comm, dims_n[0][0], dims_n[0][-1], -(-dims_n[1] // comm.size))
        try:
            algo, c, grid, top = choose(comm, graph, dims, partition=self.partition,
                                        seed=self.seed, grid=self.grid,
                                        algorithms=self._auto_algorithms(), permute=self.permute,
                                        agg_blocks=self.agg_blocks,
                                        memory_limit=self._memory_limit_bytes(comm),
                                        quantize=self.quantize)
        except ValueError as exc:       # every rank alike
            raise note_default(exc, self.memory_limit) from None
        return self._resolved(algo, c, grid), top

    def _check_memory(self, comm, graph):
        """Refuse an explicit ``--algo`` whose predicted per-rank peak exceeds ``memory_limit``
        before anything is placed (one agreed ValueError on every rank). Collective."""
        err = None
        limit = self._memory_limit_bytes()
        if graph is not None:       # rank 0 holds the graph and prices the configuration
            try:
                from ..plan.choose import aggregation_pattern
                from ..plan.memory import peak_bytes
                from ..plan.model import candidate_configs, rank_configs

                c = self.replication if self.algo.startswith("15d") else 1
                grid = _grid_shape(self.grid) if self.algo == "3d" and self.grid else None
                configs = ([("3d", 1, tuple(grid))] if grid else
                           [cf for cf in candidate_configs(comm.size, (self.algo,))
                            if cf[1] == c or self.algo == "3d"][:1])
                dims = ([int(graph.features.shape[1])] + [self.hidden] * (self.layers - 1)
                        + [int(graph.num_classes)])
                a = aggregation_pattern(graph.adj)
                pred = rank_configs(a, comm.size, dims, configs=configs)[0]
                peak = peak_bytes(a, pred, dims, quantize=self.quantize)
                if peak > limit:
                    err = ValueError(f"--algo {pred.label}: predicted per-rank peak {peak:,d} "
                                     f"bytes exceeds --memory-limit {limit:,d} bytes "
                                     f"(spgnn.plan.memory)")
            except (ValueError, IndexError) as exc:
                err = ValueError(f"--memory-limit: cannot price --algo {self.algo}: {exc}")
        comm.agree(err)

    def sage_peak(self, counts):
        """The predicted per-rank peak of this sage run on ``counts``
        (:func:`spgnn.plan.memory_minibatch.sage_peak_bytes`: bytes and parts). Pure."""
        from ..plan.memory_minibatch import sage_dims, sage_peak_bytes

        dims = sage_dims(counts.features, self.hidden, counts.classes, len(self.fanout))
        on = self.hec == "on"
        delay = 1 if self.hec_delay is None else self.hec_delay
        return sage_peak_bytes(counts, dims, self.fanout, self.batch_size, hec=self.hec,
                               hec_capacity=self.hec_capacity if on else None,
                               hec_levels=self.hec_levels, hec_delay=delay,
                               hec_reset=self.hec_reset, planned=self.hec_push_cap == "auto",
                               bulk=self.bulk or 16, itemsize=np.dtype(self.dtype).itemsize)

    def _check_sage_memory(self, comm, graph):
        """The predicted peak of sage training on the built ``graph`` (a HaloGraph with
        ``--hec``, else the replicated MinibatchGraph; :mod:`spgnn.plan.memory_minibatch`),
        refused over ``--memory-limit`` (explicit or this host's share) before the trainer
        and the HEC caches exist: one agreed ValueError on every rank. Collective."""
        from ..plan.memory_minibatch import (gather_halo_counts, top_degrees_needed,
                                             top_degrees_of, with_partitioned_view)

        halo = self.hec is not None
        mg = graph.mg if halo else graph
        ev = mg.full.A.local
        a = graph.view.a if halo else ev        # replicated: the evaluation rows stand in
        off = graph.offsets if halo else mg.full.offsets
        r = comm.rank
        ids = mg.train_ids()
        mine = np.count_nonzero((ids >= off[r]) & (ids < off[r + 1]))
        host = mg.full.A.backend.to_host       # a device backend's index arrays, counted on host
        counts = gather_halo_counts(comm, mg.n, off, host(a.indices), a.nnz, mine,
                                    mg.full.offsets, host(ev.indices), ev.nnz,
                                    mg.num_features, mg.num_classes,
                                    sharded=self.sharded)
        if not halo and mg.mode == "partitioned":     # the sampler's block rows (r // c)
            sg = mg.sampling_graph
            nnz = comm.allgather_obj(int(sg.local.nnz), label="plan:memory")
            # the pattern's largest degrees bound the sampler's gathered rows: each block
            # row's largest (replica 0 of each process row), merged
            keep = top_degrees_needed(self.batch_size, self.fanout, mg.n)
            top = comm.allgather_obj(top_degrees_of(np.diff(host(sg.local.indptr)), keep),
                                     label="plan:memory")
            counts = with_partitioned_view(counts, sg.offsets, nnz[::sg.c],
                                           top_degrees_of(np.concatenate(top[::sg.c]), keep))
        pred = self.sage_peak(counts)
        limit = self._memory_limit_bytes(comm)
        err = None
        if limit is not None and pred["peak"] > limit:
            mode = (f"--hec {self.hec}" if halo else
                    f"({self.partition_mode or 'replicated'} sampling)")
            err = ValueError(f"train: --model sage {mode}: predicted per-rank peak "
                             f"{pred['peak']:,d} bytes exceeds --memory-limit {limit:,d} "
                             f"bytes (spgnn.plan.memory_minibatch; smaller --batch-size, "
                             f"--fanout or --hec-capacity, or more ranks)"
                             + (f"; the caches need {max(pred['held']['hec']):,d} bytes of it "
                                f"allocated ({self.hec_capacity:,d} rows per level at most, "
                                f"--hec-reset {self.hec_reset}): give a smaller --hec-capacity"
                                + (" or --hec-reset epoch" if self.hec_reset == "never" else "")
                                if self.hec == "on" else "")
                             + ("; that limit is the default, this host's memory over the "
                                "ranks on it (SPGNN_HOST_MEMORY sets the host's memory; "
                                "--memory-limit none: no check)"
                                if self.memory_limit is None else ""))
        comm.agree(err)            # every rank priced the same gathered counts
        return pred

    def _memory_limit_bytes(self, comm=None):
        """``memory_limit`` in bytes, or None (``none``, or unset without ``comm``); unset with
        ``comm``: this host's memory over the ranks on it (:mod:`spgnn.plan.host`). Collective
        when unset and ``comm`` is given, else local."""
        from ..plan.host import memory_limit_bytes

        if self.memory_limit is None and comm is None:
            return None
        return memory_limit_bytes(comm, self.memory_limit)

    @classmethod
    def from_options(cls, options):
        """A config from a flat ``{name: value}`` (the parsed command line). Local.

        Keys that are fields are taken as they are; the model options
        declared by any :data:`MODELS` entry are gathered into
        ``model_options``; other keys are ignored (the command's own, such
        as ``json``).
        """
        names = {f.name for f in dataclasses.fields(cls)} - {"model_options"}
        model_opts = {o.name for s in MODELS.values() for o in s.options}
        return cls(**{k: v for k, v in options.items() if k in names},
                   model_options={k: options[k] for k in model_opts if k in options})


@dataclass
class Built:
    """What :meth:`TrainConfig.build` returns: the trainer, the config's hooks (model
    selection where it evaluates; :class:`~spgnn.gnn.hooks.StalledLoss` always), the resolved
    config, the algorithm's label for reports, and ``auto`` (the time model's top 3, or None)."""

    trainer: Trainer
    hooks: list
    config: TrainConfig
    algorithm: str
    auto: list = None
    memory: dict = None

    @property
    def selection(self):
        """The :class:`~spgnn.gnn.hooks.EvaluateEvery` hook, or None."""
        return next((h for h in self.hooks if isinstance(h, EvaluateEvery)), None)


# ---------------------------------------------------------------------- tables
def _flag(name):
    return "--" + name.replace("_", "-")


_DEFAULTS = {f.name: (f.default if f.default is not dataclasses.MISSING else None)
             for f in dataclasses.fields(TrainConfig)}

_MINIBATCH_FIELDS = ("sampler", "batch_size", "fanout", "partition_mode", "frontier",
                     "ladies_size", "eval_every", "model_selection")
_HEC_FIELDS = ("hec_capacity", "hec_life", "hec_push_cap", "hec_delay", "miss_policy",
               "hec_prefill", "hec_levels")

#: Which options apply where: ``(options, applies(config), message)``.  An
#: option given (not at its field default) where it does not apply is refused
#: with the message (``{flags}``: the given flags, ``{values}``: with values,
#: ``{apply}``, ``{need}``: the verbs agreeing with them).
APPLIES = (
    (_MINIBATCH_FIELDS + ("bulk", "hec", "hec_reset") + _HEC_FIELDS,
     lambda c: c.minibatch, "{flags} {apply} only to --model {minibatch}"),
    (("aggregation", "quantize", "rounding", "label_prop"),
     lambda c: not c.minibatch and c.algo in ("1d-aware", "auto"),
     "{flags} {need} a full-graph model with --algo 1d-aware"),
    (("permute", "agg_blocks"), lambda c: c.minibatch or c.algo in ("3d", "auto"),
     "--permute and --agg-blocks apply to --algo 3d (or auto, which then chooses among 3d "
     "grids) only"),
    (("grid",), lambda c: c.minibatch or c.algo in ("3d", "auto"),
     "--grid applies to --algo 3d (or auto) only"),
    (("hec",), lambda c: c.sampler in (None, "sage"),
     "--hec applies to --model sage --sampler sage"),
    (("bulk",), lambda c: c.hec is None,
     "{values} does not apply to --hec (it samples one local minibatch per rank per step); "
     "leave --bulk out"),
    (_HEC_FIELDS, lambda c: c.hec == "on", "{flags} {apply} only to --hec on"),
    (("hec_reset",), lambda c: c.hec is not None, "--hec-reset applies to --hec on|off"),
)

#: Partitions a halo graph is cut by (``hec on|off``): every partitioner but the identity.
_HALO_PARTITIONS = tuple(p for p in PARTITIONERS if p != "none")

_RECORD_KEYS = ("graph", "name", "model", "algo", "partition", "hidden", "layers", "lr",
                "weight_decay", "dropout", "bias", "replication", "grid", "dtype", "seed",
                "split", "split_seed", "feature_dim", "features", "labels")
_MINIBATCH_RECORD_KEYS = ("sampler", "batch_size", "fanout", "bulk", "partition_mode",
                          "frontier", "ladies_size", "eval_every", "model_selection")
_HEC_RECORD_KEYS = ("hec", "hec_capacity", "hec_life", "hec_push_cap", "hec_delay",
                    "miss_policy", "hec_prefill", "hec_levels", "hec_reset")
#: Full-graph exchange settings a resume must match; a checkpoint written
#: before they were recorded resumes as these values.
EXCHANGE_RECORD_DEFAULTS = {"aggregation": "post", "quantize": "none", "rounding": None,
                            "label_prop": 0.0}


def _is_generator_spec(text):
    from ..io.generators import parse_spec
    try:
        return parse_spec(text) is not None
    except ValueError:
        return False


def _parse_split(text):
    if text is None:
        return None
    try:
        train, val = (float(v) for v in str(text).split(":"))
    except ValueError:
        raise ValueError(f"train: --split must look like 0.6:0.2, but got {text!r}") from None
    if not (0 < train < 1 and 0 <= val < 1 and train + val <= 1):
        raise ValueError(f"train: --split fractions must satisfy 0 < train, 0 <= val, "
                         f"train + val <= 1, but got {text!r}")
    return train, val


def _parse_fanout(value):
    if isinstance(value, (tuple, list)):
        value = ",".join(str(v) for v in value)
    try:
        out = tuple(int(v) for v in str(value).replace(" ", "").split(",") if v)
    except ValueError:
        raise ValueError(f"train: --fanout must look like 15,10,5, but got {value!r}") from None
    if not out or min(out) < 1:
        raise ValueError(f"train: --fanout needs positive ints, but got {value!r}")
    return out


def _grid_shape(grid):
    return None if grid is None else tuple(int(v) for v in str(grid).lower().split("x"))
