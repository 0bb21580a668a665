"""sbm_cross with n = 20,000 (docs/results/hec/cross.md): the bench's main with CROSS_SBM's n
raised. Run from the repository root:

    python docs/results/hec/cross_n20000.py --graphs sbm_cross --ranks 4 --seeds 0 1 2 \
        --epochs 20 --batch-size 256 --out docs/results/hec/three_way_cross_n20000.jsonl
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import benchmarks.hec as H  # noqa: E402

H.CROSS_SBM = dict(H.CROSS_SBM, n=20000)
H.main(sys.argv[1:])
