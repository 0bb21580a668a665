"""Minibatch GraphSAGE test accuracy over seeds (Cora, musae_facebook), any number of ranks.

    python -m spgnn bench sage_accuracy --dataset cora --sampler sage --seeds 5
    mpiexec -n 4 python -m spgnn bench sage_accuracy --dataset cora --sampler ladies --seeds 5
    mpiexec -n 4 python -m spgnn bench sage_accuracy --dataset facebook --seeds 3 --epochs 10

Runs in this process (the ``train`` command's function once per seed, on
``Communicator.world()``)
with the defaults of ``python -m spgnn train --model sage`` unless told
otherwise: 3 SAGEConv (mean) layers, fanout 15,10,5 (LADIES:
``--ladies-size`` vertices per layer, default the batch size), batch 512,
bulk 16, hidden 64, input dropout 0.5, dropout 0.6, Adam lr 0.01, weight
decay 5e-4 (weights, not biases), row-normalised features,
graph replicated for sampling (``--partition-mode partitioned --replication
c`` for the 1.5D mode).  Cora uses the standard Planetoid split (140/500/1000);
musae_facebook a stratified random 60/20/20 split (split seed 0) and, by
default, a 256-dimensional random projection of its 4714 bag-of-words
features (``--feature-dim 0`` keeps them).  Accuracy is full-neighbourhood
inference of the model of the epoch with the best validation accuracy
(``test``; evaluated every ``--eval-every`` epochs; ``--model-selection
last`` takes the last epoch's model instead), next to the last epoch's
(``last-epoch test``).

Set ``NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1`` on small
machines.  Prints one JSON line per seed and a mean ± std summary (rank 0).
"""

import argparse
import json
import statistics

from spgnn import Communicator
from spgnn.cli import train as cli_train
from spgnn.gnn import TrainConfig
from spgnn.gnn.config import SAMPLERS
from spgnn.gnn.hooks import SELECTIONS
from spgnn.gnn.minibatch import MODES
from spgnn.testing.data import shared_data_path

DATASETS = {"cora": ("planetoid", "cora", None, 0), "facebook": ("musae_facebook", None, "0.6:0.2", 256)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="cora", choices=sorted(DATASETS))
    ap.add_argument("--sampler", default="sage", choices=SAMPLERS)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--fanout", default="15,10,5")
    ap.add_argument("--bulk", type=int, default=16)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--dropout", type=float, default=0.6)
    ap.add_argument("--input-dropout", type=float, default=0.5)
    ap.add_argument("--ladies-size", type=int, default=None)
    ap.add_argument("--partition-mode", default="replicated", choices=MODES)
    ap.add_argument("--replication", type=int, default=1)
    ap.add_argument("--feature-dim", type=int, default=None)
    ap.add_argument("--eval-every", type=int, default=1)
    ap.add_argument("--model-selection", default="best-val", choices=SELECTIONS)
    args = ap.parse_args(argv)
    folder, name, split, dim = DATASETS[args.dataset]
    comm = Communicator.world()
    feature_dim = dim if args.feature_dim is None else (args.feature_dim or None)
    runs = []
    for seed in range(args.seeds):
        cfg = TrainConfig(graph=str(shared_data_path(folder)), name=name, split=split,
                          model="sage", sampler=args.sampler, batch_size=args.batch_size,
                          fanout=args.fanout, bulk=args.bulk, hidden=args.hidden, lr=args.lr,
                          weight_decay=args.weight_decay, dropout=args.dropout,
                          model_options={"input_dropout": args.input_dropout},
                          epochs=args.epochs, seed=seed, partition_mode=args.partition_mode,
                          replication=args.replication, eval_every=args.eval_every,
                          model_selection=args.model_selection, ladies_size=args.ladies_size,
                          feature_dim=feature_dim or None)
        r = cli_train.train(comm, cfg)
        runs.append(r)
        if comm.rank == 0:
            print(json.dumps(r), flush=True)
    if comm.rank == 0:
        def ms(key):
            v = [r[key] for r in runs if r[key] is not None]
            return (f"{statistics.mean(v):.4f} ± {statistics.stdev(v) if len(v) > 1 else 0:.4f}"
                    if v else "-")
        print(f"SUMMARY dataset={args.dataset} sampler={args.sampler} ranks={comm.size} "
              f"mode={args.partition_mode} seeds={args.seeds} epochs={args.epochs} "
              f"selection={args.model_selection} test={ms('test_acc')} "
              f"min={min(r['test_acc'] for r in runs):.4f} "
              f"last-epoch test={ms('last_epoch_test_acc')} "
              f"val={ms('val_acc')} s/epoch={ms('seconds_per_epoch')} "
              f"bytes/epoch={runs[-1]['bytes_per_epoch']:,}", flush=True)


if __name__ == "__main__":
    main()
