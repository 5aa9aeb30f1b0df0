"""Shared parts of the benchmarks: statistics, machine facts, result files."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

from agentlog import __version__


FS_IOC_GETFLAGS = 0x80086601
FS_IOC_SETFLAGS = 0x40086602
FS_TOPDIR_FL = 0x00020000


def spread_directories(path: str) -> bool:
    """Mark the directory ``path`` so the file system places each directory made in it in a
    block group of its own choosing (ext4's top-directory flag, ``chattr +T``: the Orlov
    allocator), not beside ``path``; True when the flag is set.

    Why the benchmarks' scratch directories need it: ext4 without a journal (this machine's
    root file system) will not reuse an inode freed in the last 60 s (300 s when its inode
    table block is still dirty), and looks for a free one from the start of the group each
    time a file is created — so after a step removed thousands of files in ``/tmp``'s
    group, each file made there costs about a millisecond of kernel time (measured:
    1,000 files of 600 bytes, 20 ms in a quiet group, 600–1,030 ms in ``/tmp`` after the
    removals; ``perf``: ``find_inode_bit`` → ``recently_deleted``). That is the benchmark's
    own debris, not the code it times: with the flag each scratch directory lands in a group
    of its own."""
    import array
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        flags = array.array("i", [0])
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
        if not flags[0] & FS_TOPDIR_FL:
            flags[0] |= FS_TOPDIR_FL
            fcntl.ioctl(fd, FS_IOC_SETFLAGS, flags, True)
            fcntl.ioctl(fd, FS_IOC_GETFLAGS, flags, True)
        return bool(flags[0] & FS_TOPDIR_FL)
    except OSError:  # a file system without the flag (tmpfs, btrfs, …): directories as it places them
        return False
    finally:
        os.close(fd)


def percentile(xs: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(round(q / 100 * len(s) + 0.5)) - 1))
    return s[k]


def describe(xs: list[float]) -> dict[str, float]:
    """Count, median, p95, p99, mean, min and max of ``xs``; all zero when it is empty."""
    if not xs:
        return {"median": 0.0, "p95": 0.0, "p99": 0.0, "n": 0, "mean": 0.0, "min": 0.0, "max": 0.0}
    return {
        "n": len(xs),
        "median": statistics.median(xs),
        "p95": percentile(xs, 95),
        "p99": percentile(xs, 99),
        "mean": statistics.fmean(xs),
        "min": min(xs),
        "max": max(xs),
    }


def machine() -> dict[str, Any]:
    commit = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5,
            cwd=os.path.dirname(os.path.abspath(__file__)),
        ).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    return {
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "agentlog": __version__,
        "commit": commit,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def markdown_table(columns: list[str], rows: list[list[Any]]) -> str:
    def fmt(v: Any) -> str:
        if v is None:
            return "—"
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, float):
            return f"{v:,.2f}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    out += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def write_results(result: dict[str, Any], out_dir: str, name: str) -> str:
    """Write ``<name>.json`` and ``<name>.md`` into ``out_dir``; return the Markdown."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{name}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    parts = [f"# agentlog bench {name}", "", f"Machine: {result['machine']['platform']}, {result['machine']['cpus']} CPUs, "
             f"Python {result['machine']['python']}, {result['machine']['when']} (commit {result['machine']['commit']})", ""]
    for table in result["tables"]:
        parts += [f"## {table['title']}", "", markdown_table(table["columns"], table["rows"]), ""]
        if table.get("note"):
            parts += [table["note"], ""]
    md = "\n".join(parts)
    with open(os.path.join(out_dir, f"{name}.md"), "w", encoding="utf-8") as f:
        f.write(md)
    return md


