"""Placement values check themselves: each bad field raises a typed error naming it (no MPI)."""

import pytest

from spgnn.comm import solo_communicator
from spgnn.errors import GridError
from spgnn.gnn.placement import (PLACEMENTS, Exchange, Plexus3D, Rep15D, Row1D, as_placement,
                                 placement_for)


@pytest.mark.parametrize("make,error,field", [
    (lambda: Exchange(aggregation="sideways"), ValueError, "aggregation"),
    (lambda: Exchange(quantize="int3"), ValueError, "quantize"),
    (lambda: Exchange(rounding="up"), ValueError, "rounding"),
    (lambda: Exchange(param_dtype="fp16"), ValueError, "param_dtype"),
    (lambda: Exchange(seed=1.5), ValueError, "seed"),
    (lambda: Row1D(aware="yes"), ValueError, "aware"),
    (lambda: Row1D(exchange="hybrid"), ValueError, "exchange"),
    (lambda: Row1D(aware=False, exchange=Exchange("pre")), ValueError, "exchange"),
    (lambda: Row1D(aware=False, exchange=Exchange(quantize="int8")), ValueError, "exchange"),
    (lambda: Rep15D(c=0), GridError, "c"),
    (lambda: Rep15D(c=1.5), GridError, "c"),
    (lambda: Rep15D(aware=1), ValueError, "aware"),
    (lambda: Plexus3D(grid=(2, 2)), GridError, "grid"),
    (lambda: Plexus3D(grid=(2, 0, 1)), GridError, "grid"),
    (lambda: Plexus3D(grid=4), GridError, "grid"),
    (lambda: Plexus3D(permute="single"), ValueError, "permute"),
    (lambda: Plexus3D(agg_blocks=0), ValueError, "agg_blocks"),
    (lambda: Plexus3D(agg_blocks=True), ValueError, "agg_blocks"),
    (lambda: Plexus3D(shard_input="no"), ValueError, "shard_input"),
    (lambda: Plexus3D(shard_weights=None), ValueError, "shard_weights"),
])
def test_a_bad_field_raises_a_typed_error_naming_it(make, error, field):
    with pytest.raises(error, match=rf"\b{field}\b") as info:
        make()
    assert type(info.value) is error


def test_values_are_frozen_hashable_and_normalised():
    p = Plexus3D(grid=[1, 2, 2], agg_blocks=2.0)
    assert p.grid == (1, 2, 2) and p.agg_blocks == 2 and isinstance(p.agg_blocks, int)
    assert hash(p) == hash(Plexus3D(grid=(1, 2, 2), agg_blocks=2))
    with pytest.raises(AttributeError):
        p.permute = "double"
    assert Row1D().exchange.plain and not Exchange("hybrid").plain
    assert not Exchange(quantize="int2").plain
    assert Exchange(quantize="none").make_codec() is None
    assert Exchange(quantize="int4").make_codec().bits == 4


@pytest.mark.parametrize("name,kind,options", [
    ("1d-aware", Row1D, {"exchange": Exchange("pre")}), ("1d", Row1D, {}),
    ("15d-aware", Rep15D, {"c": 3}), ("15d", Rep15D, {}),
    ("3d", Plexus3D, {"grid": (1, 1, 2), "permute": "double", "agg_blocks": 2,
                      "shard_input": True, "shard_weights": False}),
])
def test_placement_for_names_its_algorithm(name, kind, options):
    p = placement_for(name, **options)
    assert type(p) is kind and p.algorithm == name
    for k, v in options.items():
        assert getattr(p, k) == v
    assert as_placement(name) == placement_for(name) and as_placement(p) is p
    assert kind in PLACEMENTS


def test_placement_for_refuses_another_familys_option():
    with pytest.raises(ValueError, match=r"permute='double'.*'3d' only, not '1d'"):
        placement_for("1d", permute="double")
    with pytest.raises(ValueError, match=r"c=2.*'15d-aware' or '15d' only, not '3d'"):
        placement_for("3d", c=2)
    with pytest.raises(ValueError, match=r"exchange=.*not '15d'"):
        placement_for("15d", exchange=Exchange())
    with pytest.raises(ValueError, match="unknown option colour"):
        placement_for("3d", colour="red")
    with pytest.raises(ValueError, match="unknown algorithm '2d'"):
        placement_for("2d")
    with pytest.raises(ValueError, match="placement must be"):
        as_placement(3)
    assert placement_for("1d", c=None, grid=None) == Row1D(aware=False)   # None: not given


def test_grids_and_parts_on_one_rank():
    comm = solo_communicator()
    assert Row1D().make_grid(comm).axis_names == ("row",)
    g = Rep15D(c=1).make_grid(comm)
    assert g.axis_names == ("row", "layer") and Rep15D(c=1).nparts(g) == 1
    assert Plexus3D().make_grid(comm).shape == (1, 1, 1)
    with pytest.raises(GridError, match=r"c=2 must divide comm.size=1"):
        Rep15D(c=2).make_grid(comm)
    with pytest.raises(GridError, match=r"grid=\(1, 2, 1\) has 2 ranks"):
        Plexus3D(grid=(1, 2, 1)).make_grid(comm)
