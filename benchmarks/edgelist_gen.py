"""Write a large synthetic text edge list in bounded memory (for ``spgnn partition``'s streaming path).

    python -m spgnn bench edgelist_gen --lines 10000000 --vertices 1048576 --out /tmp/edges-10m.txt

Each line is ``u v``: ``u`` uniform, ``v`` near ``u`` (a community of 4096
consecutive ids) with probability ``--local`` (default 0.8), else drawn from a
power law over all ids (a few hubs), so that a partitioner has structure to
find and METIS / LDG / random cut differently.  About 10 % of the lines repeat
an edge in either direction and 0.1 % are self-loops, as real lists do.
Written in chunks of 1M lines; deterministic given ``--seed``.  The file is
not committed (docs/data.md gives the command and the numbers).
"""

import argparse

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(prog="spgnn bench edgelist_gen",
                                description=__doc__.splitlines()[0])
    p.add_argument("--lines", type=int, default=10_000_000)
    p.add_argument("--vertices", type=int, default=1 << 20)
    p.add_argument("--local", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    rng = np.random.default_rng(a.seed)
    n, block = a.vertices, 4096
    with open(a.out, "w") as f:
        f.write("# synthetic edge list: benchmarks/edgelist_gen.py\n")
        left = a.lines
        while left:
            m = min(left, 1 << 20)
            u = rng.integers(0, n, m)
            local = rng.random(m) < a.local
            near = (u // block) * block + rng.integers(0, block, m)
            far = np.minimum((n * rng.random(m) ** 3).astype(np.int64), n - 1)
            v = np.where(local, np.minimum(near, n - 1), far)
            dup = rng.random(m) < 0.1
            v[dup], u[dup] = u[np.roll(dup, 1)][: dup.sum()], v[np.roll(dup, 1)][: dup.sum()]
            loop = rng.random(m) < 0.001
            v[loop] = u[loop]
            np.savetxt(f, np.stack([u, v], axis=1), fmt="%d", delimiter=" ")
            left -= m


if __name__ == "__main__":
    main()
