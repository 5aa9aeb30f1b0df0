import os, sys, time
sys.path.insert(0, os.environ.get("SRC", "/work/main/src"))
from agentlog.memory import store
root = sys.argv[1]
what = sys.argv[2] if len(sys.argv) > 2 else "time"
store.verify(root)  # warm
if what == "prof":
    import cProfile, pstats
    cProfile.run("store.verify(root)", "/tmp/exp/v.prof")
    pstats.Stats("/tmp/exp/v.prof").sort_stats("cumtime").print_stats(25)
else:
    for _ in range(3):
        t = time.perf_counter(); r = store.verify(root); print(f"{(time.perf_counter()-t)*1000:.0f} ms", r["ok"], r["rows"])
