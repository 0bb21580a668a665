import sys
sys.path.insert(0, "/work/wt-hecwall")
import benchmarks.hec as H
H.CROSS_SBM = dict(H.CROSS_SBM, n=20000)
H.main(sys.argv[1:])
