"""``python -m spgnn partition``: partition a graph once and write it as shards (docs/data.md).

One process (a preprocessing tool), then any number of parallel runs read the
shards, each rank only its own rows (:meth:`spgnn.gnn.DistGraph.from_shards`)::

    python -m spgnn partition --graph cora --parts 4 --method metis --out /shared/cora-4
    srun -n 4 python -m spgnn train --graph /shared/cora-4 ...

The graph is loaded as ``train`` loads it (``--features`` / ``--labels``
specs for a graph without them; a random stratified ``--split`` when it has
no split, 0.6:0.2 by default), partitioned by :func:`spgnn.partition.partition_graph`
on the pattern ``DistGraph`` partitions, and written with
:func:`spgnn.partition.to_shards.partition_to_shards`: an interrupted run
resumes when run again with the same arguments.

A text edge list (``.txt .edges .el .tsv .csv``, optionally ``.gz``) is
streamed instead, in bounded memory, never held whole
(:func:`spgnn.partition.stream_shards.edge_list_to_shards`; with ``--method
ldg``, ``none`` or ``random`` the graph is never in memory); so is a
MatrixMarket coordinate file with its banner (``.mtx``, optionally ``.gz``:
:func:`spgnn.partition.stream_shards.mtx_to_shards`); ``--in-memory``
(or ``--relabel``) loads it whole as the other formats are.  A generator spec
(``rmat:`` / ``sbm:`` / ``plsbm:``) is streamed the same way, its edges drawn
chunk by chunk (:func:`spgnn.partition.stream_shards.generator_to_shards`).
The shards are the same either way.
"""

import time

from . import print_result
from ._graph_options import add_graph_options, graph_options


