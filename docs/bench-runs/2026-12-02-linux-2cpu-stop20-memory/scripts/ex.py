import sys, time, tempfile, os
sys.path.insert(0, "/work/main/src")
from agentlog.memory import exchange
from agentlog.bench.memory_steps import _read_tree, _write_tree
root = sys.argv[1]
for _ in range(2):
    d = tempfile.mkdtemp(dir="/work/exp_t")
    t = time.perf_counter(); exchange.export(root, d + "/e"); te = time.perf_counter() - t
    files = _read_tree(d + "/e")
    t = time.perf_counter(); _write_tree(d + "/f", files); tf = time.perf_counter() - t
    print(f"export {te*1000:.0f} ms floor {tf*1000:.0f} ms")
