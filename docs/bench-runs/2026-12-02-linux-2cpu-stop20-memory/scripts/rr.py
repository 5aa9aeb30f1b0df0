import os, sys, time, tempfile, cProfile, pstats
sys.path.insert(0, os.environ.get("SRC", "/work/main/src"))
from agentlog.memory import exchange, store
src = sys.argv[1]
orig = store.connect
if os.environ.get("CACHE"):
    def connect(root, path=None):
        c = orig(root, path)
        c.execute(f"PRAGMA cache_size = {os.environ['CACHE']}")
        return c
    store.connect = connect
    exchange.connect = connect
root = tempfile.mkdtemp(dir="/tmp/exp/rr")
t = time.perf_counter()
if os.environ.get("PROF"):
    cProfile.run("exchange.restore(root, src)", "/tmp/exp/rr.prof"); pstats.Stats("/tmp/exp/rr.prof").sort_stats("tottime").print_stats(15)
else:
    exchange.restore(root, src)
print(os.environ.get("CACHE", "default"), f"restore {(time.perf_counter()-t)*1000:.0f} ms")
