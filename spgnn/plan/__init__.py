"""The plan wing: what a configuration will communicate and cost, before anything runs.

* :mod:`~spgnn.plan.events` -- exact per-rank communication plans of every
  SpMM algorithm, of ``mxm`` and of the 3D GCN epoch (tested equal to the
  ledger), the 3D closed-form volume and ``best_grid_3d``; pure;
* :mod:`~spgnn.plan.model` -- the performance model: predicted epoch and
  SpMM time per configuration, :class:`Calibration` files, ``rank_configs``;
  pure;
* :mod:`~spgnn.plan.calibrate` -- measuring the machine for the model (the
  α–β ping-pong, the collectives, the SpMM and GEMM kernels) and fitting it
  (``spgnn calibrate``); collective where it says so;
* :mod:`~spgnn.plan.choose` -- ``--algo auto``: rank 0 ranks the
  candidates on the run's partition and every rank gets its choice;
  collective;
* :mod:`~spgnn.plan.from_rows` -- ``--algo auto`` when no rank holds the
  graph (generated or sharded): the counts the model reads
  (:class:`BlockCounts`) gathered from the ranks' row blocks; collective.

Imports nothing heavy: no MPI, no Numba.
"""

from .events import (MXM_PLANNERS, PLANNERS, BlockCounts, MatrixCounts, PlannedEvent,
                     SpmmPlan, best_grid_3d,
                     comm_terms_3d, comm_volume_3d, gcn_3d_layers, nnz_imbalance_3d,
                     nnz_per_rank_3d, pair_rows, plan_gcn_3d, plan_mxm, plan_spmm)
from .model import (DEFAULT_CALIBRATION, Calibration, Prediction, Step, candidate_configs,
                    default_calibration_path, load_calibration, predict_epoch, predict_spmm,
                    rank_configs, rank_spmm_configs)
from .choose import aggregation_pattern, choose, choose_spmm, describe
from .from_rows import (RowCounts, choose_from_rows, choose_spmm_from_rows, gather_counts,
                        pattern_rows)

__all__ = [
    # events
    "PlannedEvent", "SpmmPlan", "plan_spmm", "PLANNERS", "pair_rows", "best_grid_3d",
    "comm_terms_3d", "comm_volume_3d", "plan_mxm", "MXM_PLANNERS", "nnz_per_rank_3d",
    "nnz_imbalance_3d", "plan_gcn_3d", "gcn_3d_layers", "BlockCounts", "MatrixCounts",
    # model
    "Calibration", "DEFAULT_CALIBRATION", "Step", "Prediction", "predict_epoch", "predict_spmm",
    "candidate_configs", "rank_configs", "rank_spmm_configs", "default_calibration_path",
    "load_calibration",
    # choose
    "choose", "choose_spmm", "describe", "aggregation_pattern",
    # from_rows
    "choose_from_rows", "choose_spmm_from_rows", "gather_counts", "pattern_rows", "RowCounts",
]
