"""Issue 39's three-way (fetch / cache / nothing) on graphs the HEC was never tuned on.

``benchmarks/hec.py`` with three more ``--graphs`` (its ``GRAPHS`` is not
edited here: the entries are added at run time, so this file goes away once
they are in ``GRAPHS``):

* ``chameleon``, ``squirrel``: wikipedia_musae, Geom-GCN's 5 classes
  (``--labels quantiles:5``: the monthly traffic in 5 equal-frequency bins);
* ``deezer_hu``: deezer_gemsec HU, "does the user like Rap/Hip Hop" (the
  genre liked by the share of users closest to one half, 47.9%;
  :func:`spgnn.io.load_musae`), ``--features degree`` as musae_github.

    python -m benchmarks.hec_unseen --graphs chameleon squirrel deezer_hu --ranks 4 \\
        --seeds 0 1 2 --epochs 10 --batch-size 512 --out docs/results/hec/three_way_unseen.jsonl
    python -m benchmarks.hec_unseen --report docs/results/hec/three_way_unseen.jsonl

Every other option is ``benchmarks/hec.py``'s.
"""

from . import hec

UNSEEN = {
    "chameleon": ["--graph", str(hec.DATA / "wikipedia_musae"), "--name", "chameleon",
                  "--labels", "quantiles:5"],
    "squirrel": ["--graph", str(hec.DATA / "wikipedia_musae"), "--name", "squirrel",
                 "--labels", "quantiles:5"],
    "deezer_hu": ["--graph", str(hec.DATA / "deezer_gemsec"), "--name", "HU",
                  "--features", "degree"],
}


def main(argv=None):
    for name, args in UNSEEN.items():
        hec.GRAPHS.setdefault(name, args)
    hec.main(argv)


if __name__ == "__main__":
    main()
