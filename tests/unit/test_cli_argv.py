"""``python -m spgnn``'s argument list: values that start with a minus sign reach our validators.
Pure."""

from spgnn.__main__ import join_negative_values


def test_negative_values_are_joined_to_their_option():
    assert join_negative_values(["train", "--fanout", "-1,5,5", "--lr", "-1e-3", "--json"]) == \
        ["train", "--fanout=-1,5,5", "--lr=-1e-3", "--json"]


def test_other_tokens_are_left_alone():
    argv = ["train", "--fanout=5,5", "--seed", "-1", "--graph", "-", "-h", "--x", "--y"]
    out = join_negative_values(argv)
    assert out[:3] == ["train", "--fanout=5,5", "--seed=-1"] and out[3:] == argv[4:]
    assert join_negative_values(["-1,2"]) == ["-1,2"]
