"""``python -m spgnn datasets [list | fetch NAME [NAME ...] | info NAME]``: the named-dataset registry.

``list`` (default) prints every name with its size, how its files are
verified and whether the cache holds them; ``fetch`` downloads into the cache
(``SPGNN_DATA`` or the user cache folder) with a progress bar; ``info``
prints one entry's files, URLs, sizes, checksums and notes.  Local (run it on
one process; under ``mpiexec`` only rank 0 acts).
"""

import json
import os

from ..io.datasets import dataset_names, dataset_status, fetch_dataset, get_dataset
from ..io.download import cache_dir


def add_parser(sub):
    p = sub.add_parser("datasets", help="list, inspect and download the named datasets "
                                        "(--graph NAME)")
    p.add_argument("action", nargs="?", default="list", choices=("list", "fetch", "info"))
    p.add_argument("names", nargs="*", help="dataset names (fetch, info)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(command="datasets")
    return p


def cached_summary(status):
    """One phrase for the ``cached`` column from :func:`dataset_status`'s per-file states.

    ``yes`` / ``no``; otherwise what is wrong, naming the file: ``bad checksum: F`` (a
    file whose size or hash is not the registry's), ``interrupted: F`` (a ``.part`` of
    an unfinished download), ``K of N files``.  It said "partly" for all three.
    """
    states = list(status.values())
    if all(v == "ok" for v in states):
        return "yes"
    bad = [f for f, v in status.items() if v.startswith("bad")]
    if bad:
        return f"bad checksum: {', '.join(bad)}"
    part = [f for f, v in status.items() if v == "partial"]
    if part:
        return f"interrupted: {', '.join(part)}"
    ok = sum(v == "ok" for v in states)
    return "no" if ok == 0 else f"{ok} of {len(states)} files"


def _row(name):
    d = get_dataset(name)
    status = dataset_status(name)
    cached = cached_summary(status)
    return {"name": name, "nodes": d.counts.get("nodes"), "edges": d.counts.get("edges"),
            "bytes": d.size, "verified_by": d.verified_by, "cached": cached,
            "description": d.description}


def run(args):
    if int(os.environ.get("PMI_RANK", "0")) != 0:
        return 0
    if args.action != "list" and not args.names:
        raise ValueError(f"datasets {args.action}: name at least one dataset "
                         f"({', '.join(dataset_names())})")
    for name in args.names:
        get_dataset(name)                      # unknown names fail before anything is done
    if args.action == "fetch":
        for name in args.names:
            folder = fetch_dataset(name, progress=None)
            print(f"{name}: {folder}")
        return 0
    if args.action == "info":
        out = []
        for name in args.names:
            d = get_dataset(name)
            status = dataset_status(name)
            out.append({"name": name, "folder": str(cache_dir() / d.folder),
                        "homepage": d.homepage, "license": d.license, "counts": d.counts,
                        "files": [{"name": f.name, "url": f.url, "bytes": f.size,
                                   "sha256": f.sha256, "git_blob": f.git_blob,
                                   "verified_by": f.verified_by, "note": f.note,
                                   "status": status[f.name]} for f in d.files]})
        if args.json:
            print(json.dumps(out))
            return 0
        for name, entry in zip(args.names, out):
            d = get_dataset(name)
            print(f"{name}: {d.description}\n  source {d.homepage}; licence: {d.license}\n"
                  f"  cache folder {entry['folder']}")
            for f, row in zip(d.files, entry["files"]):
                print(f"  {f.name} [{row['status']}]\n    {f.url}\n    {f.describe()}\n"
                      f"    {f.note}")
        return 0
    rows = [_row(n) for n in dataset_names()]
    if args.json:
        print(json.dumps({"cache": str(cache_dir()), "datasets": rows}))
        return 0
    print(f"cache: {cache_dir()} (set SPGNN_DATA to move it)")
    print(f"{'name':<18}{'nodes':>11}{'edges':>11}{'download':>11}  {'verified by':<14}cached")
    for r in rows:
        size = f"{r['bytes'] / 1e6:.1f} MB" if r["bytes"] else "?"
        edges = f"{r['edges']:,}" if r["edges"] else "-"
        print(f"{r['name']:<18}{r['nodes']:>11,}{edges:>11}{size:>11}  {r['verified_by']:<14}"
              f"{r['cached']}")
    return 0
