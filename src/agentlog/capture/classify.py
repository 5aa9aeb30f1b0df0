"""Pure classifiers for tool names, shell commands and file paths (failures: ``capture.failures``).

Runs on the hook path: standard library only, no ``re`` and no ``shlex``
(the shell-word splitter below is hand-written, quote-aware and never raises,
whatever it is given). Every function is pure and total: any ``str`` in, a
value out.

Behaviour follows the reference normalisation rules ("Classifiers"), with
the additions listed in each docstring.

``classify_command`` categories, in the priority used to pick the most
significant segment of a chained command line::

    git > test > build > install > network > run > fs > other

``command_subcategory`` taxonomy (dotted, ``<family>.<kind>``):

=================  ==========================================================
``git.commit``     ``git commit``
``git.push``       ``git push``
``git.sync``       ``git pull``, ``fetch``, ``clone``
``git.integrate``  ``git merge``, ``rebase``, ``cherry-pick``, ``am``
``git.undo``       ``git revert``, ``reset``, ``restore``, ``clean``
``git.branch``     ``git checkout``, ``switch``, ``branch``, ``worktree``, ``tag``
``git.stash``      ``git stash``
``git.stage``      ``git add``, ``rm``, ``mv``
``git.inspect``    ``git status``, ``log``, ``diff``, ``show``, ``blame``, ...
``git.other``      any other or no git subcommand
``pkg.install``    dependency changes through a package manager or toolchain
``pkg.test``       tests through a package manager/toolchain (``npm test``,
                   ``cargo test``, ``go test``, ``dotnet test``)
``pkg.build``      builds through one (``npm run build``, ``cargo build``)
``pkg.run``        scripts/programs through one (``npm run dev``, ``cargo run``)
``pkg.lint``       lint/format scripts (``npm run lint``, ``cargo fmt``)
``pkg.publish``    ``npm publish``, ``cargo publish``, ``poetry publish``
``pkg.other``      other package-manager commands (``pip list``, ``npm audit``)
``test.runner``    a test runner run directly (``pytest``, ``jest``,
                   ``make test``, ``python -m pytest``)
``test.e2e``       browser test runners (``playwright``, ``cypress``)
``build.native``   ``make``, ``cmake``, ``ninja``, ``meson``, ``bazel``
``build.js``       ``tsc``, ``webpack``, ``esbuild``, ``rollup``, ``vite build``
``build.jvm``      ``gradle``, ``gradlew``, ``mvn``, ``ant``, ``sbt``
``build.apple``    ``xcodebuild``, ``xcodegen``
``infra.docker``   ``docker``/``podman``/``docker-compose``, any subcommand
``infra.k8s``      ``kubectl``, ``helm``
``infra.cloud``    ``aws``, ``gcloud``, ``az``, ``vercel``, ``fly``, ...
``net.http``       ``curl``, ``wget``, ``http``
``net.remote``     ``ssh``, ``scp``, ``rsync``, ``ping``, ``dig``, ``nc``, ...
``net.github``     ``gh``
``run.interpreter`` ``python x.py``, ``node x.js``, ``ruby``, ``java``, ...
``run.server``     ``uvicorn``, ``gunicorn``, ``flask run``, ``rails server``
``run.script``     ``./x``, ``*.sh``/``*.py``/``*.js`` scripts, bare shells
``fs.read``        ``cat``, ``head``, ``wc``, ``jq``, ``sed`` (no ``-i``), ...
``fs.search``      ``grep``, ``rg``, ``find``, ``fd``, ...
``fs.list``        ``ls``, ``tree``, ``du``, ``pwd``, ...
``fs.write``       ``cp``, ``mv``, ``rm``, ``mkdir``, ``touch``, ``sed -i``, ...
``fs.nav``         ``cd``, ``pushd``, ``popd``
``fs.archive``     ``tar``, ``zip``, ``unzip``, ``gzip``, ...
``dev.lint``       linters and formatters (``ruff``, ``eslint``, ``mypy``)
``shell.builtin``  ``echo``, ``export``, ``source``, ``sleep``, ``test``, ...
=================  ==========================================================

Commands that match nothing get category ``other`` and no subcategory.

Beyond the reference (deliberate, small): ``make``/``gradle``/``mvn``/
``bazel``/``xcodebuild`` with a test target (``test``, ``check``,
``test-*``, ``*-test``) are ``test``; ``npm publish``/``cargo publish`` are
``network``; read-only npm builtins (``npm audit``, ``npm ls``) are
``other`` rather than ``run``; ``docker compose build/push/pull`` look at the
compose subcommand; ``timeout``, ``xargs``, ``watch``, ``stdbuf``, ``doas``
are wrappers too; ``uv run``/``poetry run``/``pipenv run``/``bundle exec``/
``conda run``/``uvx``/``pnpm exec``/``yarn dlx`` classify the command they
run; ``python -m <module>`` classifies the module (``python -m pytest`` is a
test, ``python -m pip install`` an install); ``node --test`` and
``python manage.py test`` are tests; heredoc bodies, comments, redirections
and ``$(...)`` contents are not commands of the line.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional, Tuple

    _Result = Tuple[str, Optional[str], Optional[str]]


# --------------------------------------------------------------------------
# Tools

_TOOLS: dict[str, str] = {}


def _tools(category: str, names: str) -> None:
    for name in names.split():
        _TOOLS[name] = category


_tools(
    "shell",
    "bash shell run_shell_command execute run_command run_terminal_cmd exec_command local_shell "
    "container.exec unified_exec write_stdin bashoutput killshell killbash powershell",
)
_tools("file_read", "read read_file read_many_files readfile view_image")
_tools("file_write", "write write_file create_file writefile delete delete_file deletefile")
_tools(
    "file_edit",
    "edit multiedit multi_edit replace apply_patch applypatch str_replace str_replace_editor "
    "strreplace edit_file search_replace",
)
_tools("notebook", "notebookedit notebook_edit edit_notebook")
_tools(
    "search",
    "glob grep search_file_content list_directory ls codebase_search grep_search file_search "
    "list_dir grep_files lsp",
)
_tools("web", "webfetch websearch web_fetch web_search google_web_search")
_tools("subagent", "task agent spawn_agent delegate_to_agent codebase_investigator taskoutput taskstop")
_tools(
    "plan",
    "enterplanmode exitplanmode enter_plan_mode exit_plan_mode todowrite todo_write update_plan "
    "write_todos updatetodos taskcreate taskupdate tasklist taskget",
)
_tools("mcp", "listmcpresourcestool readmcpresourcetool")


def classify_tool(name: str) -> str:
    """Category of a tool name (case-insensitive).

    Returns one of ``shell``, ``file_read``, ``file_write``, ``file_edit``,
    ``search``, ``web``, ``mcp``, ``subagent``, ``plan``, ``notebook``,
    ``other``.

    Besides the reference names: MCP tools are ``mcp__*`` (Claude, Codex,
    Gemini) and ``MCP:<tool>`` (Cursor), plus Claude's MCP resource tools.
    Shell: Codex ``exec_command``/``shell``/``local_shell``/``container.exec``/
    ``write_stdin``, Claude ``BashOutput``/``KillShell``, Cursor ``Shell``.
    File writes include deletions (Cursor ``Delete``/``delete_file``): they
    replace a whole file's state rather than edit part of it. Cursor
    ``search_replace``/``StrReplace`` are edits, Codex ``view_image`` a read,
    ``list_dir``/``grep_files``/Claude ``LSP`` searches. Claude ``Task`` and
    ``Agent`` spawn subagents and ``TaskOutput``/``TaskStop`` manage those
    background tasks (``subagent``); Claude's task-list tools
    ``TaskCreate``/``TaskUpdate``/``TaskList``/``TaskGet`` replace
    ``TodoWrite`` and are ``plan``, as are Gemini ``write_todos`` and Cursor
    ``UpdateTodos``. Gemini ``delegate_to_agent``/``codebase_investigator``
    are subagents; ``save_memory``, ``Skill``, ``AskUserQuestion`` and
    anything unknown are ``other``.
    """
    key = name.strip().lower()
    if key.startswith("mcp__") or key.startswith("mcp:"):
        return "mcp"
    return _TOOLS.get(key, "other")


# --------------------------------------------------------------------------
# Shell command lines: words and segments

_MAX_COMMAND = 100_000
"""Longer command lines are classified on their first 100,000 characters."""
_MAX_DEPTH = 8
_BLANK = " \t\r\f\v"
_WORD_STOP = " \t\r\f\v\n;&|<>()"


def _skip_subst(s: str, i: int) -> int:
    """Index just past the ``)`` closing a ``$(`` whose body starts at ``i``."""
    n = len(s)
    depth = 1
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
        elif c == "'":
            j = s.find("'", i + 1)
            i = n if j < 0 else j + 1
        elif c == '"':
            i = _read_dquote(s, i + 1, None)
        elif c == "`":
            j = s.find("`", i + 1)
            i = n if j < 0 else j + 1
        elif c == "(":
            depth += 1
            i += 1
        elif c == ")":
            depth -= 1
            i += 1
            if depth == 0:
                return i
        else:
            i += 1
    return n


def _read_dquote(s: str, i: int, out: list[str] | None) -> int:
    """Read a double-quoted string body from ``i``; return the index past the closing quote."""
    n = len(s)
    while i < n:
        c = s[i]
        if c == '"':
            return i + 1
        if c == "\\" and i + 1 < n:
            nxt = s[i + 1]
            if nxt == "\n":
                pass
            elif nxt in '"\\$`':
                if out is not None:
                    out.append(nxt)
            elif out is not None:
                out.append(c + nxt)
            i += 2
        elif c == "$" and s.startswith("$(", i):
            j = _skip_subst(s, i + 2)
            if out is not None:
                out.append(s[i:j])
            i = j
        elif c == "`":
            j = s.find("`", i + 1)
            j = n if j < 0 else j + 1
            if out is not None:
                out.append(s[i:j])
            i = j
        else:
            j = i + 1
            while j < n and s[j] not in '"\\$`':
                j += 1
            if out is not None:
                out.append(s[i:j])
            i = j
    return n


def _read_word(s: str, i: int) -> tuple[str, int, bool]:
    """One shell word from ``i``: (text without quotes, end index, was any part quoted)."""
    n = len(s)
    out: list[str] = []
    quoted = False
    while i < n:
        c = s[i]
        if c in _WORD_STOP:
            if c == "(" and out and out[-1].endswith(("<", ">", "=")):
                # a=( array ) / <( process substitution ): keep as part of the word
                j = _skip_subst(s, i + 1)
                out.append(s[i:j])
                i = j
                continue
            break
        if c == "'":
            quoted = True
            j = s.find("'", i + 1)
            if j < 0:
                out.append(s[i + 1 :])
                i = n
            else:
                out.append(s[i + 1 : j])
                i = j + 1
        elif c == '"':
            quoted = True
            i = _read_dquote(s, i + 1, out)
        elif c == "\\":
            quoted = True
            if i + 1 < n:
                if s[i + 1] != "\n":
                    out.append(s[i + 1])
                i += 2
            else:
                i += 1
        elif c == "$" and s.startswith("$(", i):
            j = _skip_subst(s, i + 2)
            out.append(s[i:j])
            i = j
        elif c == "`":
            j = s.find("`", i + 1)
            j = n if j < 0 else j + 1
            out.append(s[i:j])
            i = j
        else:
            j = i + 1
            while j < n and s[j] not in _WORD_STOP and s[j] not in "'\"\\$`":
                j += 1
            out.append(s[i:j])
            i = j
    return "".join(out), i, quoted


def _skip_blank(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _BLANK:
        i += 1
    return i


def _skip_heredocs(s: str, i: int, pending: list[tuple[str, bool]]) -> int:
    """Skip heredoc bodies starting at line ``i``; return the index after the last delimiter line."""
    n = len(s)
    for delim, strip_tabs in pending:
        while i < n:
            j = s.find("\n", i)
            end = n if j < 0 else j
            line = s[i:end].rstrip("\r")
            if strip_tabs:
                line = line.lstrip("\t")
            i = n if j < 0 else j + 1
            if line == delim or line.strip() == delim:
                break
    return i


def split_command(line: str) -> list[list[str]]:
    """Split a command line into segments of words.

    Segments are separated by ``&&``, ``||``, ``&``, ``|``, ``|&``, ``;``,
    newlines and subshell parentheses. Quotes are removed from words
    (single, double, backslash escapes); redirections with their targets,
    comments and heredoc bodies are dropped; ``$(...)`` and backquotes stay
    inside their word unexpanded. Unbalanced quotes run to the end of the
    line. Never raises.
    """
    s = line[:_MAX_COMMAND]
    n = len(s)
    segments: list[list[str]] = []
    words: list[str] = []
    heredocs: list[tuple[str, bool]] = []
    i = 0
    while i < n:
        c = s[i]
        if c in _BLANK:
            i += 1
            continue
        if c == "\n" or c == ";" or c == "(" or c == ")":
            if words:
                segments.append(words)
                words = []
            i += 1
            if c == "\n" and heredocs:
                i = _skip_heredocs(s, i, heredocs)
                heredocs = []
            continue
        if c == "&":
            if s.startswith("&>", i):
                i += 3 if s.startswith("&>>", i) else 2
                _, i, _ = _read_word(s, _skip_blank(s, i))
                continue
            if words:
                segments.append(words)
                words = []
            i += 2 if s.startswith("&&", i) else 1
            continue
        if c == "|":
            if words:
                segments.append(words)
                words = []
            i += 2 if s.startswith(("||", "|&"), i) else 1
            continue
        if c == "<" or c == ">":
            if s.startswith("<<<", i):
                i += 3
            elif s.startswith("<<", i):
                i += 2
                strip_tabs = s.startswith("-", i)
                if strip_tabs:
                    i += 1
                delim, i, _ = _read_word(s, _skip_blank(s, i))
                if delim:
                    heredocs.append((delim, strip_tabs))
                continue
            else:
                i += 1
                if i < n and s[i] in ">&|":
                    i += 1
            _, i, _ = _read_word(s, _skip_blank(s, i))
            continue
        if c == "#":
            j = s.find("\n", i)
            i = n if j < 0 else j
            continue
        word, j, quoted = _read_word(s, i)
        if j == i:  # defensive: never loop without progress
            j = i + 1
        if j < n and s[j] in "<>" and word.isdigit() and not quoted:
            i = j  # file-descriptor prefix of a redirection (2>&1)
            continue
        words.append(word)
        i = j
    if words:
        segments.append(words)
    return segments


# --------------------------------------------------------------------------
# Shell command lines: programs

_CATEGORY_RANK = {"git": 0, "test": 1, "build": 2, "install": 3, "network": 4, "run": 5, "fs": 6, "other": 7}
_GIT_PRIORITY = {
    name: rank
    for rank, name in enumerate(
        "commit push pull merge rebase cherry-pick revert reset checkout switch stash tag clone "
        "fetch add rm mv branch worktree status log diff show".split()
    )
}
_GIT_SUBCATEGORY: dict[str, str] = {}
for _sub, _names in (
    ("git.commit", "commit"),
    ("git.push", "push"),
    ("git.sync", "pull fetch clone"),
    ("git.integrate", "merge rebase cherry-pick am"),
    ("git.undo", "revert reset restore clean"),
    ("git.branch", "checkout switch branch worktree tag"),
    ("git.stash", "stash"),
    ("git.stage", "add rm mv"),
    (
        "git.inspect",
        "status log diff show blame grep shortlog describe rev-parse ls-files reflog rev-list "
        "show-ref cat-file whatchanged",
    ),
):
    for _name in _names.split():
        _GIT_SUBCATEGORY[_name] = _sub
_GIT_ARG_FLAGS = frozenset("-C -c --git-dir --work-tree --namespace --config-env --super-prefix".split())

_SHELLS = frozenset("bash sh zsh dash fish ksh".split())
_SHELL_WORDS = frozenset("{ } ( ) ! if then else elif do while until fi done esac".split())
_LOOP_HEADERS = frozenset("for case select function".split())
_WRAPPER_FLAGS: dict[str, frozenset[str]] = {
    "sudo": frozenset("-u -g -h -p -C -D -r -t -U -T --user --group --host --prompt --chdir".split()),
    "doas": frozenset("-u -C".split()),
    "env": frozenset("-u -C --unset --chdir".split()),
    "time": frozenset("-o -f --output --format".split()),
    "nohup": frozenset(),
    "exec": frozenset("-a".split()),
    "command": frozenset(),
    "builtin": frozenset(),
    "nice": frozenset("-n --adjustment".split()),
    "timeout": frozenset("-s -k --signal --kill-after".split()),
    "xargs": frozenset("-n -I -P -L -d -E -s -a --max-args --replace --max-procs --delimiter --arg-file".split()),
    "watch": frozenset("-n --interval".split()),
    "stdbuf": frozenset("-i -o -e".split()),
}

_JS_PMS = frozenset("npm pnpm yarn bun".split())
_JS_RUNNERS = frozenset("npx bunx pnpx uvx".split())
_JS_INSTALL = frozenset("install i ci add remove rm uninstall un update up upgrade link dedupe prune".split())
_JS_QUERY = frozenset(
    ("audit", "outdated", "ls", "list", "view", "info", "show", "why", "explain", "config", "cache", "whoami", "version", "init", "create", "pack", "doctor", "help", "search", "login", "logout")
)
_NO_FLAGS: frozenset[str] = frozenset()
_DOCKER_VALUE_FLAGS = frozenset("-H --host --context -c --config -f --file -p --project-name".split())
_NODE_VALUE_FLAGS = frozenset("-r --require --import --loader".split())
_RUNNER_VALUE_FLAGS = frozenset("-p --package --from --with --python".split())
_JS_VALUE_FLAGS = frozenset("--prefix -C --dir --filter -F --cwd -w --workspace".split())
_LINT_SCRIPTS = ("lint", "format", "fmt", "prettier", "eslint", "stylelint", "check-format")

_BUILD_TOOLS: dict[str, str] = {}
for _sub, _names in (
    ("build.native", "make gmake cmake ninja meson bazel bazelisk scons"),
    ("build.js", "tsc webpack esbuild rollup tsup parcel"),
    ("build.jvm", "gradle gradlew mvn mvnw ant sbt"),
    ("build.apple", "xcodebuild xcodegen"),
):
    for _name in _names.split():
        _BUILD_TOOLS[_name] = _sub
_BUILD_TARGET_TOOLS = frozenset("make gmake ninja bazel bazelisk gradle gradlew mvn mvnw ant sbt xcodebuild".split())
_BUILD_VALUE_FLAGS = frozenset("-C -f -o -W -I -p -P -D -scheme -project -workspace -destination -configuration -sdk --file --directory".split())

_TEST_RUNNERS = frozenset(
    ("jest", "vitest", "pytest", "py.test", "mocha", "rspec", "phpunit", "playwright", "cypress", "ava", "karma", "tox", "nox", "nose2", "ctest", "bats", "jasmine", "unittest")
)
_E2E = frozenset("playwright cypress".split())

_PKG_MANAGERS = frozenset(
    ("pip", "pip3", "uv", "poetry", "brew", "apt", "apt-get", "gem", "composer", "conda", "pipx", "pipenv", "mamba", "micromamba", "dnf", "yum", "apk", "pacman", "port", "bundle", "bundler")
)
_PKG_INSTALL = frozenset(
    ("install", "i", "add", "remove", "rm", "uninstall", "un", "update", "upgrade", "up", "sync", "lock", "require", "reinstall", "ci", "link", "download", "create", "tap", "inject")
)
_PKG_RUNNERS = frozenset("run exec".split())
_PKG_VALUE_FLAGS = frozenset(
    ("--with", "--python", "-p", "--from", "--directory", "--project", "--extra", "--group", "--env-file", "-n", "--name", "--prefix", "--index-url", "-i", "--package")
)

_INTERPRETERS = frozenset("node python deno ruby php java ts-node tsx perl rails flask uvicorn gunicorn hypercorn".split())
_SERVERS = frozenset("uvicorn gunicorn hypercorn flask".split())
_PY_VALUE_FLAGS = frozenset("-W -X -Q".split())

_NETWORK: dict[str, str] = {}
for _sub, _names in (
    ("net.http", "curl wget http https xh"),
    ("net.remote", "ssh scp rsync sftp ftp telnet nc ncat ping dig nslookup host traceroute mosh"),
    ("net.github", "gh"),
    ("infra.k8s", "kubectl helm"),
    ("infra.cloud", "aws gcloud az vercel firebase supabase netlify fly flyctl heroku wrangler doctl terraform"),
):
    for _name in _names.split():
        _NETWORK[_name] = _sub

_FS: dict[str, str] = {}
for _sub, _names in (
    (
        "fs.read",
        "cat head tail less more bat wc stat file xxd od hexdump nl strings jq yq sort uniq cut tr "
        "diff cmp comm paste column awk gawk md5sum sha256sum shasum sed",
    ),
    ("fs.search", "grep egrep fgrep rg ag ack find fd locate"),
    ("fs.list", "ls tree du df pwd realpath readlink dirname basename"),
    ("fs.write", "cp mv rm mkdir rmdir touch chmod chown ln tee truncate dd patch sd"),
    ("fs.nav", "cd pushd popd"),
    ("fs.archive", "tar zip unzip gzip gunzip bzip2 xz 7z"),
):
    for _name in _names.split():
        _FS[_name] = _sub

_LINTERS = frozenset(
    ("ruff", "black", "isort", "flake8", "pylint", "mypy", "pyright", "eslint", "prettier", "biome", "stylelint", "shellcheck", "rubocop", "gofmt", "golangci-lint", "rustfmt", "clang-format", "swiftlint", "ktlint", "pre-commit")
)
_BUILTINS = frozenset(
    ("echo", "printf", "export", "set", "unset", "source", ".", "alias", "true", "false", ":", "exit", "return", "sleep", "wait", "trap", "which", "type", "read", "let", "declare", "local", "shift", "test", "[", "[[", "ulimit", "umask", "history", "clear", "cls")
)
_SCRIPT_EXTS = (".sh", ".bash", ".zsh", ".py", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".php")
_EXE_EXTS = (".exe", ".cmd", ".bat")


def _program(word: str) -> str:
    """Normalised program name: basename, lower case, no ``.exe``, ``python3.12`` → ``python``."""
    name = word.strip()
    cut = max(name.rfind("/"), name.rfind("\\"))
    if cut >= 0:
        name = name[cut + 1 :]
    name = name.lower()
    if name.endswith(_EXE_EXTS):
        name = name[:-4]
    for base in ("python", "pip"):
        if name.startswith(base) and name != base:
            rest = name[len(base) :]
            if rest and all(ch in "0123456789." for ch in rest):
                return base
    return name


def _is_assignment(word: str) -> bool:
    eq = word.find("=")
    if eq <= 0:
        return False
    name = word[:eq]
    if name.endswith("+"):
        name = name[:-1]
    if not name or not (name[0].isascii() and (name[0].isalpha() or name[0] == "_")):
        return False
    return all(ch.isascii() and (ch.isalnum() or ch == "_") for ch in name)


def _positionals(args: list[str], value_flags: frozenset[str]) -> list[str]:
    """Arguments that are not flags (nor values of ``value_flags``), up to a ``--``."""
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            out.extend(args[i + 1 :])
            break
        if a.startswith("-") and len(a) > 1:
            i += 2 if a in value_flags else 1
            continue
        out.append(a)
        i += 1
    return out


def _rest_after_flags(args: list[str], value_flags: frozenset[str]) -> list[str]:
    """``args`` from the first non-flag argument on."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return args[i + 1 :]
        if a.startswith("-") and len(a) > 1:
            i += 2 if a in value_flags else 1
            continue
        return args[i:]
    return []


def _is_test_target(target: str) -> bool:
    """``test``, ``tests``, ``check``, ``test-unit``, ``unit_test``, ``:app:test``, ``integrationTest``."""
    t = target.lower()
    if t in ("test", "tests", "check"):
        return True
    if t.startswith(("test-", "test_", "test:", "tests-", "tests_")):
        return True
    if t.endswith(("-test", "_test", "-tests", "_tests", ":test")):
        return True
    return len(target) > 4 and target.endswith(("Test", "Tests"))


def _git(args: list[str]) -> _Result:
    i = 0
    sub: str | None = None
    while i < len(args):
        a = args[i]
        if a in _GIT_ARG_FLAGS:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        sub = a
        break
    return "git", _GIT_SUBCATEGORY.get(sub, "git.other") if sub else "git.other", sub


def _js_script(name: str | None) -> _Result:
    if name is None:
        return "run", "pkg.run", None
    n = name.lower()
    if n.startswith("test") or ":test" in n:
        return "test", "pkg.test", None
    if n.startswith("build") or n.endswith(":build"):
        return "build", "pkg.build", None
    if n.startswith(_LINT_SCRIPTS) or n.endswith((":lint", ":format", ":fmt")):
        return "other", "pkg.lint", None
    return "run", "pkg.run", None


def _js_pm(prog: str, args: list[str], depth: int) -> _Result:
    pos = _positionals(args, _JS_VALUE_FLAGS)
    if not pos:
        return "install", "pkg.install", None
    sub = pos[0].lower()
    if sub in _JS_INSTALL:
        return "install", "pkg.install", None
    if sub in ("test", "t", "tst"):
        return "test", "pkg.test", None
    if sub in ("exec", "dlx", "x"):
        at = args.index(pos[0])
        rest = _rest_after_flags(args[at + 1 :], _JS_VALUE_FLAGS)
        return _classify_words(rest, depth + 1) or ("run", "pkg.run", None)
    if sub in ("run", "run-script"):
        return _js_script(pos[1] if len(pos) > 1 else None)
    if sub == "publish":
        return "network", "pkg.publish", None
    if sub in _JS_QUERY:
        return "other", "pkg.other", None
    return _js_script(pos[0])


def _pkg_manager(prog: str, args: list[str], depth: int) -> _Result:
    pos = _positionals(args, _PKG_VALUE_FLAGS)
    sub = pos[0].lower() if pos else ""
    if prog == "pacman":
        first = args[0] if args else ""
        if first.startswith(("-S", "-R", "-U")):
            return "install", "pkg.install", None
        return "other", "pkg.other", None
    if prog == "uv":
        if sub == "pip":
            return _pkg_manager("pip", args[args.index(pos[0]) + 1 :], depth)
        if sub == "tool" and len(pos) > 1:
            sub = pos[1].lower()
            if sub == "run":
                at = args.index(pos[1])
                rest = _rest_after_flags(args[at + 1 :], _PKG_VALUE_FLAGS)
                return _classify_words(rest, depth + 1) or ("run", "pkg.run", None)
        if sub == "python" and len(pos) > 1 and pos[1].lower() in _PKG_INSTALL:
            return "install", "pkg.install", None
    if sub in _PKG_RUNNERS and prog in ("uv", "poetry", "pipenv", "conda", "mamba", "micromamba", "bundle", "bundler", "pipx"):
        at = args.index(pos[0])
        rest = _rest_after_flags(args[at + 1 :], _PKG_VALUE_FLAGS)
        return _classify_words(rest, depth + 1) or ("run", "pkg.run", None)
    if sub in _PKG_INSTALL:
        return "install", "pkg.install", None
    if sub == "build" and prog in ("uv", "poetry"):
        return "build", "pkg.build", None
    if sub == "publish":
        return "network", "pkg.publish", None
    return "other", "pkg.other", None


def _pairs(spec: str) -> dict[str, str]:
    """``"a:x b:y"`` → ``{"a": "x", "b": "y"}``."""
    return dict(item.split(":", 1) for item in spec.split())


_TOOLCHAINS: dict[str, dict[str, str]] = {
    "cargo": _pairs(
        "test:test nextest:test build:build check:build clippy:build doc:build run:run add:install "
        "install:install update:install fetch:install remove:install uninstall:install publish:network"
    ),
    "go": _pairs("test:test build:build vet:build generate:build run:run get:install mod:install install:install"),
    "dotnet": _pairs("test:test build:build publish:build run:run restore:install add:install"),
    "mix": _pairs("test:test build:build compile:build run:run phx.server:run deps.get:install"),
    "swift": _pairs("test:test build:build run:run"),
}
_TOOLCHAIN_SUB = _pairs("test:pkg.test build:pkg.build run:pkg.run install:pkg.install network:pkg.publish")


def _toolchain(prog: str, args: list[str]) -> _Result:
    pos = [a for a in _positionals(args, _NO_FLAGS) if not a.startswith("+")]
    sub = pos[0].lower() if pos else ""
    if prog == "swift" and sub == "package" and len(pos) > 1 and pos[1].lower() in ("resolve", "update"):
        return "install", "pkg.install", None
    category = _TOOLCHAINS[prog].get(sub)
    if category is None:
        if sub in ("fmt", "format"):
            return "other", "pkg.lint", None
        return "other", "pkg.other", None
    return category, _TOOLCHAIN_SUB[category], None


def _docker(prog: str, args: list[str]) -> _Result:
    pos = _positionals(args, _DOCKER_VALUE_FLAGS)
    sub = pos[0].lower() if pos else ""
    if prog == "docker-compose":
        pos = ["compose", *pos]
        sub = "compose"
    if sub == "compose":
        inner = pos[1].lower() if len(pos) > 1 else ""
        if inner == "build":
            return "build", "infra.docker", None
        if inner in ("push", "pull"):
            return "network", "infra.docker", None
        return "run", "infra.docker", None
    if sub in ("build", "buildx"):
        return "build", "infra.docker", None
    if sub in ("run", "exec", "up", "start"):
        return "run", "infra.docker", None
    if sub in ("push", "pull", "login"):
        return "network", "infra.docker", None
    return "other", "infra.docker", None


def _python(args: list[str], depth: int) -> _Result:
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-m" or (a.startswith("-m") and len(a) > 2 and not a.startswith("--")):
            module = args[i + 1] if a == "-m" and i + 1 < len(args) else a[2:]
            rest = args[i + 2 :] if a == "-m" else args[i + 1 :]
            if not module:
                break
            if module == "build":
                return "build", "pkg.build", None
            if module in ("pip", "pip3"):
                return _pkg_manager("pip", rest, depth)
            got = _classify_program(module, rest, depth + 1)
            if got[1] is None:
                return "run", "run.interpreter", None
            return got
        if a == "-c":
            break
        if a.startswith("-") and len(a) > 1:
            i += 2 if a in _PY_VALUE_FLAGS else 1
            continue
        script = _program(a)
        if script.endswith(".py"):
            script = script[:-3]
        if script in _TEST_RUNNERS:
            return "test", "test.runner", None
        if script == "manage" and i + 1 < len(args) and args[i + 1] == "test":
            return "test", "test.runner", None
        break
    return "run", "run.interpreter", None


def _interpreter(prog: str, args: list[str], depth: int) -> _Result:
    if prog == "python":
        return _python(args, depth)
    if prog in _SERVERS:
        return "run", "run.server", None
    if prog == "node":
        if "--test" in args:
            return "test", "test.runner", None
        rest = _rest_after_flags(args, _NODE_VALUE_FLAGS)
        if rest:
            script = _program(rest[0])
            for ext in (".js", ".cjs", ".mjs"):
                if script.endswith(ext):
                    script = script[: -len(ext)]
            if script in _TEST_RUNNERS:
                return "test", "test.runner", None
        return "run", "run.interpreter", None
    if prog == "deno":
        pos = _positionals(args, _NO_FLAGS)
        sub = pos[0].lower() if pos else ""
        if sub == "test":
            return "test", "pkg.test", None
        if sub in ("compile", "bundle"):
            return "build", "pkg.build", None
        if sub in ("install", "add", "cache"):
            return "install", "pkg.install", None
        if sub in ("fmt", "lint"):
            return "other", "pkg.lint", None
        return "run", "run.interpreter", None
    if prog == "rails":
        pos = _positionals(args, _NO_FLAGS)
        sub = pos[0].lower() if pos else ""
        if sub in ("test", "spec"):
            return "test", "test.runner", None
        if sub in ("server", "s"):
            return "run", "run.server", None
        return "run", "run.interpreter", None
    if prog == "php":
        pos = _positionals(args, _NO_FLAGS)
        if pos and _program(pos[0]) == "artisan" and len(pos) > 1 and pos[1] == "test":
            return "test", "test.runner", None
        if pos and _program(pos[0]) == "phpunit":
            return "test", "test.runner", None
    return "run", "run.interpreter", None


def _shell(args: list[str], depth: int) -> _Result:
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
            if i + 1 >= len(args):
                return "run", "run.script", None
            return _classify_line(args[i + 1], depth + 1) or ("run", "run.script", None)
        if a.startswith(("-", "+")) and len(a) > 1:
            i += 1
            continue
        break
    rest = args[i:]
    if not rest:
        return "run", "run.script", None
    return _classify_words(rest, depth + 1) or ("run", "run.script", None)


def _classify_program(word: str, args: list[str], depth: int) -> _Result:
    prog = _program(word)
    if prog == "git":
        return _git(args)
    if depth > _MAX_DEPTH:
        return "other", None, None
    if prog in _SHELLS:
        return _shell(args, depth)
    if prog == "eval":
        return _classify_line(" ".join(args), depth + 1) or ("other", "shell.builtin", None)
    if prog in _JS_PMS:
        return _js_pm(prog, args, depth)
    if prog in _JS_RUNNERS:
        rest = _rest_after_flags(args, _RUNNER_VALUE_FLAGS)
        if not rest:
            return "other", None, None
        head = rest[0]
        at = head.find("@", 1)
        if at > 0:
            head = head[:at]  # npx prettier@3 → prettier
        return _classify_program(head, rest[1:], depth + 1)
    if prog in ("cargo", "go", "swift", "dotnet", "mix"):
        return _toolchain(prog, args)
    if prog in ("docker", "podman", "docker-compose", "nerdctl"):
        return _docker(prog, args)
    if prog in ("vite", "next", "nuxt"):
        pos = _positionals(args, _NO_FLAGS)
        if pos and pos[0] == "build":
            return "build", "build.js", None
        return "run", "run.server", None
    if prog in _BUILD_TOOLS:
        if prog in _BUILD_TARGET_TOOLS:
            for target in _positionals(args, _BUILD_VALUE_FLAGS):
                if _is_test_target(target):
                    return "test", "test.runner", None
        return "build", _BUILD_TOOLS[prog], None
    if prog in _TEST_RUNNERS:
        if prog in _E2E:
            pos = _positionals(args, _NO_FLAGS)
            if pos and pos[0] == "install":
                return "install", "pkg.install", None
            return "test", "test.e2e", None
        return "test", "test.runner", None
    if prog in _PKG_MANAGERS:
        return _pkg_manager(prog, args, depth)
    if prog in _INTERPRETERS:
        return _interpreter(prog, args, depth)
    if prog in _NETWORK:
        return "network", _NETWORK[prog], None
    if prog in _FS:
        sub = _FS[prog]
        if prog == "sed" and any(a.startswith("-i") or a == "--in-place" or a.startswith("--in-place=") for a in args):
            sub = "fs.write"
        return "fs", sub, None
    if prog in _LINTERS:
        return "other", "dev.lint", None
    if prog in _BUILTINS:
        return "other", "shell.builtin", None
    w = word.strip()
    if w.startswith(("./", "../", "~/")) or prog.endswith(_SCRIPT_EXTS):
        return "run", "run.script", None
    return "other", None, None


def _classify_words(words: list[str], depth: int) -> _Result | None:
    """Classify one segment; None when it runs no command (assignments only, ``fi``)."""
    i = 0
    n = len(words)
    while i < n:
        w = words[i]
        if w in _SHELL_WORDS:
            i += 1
            continue
        if w in _LOOP_HEADERS:
            return None
        if _is_assignment(w):
            i += 1
            continue
        prog = _program(w)
        flags = _WRAPPER_FLAGS.get(prog)
        if flags is None:
            break
        if prog == "command" and i + 1 < n and words[i + 1] in ("-v", "-V"):
            return "other", "shell.builtin", None
        i += 1
        while i < n:
            a = words[i]
            if a == "--":
                i += 1
                break
            if a.startswith("-") and len(a) > 1:
                i += 2 if a in flags else 1
                continue
            break
        if prog == "timeout" and i < n:
            i += 1  # the duration
    if i >= n:
        return None
    return _classify_program(words[i], words[i + 1 :], depth)


def _rank(result: _Result) -> tuple[int, int]:
    category, _, sub = result
    git_rank = _GIT_PRIORITY.get(sub, len(_GIT_PRIORITY)) if sub is not None else len(_GIT_PRIORITY) + 1
    return _CATEGORY_RANK.get(category, 7), git_rank if category == "git" else 0


def _classify_line(line: str, depth: int) -> _Result | None:
    best: _Result | None = None
    best_rank = (99, 0)
    for segment in split_command(line):
        got = _classify_words(segment, depth)
        if got is None:
            continue
        rank = _rank(got)
        if rank < best_rank:
            best, best_rank = got, rank
    return best


def command_programs(command: str) -> tuple[str, ...]:
    """The program each segment of a command line runs (normalised names, wrappers
    such as ``sudo``/``timeout``/``env`` skipped, ``python -m x`` as ``x``), in order."""
    out: list[str] = []
    try:
        segments = split_command(command)
    except RecursionError:
        return ()
    for words in segments:
        i = 0
        while i < len(words) and (words[i] in _SHELL_WORDS or _is_assignment(words[i])):
            i += 1
        while i < len(words) and _program(words[i]) in _WRAPPER_FLAGS:
            i += 1
            while i < len(words) and words[i].startswith("-"):
                i += 1
            if i < len(words) and _program(words[i - 1]) == "timeout" or (i < len(words) and words[i][:1].isdigit()):
                i += 1
        if i >= len(words):
            continue
        prog = _program(words[i])
        if prog == "python" and "-m" in words[i + 1 : i + 3]:
            at = words.index("-m", i + 1)
            if at + 1 < len(words):
                prog = _program(words[at + 1])
        if prog in _JS_RUNNERS and i + 1 < len(words):
            prog = _program(words[i + 1].split("@", 1)[0] or words[i + 1])
        if prog not in out:
            out.append(prog)
    return tuple(out)


def classify_command(command: str) -> dict[str, str]:
    """Facts about a shell command line.

    Returns ``{"command_category": <category>}`` plus ``git_subcommand`` when
    the winning segment runs git with a subcommand, and
    ``command_subcategory`` (the dotted taxonomy in the module docstring)
    when one applies. See the module docstring for categories, priority and
    the additions to the reference rules.
    """
    try:
        got = _classify_line(command, 0)
    except RecursionError:  # pathological nesting; stay total
        got = None
    if got is None:
        return {"command_category": "other"}
    category, sub, git_sub = got
    out = {"command_category": category}
    if git_sub:
        out["git_subcommand"] = git_sub
    if sub:
        out["command_subcategory"] = sub
    return out


# --------------------------------------------------------------------------
# Files and edits

_TEST_DIRS = ("/tests/", "/test/", "/__tests__/", "/spec/", "/specs/")
_TEST_MARKS = (".test.", ".spec.", "_test.", "_spec.")
_CONFIG_EXTS = frozenset("json yaml yml toml ini cfg conf env properties plist lock".split())
_CONFIG_NAMES = frozenset(
    ("dockerfile", "makefile", "justfile", "procfile", ".gitignore", ".gitattributes", ".editorconfig", ".npmrc", ".nvmrc", ".dockerignore", "cargo.toml", "package.json")
)
_CONFIG_PREFIXES = (".env", ".eslintrc", ".prettierrc", ".babelrc")
_DOC_EXTS = frozenset("md mdx rst txt adoc".split())
_DOC_STEMS = frozenset("readme changelog license licence contributing authors notice".split())


def file_facts(path: str) -> dict[str, object]:
    """``file_ext`` (lower case, no dot; absent when none), ``file_is_test``,
    ``file_is_config``, ``file_is_doc`` of a path.

    Matching is case-insensitive, ``\\`` counts as ``/``, and a relative path
    is read as if it started with ``/`` (so ``tests/x.py`` is a test).
    ``.gitignore`` has no extension (as ``os.path.splitext``).
    """
    p = "/" + path.replace("\\", "/").lower()
    name = p[p.rfind("/") + 1 :]
    dot = name.rfind(".")
    ext = name[dot + 1 :] if dot > 0 else ""
    stem = name[:dot] if dot > 0 else name
    is_test = any(d in p for d in _TEST_DIRS) or name.startswith("test_") or any(m in name for m in _TEST_MARKS)
    is_config = (
        ext in _CONFIG_EXTS
        or name in _CONFIG_NAMES
        or name.startswith(_CONFIG_PREFIXES)
        or ".config." in name
    )
    is_doc = ext in _DOC_EXTS or stem in _DOC_STEMS
    out: dict[str, object] = {}
    if ext:
        out["file_ext"] = ext
    out["file_is_test"] = is_test
    out["file_is_config"] = is_config
    out["file_is_doc"] = is_doc
    return out


def _line_count(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def edit_line_counts(old: str, new: str) -> tuple[int, int]:
    """``(lines_added, lines_removed)`` of replacing ``old`` by ``new``.

    As the reference: every line of ``new`` is added and every line of
    ``old`` removed (no diff). Lines are ``\\n``-separated; a trailing
    newline does not start another line; the empty string has 0 lines.
    """
    return _line_count(new), _line_count(old)
