"""What a run may do, and the Landlock ruleset that says it (docs/sandbox.md "The floor").

Landlock only *allows*: a rule on a directory grants its whole subtree, and there is no rule
that takes a subdirectory back. So "read everything except ~/.ssh" is written by enumeration:
``/`` is walked down to each denied path, every sibling on the way gets a recursive rule, the
denied path gets none. The directories on the way keep ``READ_DIR`` (``ls ~`` must work), so
the *names* inside a denied directory can be listed, never its files' contents. Writes are the
same walk over the writable trees with the protected paths (agentlog's data root, the agents'
settings files, the read-denied directories) taken out; a directory on such a way gets no
write right at all, so no new entry can be made directly in it (a right on it would reach the
protected path below). The walk is a snapshot: an entry made later directly in such a
directory is outside the rules until the next ruleset, which every brokered command builds
afresh.

Symbolic links are never given a rule (a rule on a link's target could be a denied path);
Landlock checks the resolved path, so a link into a denied directory stays denied.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from agentlog.core import UsageError
from agentlog.sandbox import landlock as L

NET_MODES = ("https", "loopback", "none", "all")
HTTPS_PORT = 443

READ_DENIED_HOME = (".ssh", ".aws", ".gnupg/private-keys-v1.d", ".gnupg/secring.gpg", ".gnupg/trustdb.gpg",
                    ".config/gcloud", ".docker/config.json", ".netrc", ".kube/config")
"""Under ``$HOME`` (passwd's, never the environment's): never readable under the floor."""

AGENT_STATE = {
    "claude": (".claude", ".cache/claude", ".cache/claude-cli-nodejs", ".local/state/claude", ".local/share/claude"),
    "codex": (".codex", ".cache/codex"),
    "gemini": (".gemini", ".cache/gemini"),
}
"""The agents' own state directories under ``$HOME`` (writable under the floor)."""

AGENT_STATE_FILES = (".claude.json", ".claude.json.backup")
"""Files in ``$HOME`` the agents rewrite in place (file-level write, no creation in ``$HOME``)."""

PROTECTED_HOME = (".claude/settings.json", ".claude/settings.local.json", ".codex/config.toml", ".codex/hooks.json",
                  ".gemini/settings.json")
"""The agents' user-level hook and settings files: a session must not change the next one's hooks."""

HOME_GUARDED_DIRS = (".claude/hooks", ".claude/agents", ".claude/skills", ".claude/commands")
"""Where Claude Code's user-level hook scripts, and the subagents, skills and commands whose front
matter may carry hooks, live: inside its writable state, so guarded like the project's
directories (when ``~/.claude`` is the run's state)."""

PROJECT_GUARDED_DIRS = (".claude", ".codex", ".gemini", ".cursor")
"""The agents' project-level configuration directories: their settings, hooks (``settings.json``,
``settings.local.json``, ``config.toml``, ``hooks.json``), hook scripts, subagents and skills (which
may carry hooks too). Read-only in a run, made (empty) when missing so they cannot be created."""

PROJECT_GUARDED_FILES = (".mcp.json",)
"""Project-level settings files outside those directories: read-only when they exist."""

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/random", "/dev/urandom")


@dataclass
class Policy:
    """A run's policy: the floor's inputs plus the live grants. Saved as ``policy.json``."""

    run_id: str
    project: str
    home: str
    data_root: str
    tmp: list[str]
    state: list[str] = field(default_factory=list)
    state_files: list[str] = field(default_factory=list)
    read_deny: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    guarded: list[str] = field(default_factory=list)
    """Paths in the project kept read-only by bind mounts in the run's mount namespace (not by the
    walk, which would take every new entry at the project's top level away)."""
    net: str = "https"
    ports: list[int] = field(default_factory=list)
    allow: list[str] = field(default_factory=list)
    """Extra writable trees given at start (``--allow``): part of the floor."""
    grants: list[str] = field(default_factory=list)
    """Writable trees granted live (``agentlog allow``): brokered commands only."""
    denies: list[str] = field(default_factory=list)
    """Trees made unwritable live (``agentlog deny`` of a path that was no grant): brokered commands only."""
    version: int = 1

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Policy:
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in obj.items() if k in names})


def canonical(path: str) -> str:
    """The resolved absolute path (symbolic links followed, ``..`` removed)."""
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def passwd_home() -> str:
    """The user's home from the password database; ``$HOME`` is the caller's to set, so it is not asked."""
    import pwd

    return canonical(pwd.getpwuid(os.getuid()).pw_dir)


def temp_dirs() -> list[str]:
    import tempfile

    out: list[str] = []
    for p in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"):
        c = canonical(p)
        if os.path.isdir(c) and c not in out:
            out.append(c)
    return out