def add_parser(sub):
    from ..io.synthetic import FEATURE_SPECS, LABEL_SPECS
    from ..partition import PARTITIONERS

    p = sub.add_parser("partition", help="partition a graph into K parts and write them as "
                                         "shards a parallel run reads rank by rank")
    p.add_argument("--graph", required=True, help="dataset name, graph file or generator spec")
    p.add_argument("--parts", type=int, required=True, metavar="K",
                   help="number of parts (the rank count of the runs, or a multiple or divisor)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="shard directory (new or empty; an interrupted run's DIR resumes)")
    p.add_argument("--method", default="metis", choices=tuple(PARTITIONERS),
                   help="partitioner (default metis)")
    p.add_argument("--seed", type=int, default=0, help="partitioner seed (default 0)")
    p.add_argument("--name", default=None, help="dataset name inside a folder")
    add_graph_options(p)
    p.add_argument("--features", default=None, metavar="SPEC",
                   help="replace (or provide) the node features: " + " | ".join(FEATURE_SPECS))
    p.add_argument("--labels", default=None, metavar="SPEC",
                   help="replace (or provide) the labels: " + " | ".join(LABEL_SPECS))
    p.add_argument("--split", default=None, metavar="TRAIN:VAL",
                   help="random stratified split (default: the graph's own, else 0.6:0.2)")
    p.add_argument("--split-seed", type=int, default=0, help="seed of --split (default 0)")
    p.add_argument("--in-memory", action="store_true",
                   help="load a text edge list or MatrixMarket file whole instead of "
                        "streaming it (the shards are the same)")
    p.add_argument("--chunk-mb", type=float, default=1.0, metavar="MB",
                   help="text per parsed chunk on the streaming path (default 1)")
    p.add_argument("--ldg-passes", type=int, default=None, metavar="P",
                   help="passes of --method ldg over the stream (default 1; more lower the cut)")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _split(text):
    """``"0.6:0.2"`` as two floats (``Graph.random_split`` checks the fractions), or None."""
    if text is None:
        return None
    fields = str(text).split(":")
    try:
        if len(fields) != 2:
            raise ValueError(text)
        return float(fields[0]), float(fields[1])
    except ValueError:
        raise ValueError(f"partition: --split must look like 0.6:0.2, but got {text!r}") from None


def run(args):
    from ..comm import Communicator
    from ..io import load_graph
    from ..io.synthetic import check_feature_spec, check_label_spec, with_synthetic
    from ..partition.to_shards import partition_to_shards

    if args.parts < 1:
        raise ValueError(f"partition: --parts must be >= 1, but got {args.parts}")
    split = _split(args.split)
    if args.features is not None:
        check_feature_spec(args.features, "--features")
    if args.labels is not None:
        check_label_spec(args.labels, "--labels")
    comm = Communicator.world()
    if comm.size > 1:
        raise ValueError(f"partition: runs in one process (it writes every shard), but was "
                         f"started on {comm.size} ranks; run it without mpiexec/srun")
    t0 = time.perf_counter()
    if _streams(args):
        return _run_streaming(args, comm, split, t0)
    graph = with_synthetic(load_graph(args.graph, name=args.name, **graph_options(args)),
                           args.features, args.labels)
    if split is None and graph.train_mask is None:
        split = (0.6, 0.2)
    if split is not None:
        graph = graph.random_split(*split, seed=args.split_seed)
    t_load = time.perf_counter() - t0
    kept = []
    man = partition_to_shards(graph, args.out, args.parts, args.method, args.seed,
                              source=args.graph, progress=lambda k, was_kept: kept.append(was_kept))
    result = {"out": str(args.out), "graph": man["name"], "n": man["n"], "nnz": man["nnz"],
              "parts": man["parts"], "method": args.method, "seed": args.seed,
              "rows_per_part": [b - a for a, b in zip(man["offsets"], man["offsets"][1:])],
              "halo_per_part": [e["halo"] for e in man["files"]],
              "bytes": sum(e["bytes"] for e in man["files"]),
              "up_to_date": not kept, "parts_kept": sum(kept), "parts_written": len(kept) - sum(kept),
              "load_seconds": round(t_load, 3),
              "seconds": round(time.perf_counter() - t0, 3)}
    print_result(comm, result, args.json)
    return 0


def _streams(args) -> bool:
    """Whether ``--graph`` is a text edge list or a generator spec to stream (not
    ``--in-memory`` / ``--relabel``)."""
    from ..io.edgelist_stream import is_edge_list_path
    from ..io.generators import parse_spec
    from ..io.mtx_stream import is_mtx_stream_path

    if args.in_memory or args.relabel:
        return False
    return (is_edge_list_path(args.graph) or is_mtx_stream_path(args.graph)
            or parse_spec(args.graph) is not None)


def _run_streaming(args, comm, split, t0):
    from ..io.generators import parse_spec
    from ..io.mtx_stream import is_mtx_stream_path
    from ..partition.stream_shards import edge_list_to_shards, generator_to_shards, mtx_to_shards

    if args.chunk_mb <= 0:
        raise ValueError(f"partition: --chunk-mb must be positive, but got {args.chunk_mb}")
    ldg = {} if args.ldg_passes is None else {"passes": args.ldg_passes}
    kept, stages = [], {}
    common = dict(features=args.features, labels=args.labels, split_seed=args.split_seed,
                  name=args.name, ldg_options=ldg, stages=stages,
                  progress=lambda k, was_kept: kept.append(was_kept))
    if parse_spec(args.graph) is not None:
        if args.num_nodes is not None:
            raise ValueError("partition: --num-nodes applies to a bare edge list, not to a "
                             "generator spec")
        man = generator_to_shards(args.graph, args.out, args.parts, args.method, args.seed,
                                  split=split, **common)
    elif is_mtx_stream_path(args.graph):
        if args.num_nodes is not None:
            raise ValueError("partition: --num-nodes applies to a bare edge list; a "
                             "MatrixMarket file's size line gives the vertex count")
        man = mtx_to_shards(args.graph, args.out, args.parts, args.method, args.seed,
                            split=split or (0.6, 0.2), source=args.graph,
                            chunk_bytes=int(args.chunk_mb * (1 << 20)), **common)
    else:
        man = edge_list_to_shards(args.graph, args.out, args.parts, args.method, args.seed,
                                  split=split or (0.6, 0.2), num_nodes=args.num_nodes,
                                  source=args.graph, chunk_bytes=int(args.chunk_mb * (1 << 20)),
                                  **common)
    result = {"out": str(args.out), "graph": man["name"], "n": man["n"], "nnz": man["nnz"],
              "parts": man["parts"], "method": args.method, "seed": args.seed,
              "streamed": True,
              "rows_per_part": [b - a for a, b in zip(man["offsets"], man["offsets"][1:])],
              "halo_per_part": [e["halo"] for e in man["files"]],
              "bytes": sum(e["bytes"] for e in man["files"]),
              "largest_part_bytes": max(e["bytes"] for e in man["files"]),
              "up_to_date": not kept, "parts_kept": sum(kept),
              "parts_written": len(kept) - sum(kept), "seconds_by_pass": stages,
              "seconds": round(time.perf_counter() - t0, 3)}
    print_result(comm, result, args.json)
    return 0
