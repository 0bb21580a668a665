"""The fast paths of spgnn.gnn: Numba dropout equals the numpy mask bit for bit, sparse features train
exactly like dense ones."""

import numpy as np
import pytest
import scipy.sparse as sp

from spgnn import run_loopback
from spgnn.gnn import GCN, Adam, DistGraph, Trainer
from spgnn.gnn import functional as F
from spgnn.io import Graph, sbm


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(7, 5), (600, 300)])      # serial and threaded kernels
def test_numba_dropout_equals_numpy_mask(dtype, shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(dtype)
    x[0, :3] = [np.nan, -2.0, np.inf]
    ids = rng.permutation(10 * shape[0])[:shape[0]]
    cols = np.arange(4, 4 + shape[1])
    for p in (0.0, 0.3, 0.5):
        with np.errstate(invalid="ignore"):                  # inf * 0, as the kernel does
            want = x * F.dropout_mask(p, (2, 5, 1), ids, cols, shape[1] + 9, dtype=dtype)
            got = F.dropout_apply(x, p, (2, 5, 1), ids, 4, shape[1] + 9)
        assert want.tobytes() == got.tobytes()
    s = sp.random(*shape, density=0.05, format="csr", dtype=dtype, random_state=2)
    data = F.dropout_apply_csr(s.indptr, s.indices, s.data, 0.5, (7,), ids, 4, shape[1] + 9)
    want = s.toarray() * F.dropout_mask(0.5, (7,), ids, cols, shape[1] + 9, dtype=dtype)
    got = sp.csr_array((data, s.indices, s.indptr), shape=shape).toarray()
    assert want.tobytes() == got.tobytes()


def _graph():
    adj, x, y = sbm(120, 3, avg_degree=4, num_features=40, seed=5)
    x = (np.asarray(x) > 1.2).astype(np.float32)          # sparse 0/1 features, as Planetoid's
    return Graph(adj=adj, features=x, labels=y).random_split(0.5, 0.2, seed=5)


def _losses(comm, algo, sparse, partition="none"):
    dg = DistGraph.from_graph(_graph() if comm.rank == 0 else None, comm, algo,
                              dtype=np.float64, sparse_features=sparse, partition=partition)
    model = GCN(dg.num_features, 6, dg.num_classes, dropout=0.5, seed=4, bias=True)
    tr = Trainer(model, dg, Adam(model.param_groups(5e-4), lr=0.05))
    kind = type(dg.features).__name__
    return [tr.train_epoch()["loss"] for _ in range(4)], tr.evaluate(), kind


@pytest.mark.parametrize("p,algo", [(1, "1d"), (2, "1d-aware"), (4, "15d-aware")])
def test_sparse_features_train_like_dense(p, algo):
    want, ev, kind = run_loopback(1, _losses, "1d", False)[0]
    got, gev, gkind = run_loopback(p, _losses, algo, True, timeout=60)[0]
    assert kind == "DistDenseMatrix" and gkind == "SparseBackedMatrix"
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert gev == pytest.approx(ev, rel=1e-10)


def test_3d_refuses_sparse_features():
    def body(comm):
        with pytest.raises(ValueError, match="not supported on '3d'"):
            DistGraph.from_graph(_graph(), comm, "3d", sparse_features=True)
        return True

    assert run_loopback(1, body) == [True]