def floor_policy(run_id: str, project: str, data_root: str, *, agent: str | None, net: str = "https",
                 ports: list[int] | None = None, allow: list[str] | None = None, home: str | None = None,
                 tmp: list[str] | None = None, mounts: bool = True) -> Policy:
    """The floor of a run in ``project``: read all but the secrets, write the project, temp and the
    agent's state, never agentlog's data root or the agents' settings files. The project's agent
    directories (and Claude's hook-carrying ones in its state) are ``guarded`` by read-only mounts
    when ``mounts``, else ``protected`` by the walk."""
    if net not in NET_MODES:
        raise UsageError(f"--net must be one of {', '.join(NET_MODES)}, not {net!r}")
    home = canonical(home) if home else passwd_home()
    root = canonical(data_root)
    state_names = AGENT_STATE.get(agent or "", ())
    proj = canonical(project)
    state = [os.path.join(home, n) for n in state_names]
    guarded = [p for p in project_guarded(proj) if not any(under(p, s) or under(s, p) for s in state)]
    guarded += [p for p in (os.path.join(home, n) for n in HOME_GUARDED_DIRS) if any(under(p, s) for s in state)]
    protected = [root] + [os.path.join(home, n) for n in PROTECTED_HOME]
    if not mounts:
        protected += guarded
        guarded = []
    return Policy(
        run_id=run_id, project=proj, home=home, data_root=root,
        tmp=[canonical(t) for t in tmp] if tmp is not None else temp_dirs(),
        state=state,
        state_files=[os.path.join(home, n) for n in AGENT_STATE_FILES] if agent == "claude" else [],
        read_deny=[os.path.join(home, n) for n in READ_DENIED_HOME] + [os.path.join(root, "keys"),
                                                                       os.path.join(root, "vault")],
        protected=protected, guarded=guarded,
        net=net, ports=sorted(set(ports or [])), allow=[canonical(a) for a in allow or []],
    )


def project_guarded(project: str) -> list[str]:
    """The project's agent directories and settings files (:data:`PROJECT_GUARDED_DIRS`,
    :data:`PROJECT_GUARDED_FILES`), by the path the run sees (a symbolic link is followed)."""
    out = []
    for name in (*PROJECT_GUARDED_DIRS, *PROJECT_GUARDED_FILES):
        p = os.path.join(project, name)
        out.append(canonical(p) if os.path.exists(p) else p)
    return out


def under(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def check_grantable(path: str, policy: Policy) -> None:
    """Refuse a grant under agentlog's data root or a protected or read-denied path."""
    if under(path, policy.data_root) or under(policy.data_root, path):
        raise UsageError(f"{path} is in (or holds) agentlog's data root {policy.data_root}, which no run may "
                         "write; not granted")
    for p in [*policy.protected, *policy.guarded, *policy.read_deny]:
        if under(path, p):
            raise UsageError(f"{path} is under {p}, which no agentlog run may write; not granted")


# -- rules ---------------------------------------------------------------------------------


@dataclass
class Rules:
    """The rules a policy comes to: (path, access, is_dir), and the net ports."""

    paths: list[tuple[str, int, bool]]
    connect_ports: list[int]
    net_handled: bool
    bind_handled: bool


def _walk(roots: list[str], excluded: list[str], access: int, ancestor_access: int,
          out: list[tuple[str, int, bool]]) -> None:
    """Rules giving ``access`` under each root, except beneath the excluded paths."""
    ex = sorted(set(excluded))

    def visit(p: str) -> None:
        if any(under(p, e) for e in ex):
            return
        try:
            st = os.lstat(p)
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode):
            return
        if not stat.S_ISDIR(st.st_mode):
            out.append((p, access & L.FS_FILE_ONLY, False))
            return
        if any(under(e, p) for e in ex):
            if ancestor_access:
                out.append((p, ancestor_access, True))
            try:
                names = os.listdir(p)
            except OSError:
                return
            for name in names:
                visit(os.path.join(p, name))
            return
        out.append((p, access, True))

    for r in roots:
        visit(r)


def rules_for(policy: Policy, *, live: bool) -> Rules:
    """The rules of the floor (``live=False``: what the agent gets) or of a brokered command
    (``live=True``: the floor plus the live grants, minus the live denials)."""
    out: list[tuple[str, int, bool]] = []
    _walk(["/"], policy.read_deny, L.FS_READ, L.FS_READ_DIR, out)
    writable = [policy.project, *policy.tmp, *policy.state, *policy.allow]
    excluded = [*policy.protected, *policy.read_deny]
    if live:
        writable += policy.grants
        excluded += policy.denies
    _walk(writable, excluded, L.FS_READ | L.FS_WRITE, 0, out)
    for f in policy.state_files:
        if not any(under(f, e) for e in excluded) and os.path.isfile(f) and not os.path.islink(f):
            out.append((f, L.FS_WRITE_FILE | L.FS_TRUNCATE | L.FS_READ_FILE, False))
    dev = L.FS_READ_FILE | L.FS_WRITE_FILE | L.FS_IOCTL_DEV
    for d in DEVICES:
        if os.path.exists(d):
            out.append((d, dev, False))
    if os.path.isdir("/dev/pts"):
        out.append(("/dev/pts", dev, True))
    ports = list(policy.ports)
    if policy.net == "https":
        ports.append(HTTPS_PORT)
    return Rules(out, sorted(set(ports)) if policy.net in ("https", "loopback") else [],
                 net_handled=policy.net != "all", bind_handled=policy.net == "none")


@dataclass
class Built:
    ruleset: L.Ruleset
    build_ms: float
    paths: int


def build(policy: Policy, abi: int, *, live: bool) -> Built:
    """The Landlock ruleset of :func:`rules_for`, ready to apply."""
    started = time.perf_counter()
    rules = rules_for(policy, live=live)
    net = (L.NET_CONNECT_TCP if rules.net_handled else 0) | (L.NET_BIND_TCP if rules.bind_handled else 0)
    rs = L.Ruleset.create(abi, net_access=net, scoped=True)
    try:
        n = 0
        for path, access, is_dir in rules.paths:
            n += rs.add_path(path, access, is_dir=is_dir)
        for port in rules.connect_ports:
            rs.add_port(port, L.NET_CONNECT_TCP)
    except BaseException:
        rs.close()
        raise
    return Built(rs, (time.perf_counter() - started) * 1000, n)