def write_json_atomic(path: str, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` so that a reader never sees half a file.

    The bytes go to a temporary file in the same directory, are fsynced, and
    replace ``path`` with one rename: a run killed at any instant leaves either
    the previous complete file or the new one.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, allow_nan=False, default=_json_default)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _json_default(o: Any) -> Any:
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def finite(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by None (strict JSON)."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {str(k): finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    for key in ("model name", "Hardware", "Model", "cpu model"):
        for line in text.splitlines():
            k, _, v = line.partition(":")
            if k.strip() == key and v.strip():
                return v.strip()
    if sys.platform == "darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True, timeout=5)
            return out.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            return None
    return platform.processor() or None


def memory_bytes() -> int | None:
    """Physical memory of the machine."""
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def disk_info(path: str) -> dict[str, Any]:
    """The filesystem holding ``path``: size, free space, type, device and what is known of the device."""
    path = os.path.abspath(path)
    probe = path
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    info: dict[str, Any] = {"path": path}
    try:
        st = os.statvfs(probe)
        info["size_bytes"] = st.f_blocks * st.f_frsize
        info["free_bytes"] = st.f_bavail * st.f_frsize
    except OSError:
        pass
    real = os.path.realpath(probe)
    best = ""
    for line in (_read("/proc/self/mounts") or "").splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        dev, mount, fstype = parts[0], parts[1].replace("\\040", " "), parts[2]
        inside = real == mount or real.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= len(best):
            best = mount
            info.update(mount=mount, fstype=fstype, device=dev)
    device = info.get("device")
    if isinstance(device, str) and device.startswith("/dev/"):
        name = os.path.basename(os.path.realpath(device))
        sys_block = os.path.realpath(f"/sys/class/block/{name}")
        candidates = [sys_block, os.path.dirname(sys_block)]  # a partition's disk is its parent
        for base in candidates:
            model = _read(os.path.join(base, "device", "model"))
            if model and model.strip():
                info["model"] = model.strip()
                break
        for base in candidates:
            driver = os.path.join(base, "device", "driver")
            if os.path.exists(driver):
                info["driver"] = os.path.basename(os.path.realpath(driver))
                break
        for base in candidates:
            rot = _read(os.path.join(base, "queue", "rotational"))
            if rot is not None:
                info["rotational_flag"] = rot.strip()
                break
    return info


def library_versions() -> dict[str, str | None]:
    """Versions of agentlog, what it requires, and the libraries the benchmarks use."""
    from importlib import metadata

    names = ["agentlog", "click", "rich", "tomlkit", "zstandard"]
    try:
        for req in metadata.requires("agentlog") or []:
            if "extra ==" in req:
                continue
            name = req.split(";")[0].strip()
            for sep in "<>=!~[ (":
                name = name.split(sep)[0]
            if name and name not in names:
                names.append(name)
    except metadata.PackageNotFoundError:
        pass
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_state(directory: str | None = None) -> dict[str, Any]:
    """Commit of the checkout holding the package and whether its tree was clean.

    Looks from the package's own directory (not the current one), so a run
    started elsewhere still finds the commit; outside a checkout it says so.
    """
    directory = directory or os.path.dirname(os.path.abspath(__file__))

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", *args], capture_output=True, text=True, timeout=20, cwd=directory)

    try:
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return {"repo": None, "commit": None, "clean": None, "note": "not a git checkout: " + head.stderr.strip()[:200]}
        top = git("rev-parse", "--show-toplevel").stdout.strip()
        status = git("status", "--porcelain")
        changed = [l for l in status.stdout.splitlines() if l.strip()]
        return {
            "repo": top,
            "commit": head.stdout.strip(),
            "short": head.stdout.strip()[:10],
            "clean": status.returncode == 0 and not changed,
            "changed_paths": len(changed),
        }
    except (OSError, subprocess.SubprocessError) as e:
        return {"repo": None, "commit": None, "clean": None, "note": f"git unavailable: {e}"}


def os_name() -> str:
    for line in (_read("/etc/os-release") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    if sys.platform == "darwin":
        return f"macOS {platform.mac_ver()[0]}"
    return platform.system()


def describe_machine(path: str) -> dict[str, Any]:
    """Everything the report says about where it ran (``path``: where results and work go)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 0
    return {
        **machine(),
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "memory_bytes": memory_bytes(),
        "disk": disk_info(path),
        "os": os_name(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "python_full": sys.version.replace("\n", " "),
        "executable": sys.executable,
        "libraries": library_versions(),
        "git": git_state(),
    }


def start_daemon(root: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """A real ``agentlog daemon run`` on ``root`` (``env`` names it), once its capture server
    answers on the socket; RuntimeError when it does not within 60 s."""
    from agentlog.api import hook_server_answers

    proc = subprocess.Popen([sys.executable, "-m", "agentlog", "daemon", "run"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not hook_server_answers(root):
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_daemon(proc)
            raise RuntimeError("agentlog daemon run: its capture server did not answer within 60 s")
        time.sleep(0.05)
    return proc


def stop_daemon(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (the daemon ingests once more and stops its server), then kill past 60 s."""
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
