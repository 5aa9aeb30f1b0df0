import os, time
p = "/tmp/exp/fs.bin"
fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC, 0o600)
xs = []
for i in range(1000):
    t = time.perf_counter(); os.write(fd, b"x" * 600); os.fdatasync(fd); xs.append((time.perf_counter() - t) * 1e3)
xs.sort(); print(f"write+fdatasync p50 {xs[500]:.3f} p95 {xs[950]:.3f}")
os.close(fd)
