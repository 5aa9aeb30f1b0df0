"""Pure classifiers: tool names, failures, shell commands, file paths, edit sizes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentlog.capture.classify import (
    classify_command,
    classify_tool,
    edit_line_counts,
    file_facts,
    split_command,
)

TOOL_CATEGORIES = {"shell", "file_read", "file_write", "file_edit", "search", "web", "mcp", "subagent", "plan", "notebook", "other"}
COMMAND_CATEGORIES = {"git", "test", "build", "install", "network", "run", "fs", "other"}
SUBCATEGORIES = {
    *(f"git.{s}" for s in "commit push sync integrate undo branch stash stage inspect other".split()),
    *(f"pkg.{s}" for s in "install test build run lint publish other".split()),
    "test.runner", "test.e2e", "build.native", "build.js", "build.jvm", "build.apple",
    "infra.docker", "infra.k8s", "infra.cloud", "net.http", "net.remote", "net.github",
    "run.interpreter", "run.server", "run.script",
    *(f"fs.{s}" for s in "read search list write nav archive".split()),
    "dev.lint", "shell.builtin",
}  # fmt: skip


# --------------------------------------------------------------------------
# classify_tool

REFERENCE_TOOLS = {
    "mcp": ["mcp__github__create_issue", "MCP__x__y"],
    "shell": ["bash", "shell", "run_shell_command", "execute", "run_command", "run_terminal_cmd"],
    "file_read": ["read", "read_file", "read_many_files"],
    "file_write": ["write", "write_file", "create_file"],
    "file_edit": ["edit", "multiedit", "replace", "apply_patch", "str_replace", "str_replace_editor", "edit_file"],
    "notebook": ["notebookedit", "notebook_edit"],
    "search": ["glob", "grep", "search_file_content", "list_directory", "ls", "codebase_search", "grep_search", "file_search"],
    "web": ["webfetch", "websearch", "web_fetch", "web_search", "google_web_search"],
    "subagent": ["task", "agent", "spawn_agent"],
    "plan": ["enterplanmode", "exitplanmode", "todowrite", "todo_write", "update_plan"],
    "other": ["", "whatever", "save_memory", "Skill", "AskUserQuestion"],
}


@pytest.mark.parametrize(("category", "name"), [(c, n) for c, names in REFERENCE_TOOLS.items() for n in names])
def test_classify_tool_reference(category: str, name: str) -> None:
    assert classify_tool(name) == category
    assert classify_tool(name.upper()) == category
    assert classify_tool(name.title()) == category


@pytest.mark.parametrize(
    ("name", "category"),
    [
        # Claude Code
        ("Bash", "shell"), ("BashOutput", "shell"), ("KillShell", "shell"), ("Read", "file_read"),
        ("Write", "file_write"), ("Edit", "file_edit"), ("MultiEdit", "file_edit"), ("NotebookEdit", "notebook"),
        ("Glob", "search"), ("Grep", "search"), ("LS", "search"), ("WebFetch", "web"), ("WebSearch", "web"),
        ("Task", "subagent"), ("Agent", "subagent"), ("TaskOutput", "subagent"), ("TaskStop", "subagent"),
        ("TaskCreate", "plan"), ("TaskUpdate", "plan"), ("TaskList", "plan"), ("TaskGet", "plan"),
        ("TodoWrite", "plan"), ("ExitPlanMode", "plan"), ("ListMcpResourcesTool", "mcp"),
        # Cursor
        ("Shell", "shell"), ("Delete", "file_write"), ("delete_file", "file_write"), ("search_replace", "file_edit"),
        ("list_dir", "search"), ("MCP:fetch", "mcp"), ("MCP:", "mcp"), ("UpdateTodos", "plan"),
        # Codex
        ("exec_command", "shell"), ("shell", "shell"), ("local_shell", "shell"), ("container.exec", "shell"),
        ("write_stdin", "shell"), ("apply_patch", "file_edit"), ("update_plan", "plan"), ("view_image", "file_read"),
        # Gemini CLI
        ("run_shell_command", "shell"), ("read_many_files", "file_read"), ("replace", "file_edit"),
        ("write_file", "file_write"), ("glob", "search"), ("search_file_content", "search"),
        ("list_directory", "search"), ("web_fetch", "web"), ("google_web_search", "web"), ("write_todos", "plan"),
        ("delegate_to_agent", "subagent"), ("save_memory", "other"),
        (" Bash ", "shell"),
    ],
)  # fmt: skip
def test_classify_tool_modern_names(name: str, category: str) -> None:
    assert classify_tool(name) == category


@given(st.text(max_size=40))
def test_classify_tool_total(name: str) -> None:
    assert classify_tool(name) in TOOL_CATEGORIES


# --------------------------------------------------------------------------
# split_command


@pytest.mark.parametrize(
    ("line", "segments"),
    [
        ("ls -la", [["ls", "-la"]]),
        ("a && b || c; d | e & f\ng", [["a"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"]]),
        ("echo 'a && b' \"c; d\" e\\ f", [["echo", "a && b", "c; d", "e f"]]),
        ('echo "x \\"y\\" $HOME"', [["echo", 'x "y" $HOME']]),
        ("make 2>&1 | tee log", [["make"], ["tee", "log"]]),
        ("cmd > out.txt 2> err.txt < in.txt", [["cmd"]]),
        ("cmd &> all.log; next", [["cmd"], ["next"]]),
        ("echo $(git rev-parse HEAD) done", [["echo", "$(git rev-parse HEAD)", "done"]]),
        ("echo `date` x", [["echo", "`date`", "x"]]),
        ("(cd x && make)", [["cd", "x"], ["make"]]),
        ("cat <<EOF > f\ngit push\nEOF\necho hi", [["cat"], ["echo", "hi"]]),
        ("cat <<-'END'\n\tgit push\n\tEND\nls", [["cat"], ["ls"]]),
        ("ls # git push", [["ls"]]),
        ("echo 'unbalanced && git push", [["echo", "unbalanced && git push"]]),
        ('echo "unbalanced', [["echo", "unbalanced"]]),
        ("echo a\\\nb", [["echo", "ab"]]),
        ("x=(1 2) y", [["x=(1 2)", "y"]]),
        ("", []),
    ],
)
def test_split_command(line: str, segments: list[list[str]]) -> None:
    assert split_command(line) == segments


# --------------------------------------------------------------------------
# classify_command


def facts(category: str, sub: str | None = None, git: str | None = None) -> dict[str, str]:
    out = {"command_category": category}
    if git:
        out["git_subcommand"] = git
    if sub:
        out["command_subcategory"] = sub
    return out


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        # git, with global options skipped
        ("git status", facts("git", "git.inspect", "status")),
        ("git -C /repo -c core.pager=cat --no-pager log --oneline", facts("git", "git.inspect", "log")),
        ("git --git-dir .git --work-tree . commit -m x", facts("git", "git.commit", "commit")),
        ("git --version", facts("git", "git.other")),
        ("git add -A && git commit -m 'wip' && git push origin main", facts("git", "git.commit", "commit")),
        ("git push && git commit -m x", facts("git", "git.commit", "commit")),
        ("git fetch && git rebase origin/main", facts("git", "git.integrate", "rebase")),
        ("git status; git diff", facts("git", "git.inspect", "status")),
        ("git remote -v", facts("git", "git.other", "remote")),
        ("git stash pop", facts("git", "git.stash", "stash")),
        ("git checkout -b feature", facts("git", "git.branch", "checkout")),
        ("npm test && git commit -am x", facts("git", "git.commit", "commit")),
        # wrappers and assignments
        ("FOO=1 BAR='a b' sudo -u root env X=1 git push", facts("git", "git.push", "push")),
        ("time nohup nice -n 5 make", facts("build", "build.native")),
        ("timeout 60 pytest -x", facts("test", "test.runner")),
        ("exec python app.py", facts("run", "run.interpreter")),
        ("command -v git", facts("other", "shell.builtin")),
        ("FOO=bar", facts("other")),
        # shells recurse
        ("bash -c 'git commit -m x'", facts("git", "git.commit", "commit")),
        ('sh -lc "cd x && npm run build"', facts("build", "pkg.build")),
        ("bash scripts/deploy.sh", facts("run", "run.script")),
        ("bash", facts("run", "run.script")),
        ("zsh -e -o pipefail -c 'pytest'", facts("test", "test.runner")),
        ("eval 'cargo test'", facts("test", "pkg.test")),
        # npm family
        ("npm install", facts("install", "pkg.install")),
        ("npm i -D vitest", facts("install", "pkg.install")),
        ("pnpm add zod", facts("install", "pkg.install")),
        ("yarn", facts("install", "pkg.install")),
        ("bun ci", facts("install", "pkg.install")),
        ("npm test", facts("test", "pkg.test")),
        ("npm t", facts("test", "pkg.test")),
        ("npm run test:unit", facts("test", "pkg.test")),
        ("pnpm run e2e:test", facts("test", "pkg.test")),
        ("yarn test:watch", facts("test", "pkg.test")),
        ("npm run build", facts("build", "pkg.build")),
        ("pnpm build", facts("build", "pkg.build")),
        ("npm run web:build", facts("build", "pkg.build")),
        ("npm run lint", facts("other", "pkg.lint")),
        ("yarn format", facts("other", "pkg.lint")),
        ("npm run dev", facts("run", "pkg.run")),
        ("npm start", facts("run", "pkg.run")),
        ("bun run src/index.ts", facts("run", "pkg.run")),
        ("npm publish", facts("network", "pkg.publish")),
        ("npm audit", facts("other", "pkg.other")),
        ("pnpm --filter web test", facts("test", "pkg.test")),
        ("pnpm exec vitest run", facts("test", "test.runner")),
        ("npx jest --watch", facts("test", "test.runner")),
        ("npx -y tsc --noEmit", facts("build", "build.js")),
        ("npx prettier@3 --write .", facts("other", "dev.lint")),
        ("bunx playwright test", facts("test", "test.e2e")),
        ("npx playwright install", facts("install", "pkg.install")),
        # toolchains
        ("cargo test", facts("test", "pkg.test")),
        ("cargo +nightly nextest run", facts("test", "pkg.test")),
        ("cargo clippy -- -D warnings", facts("build", "pkg.build")),
        ("cargo run --release", facts("run", "pkg.run")),
        ("cargo add serde", facts("install", "pkg.install")),
        ("cargo fmt", facts("other", "pkg.lint")),
        ("go test ./...", facts("test", "pkg.test")),
        ("go vet ./...", facts("build", "pkg.build")),
        ("go run .", facts("run", "pkg.run")),
        ("go mod tidy", facts("install", "pkg.install")),
        ("swift test", facts("test", "pkg.test")),
        ("swift build", facts("build", "pkg.build")),
        ("dotnet run", facts("run", "pkg.run")),
        ("mix test", facts("test", "pkg.test")),
        # docker
        ("docker build -t x .", facts("build", "infra.docker")),
        ("docker run --rm -p 8080:80 nginx", facts("run", "infra.docker")),
        ("docker compose up -d", facts("run", "infra.docker")),
        ("docker push x", facts("network", "infra.docker")),
        ("podman ps", facts("other", "infra.docker")),
        # build tools and test runners
        ("make", facts("build", "build.native")),
        ("make -C sub -j8 all", facts("build", "build.native")),
        ("make test", facts("test", "test.runner")),
        ("make latest", facts("build", "build.native")),
        ("./gradlew :app:test", facts("test", "test.runner")),
        ("./gradlew assembleDebug", facts("build", "build.jvm")),
        ("mvn -q package", facts("build", "build.jvm")),
        ("cmake --build build", facts("build", "build.native")),
        ("tsc -p .", facts("build", "build.js")),
        ("xcodebuild -scheme App build", facts("build", "build.apple")),
        ("xcodebuild -scheme App test", facts("test", "test.runner")),
        ("vite build", facts("build", "build.js")),
        ("pytest -q tests/", facts("test", "test.runner")),
        ("vitest run", facts("test", "test.runner")),
        ("./node_modules/.bin/jest", facts("test", "test.runner")),
        ("cypress run", facts("test", "test.e2e")),
        # package managers
        ("pip install -r requirements.txt", facts("install", "pkg.install")),
        ("pip3.12 install x", facts("install", "pkg.install")),
        ("pip list", facts("other", "pkg.other")),
        ("uv sync", facts("install", "pkg.install")),
        ("uv pip install x", facts("install", "pkg.install")),
        ("uv run pytest -q", facts("test", "test.runner")),
        ("uv run --with rich python x.py", facts("run", "run.interpreter")),
        ("uvx ruff check", facts("other", "dev.lint")),
        ("poetry run python -m pytest", facts("test", "test.runner")),
        ("poetry install", facts("install", "pkg.install")),
        ("brew install jq", facts("install", "pkg.install")),
        ("sudo apt-get install -y git", facts("install", "pkg.install")),
        ("bundle exec rspec", facts("test", "test.runner")),
        ("conda run -n env pytest", facts("test", "test.runner")),
        ("pacman -Syu", facts("install", "pkg.install")),
        # interpreters
        ("python -m pytest -x", facts("test", "test.runner")),
        ("python3 -m unittest discover", facts("test", "test.runner")),
        ("python -m pip install x", facts("install", "pkg.install")),
        ("python -m http.server", facts("run", "run.interpreter")),
        ("python -m mypy src", facts("other", "dev.lint")),
        ("python -m build", facts("build", "pkg.build")),
        ("python script.py --flag", facts("run", "run.interpreter")),
        ("python -c 'print(1)'", facts("run", "run.interpreter")),
        ("python manage.py test", facts("test", "test.runner")),
        ("/usr/bin/python3.11 x.py", facts("run", "run.interpreter")),
        ("node --test", facts("test", "test.runner")),
        ("node server.js", facts("run", "run.interpreter")),
        ("deno test", facts("test", "pkg.test")),
        ("uvicorn app:app --reload", facts("run", "run.server")),
        ("rails server", facts("run", "run.server")),
        ("tsx src/main.ts", facts("run", "run.interpreter")),
        # network
        ("curl -s https://example.com | jq .", facts("network", "net.http")),
        ("wget -q x", facts("network", "net.http")),
        ("ssh host uptime", facts("network", "net.remote")),
        ("gh pr create --fill", facts("network", "net.github")),
        ("kubectl get pods", facts("network", "infra.k8s")),
        ("aws s3 ls", facts("network", "infra.cloud")),
        # filesystem
        ("ls -la", facts("fs", "fs.list")),
        ("cat README.md", facts("fs", "fs.read")),
        ("rg -n TODO src", facts("fs", "fs.search")),
        ("find . -name '*.py' | xargs grep foo", facts("fs", "fs.search")),
        ("sed -n 1,10p x", facts("fs", "fs.read")),
        ("sed -i 's/a/b/' x", facts("fs", "fs.write")),
        ("mkdir -p a/b && touch a/b/c", facts("fs", "fs.write")),
        ("cd src", facts("fs", "fs.nav")),
        ("tar xzf a.tgz", facts("fs", "fs.archive")),
        # scripts
        ("./run.sh", facts("run", "run.script")),
        ("scripts/setup.sh --fast", facts("run", "run.script")),
        ("../bin/tool", facts("run", "run.script")),
        ("tool.py", facts("run", "run.script")),
        # other
        ("echo hello", facts("other", "shell.builtin")),
        ("ruff check .", facts("other", "dev.lint")),
        ("frobnicate --all", facts("other")),
        ("", facts("other")),
        ("   ", facts("other")),
        # priority across segments
        ("cd app && npm ci && npm test", facts("test", "pkg.test")),
        ("npm run build && npm test", facts("test", "pkg.test")),
        ("ls && curl x", facts("network", "net.http")),
        ("cat x | python y.py", facts("run", "run.interpreter")),
        ("npm install && npm run build", facts("build", "pkg.build")),
        # quoting, heredocs and comments do not leak commands
        ("echo 'git push'", facts("other", "shell.builtin")),
        ("cat <<EOF > notes.md\ngit push --force\nEOF", facts("fs", "fs.read")),
        ("ls # && git push", facts("fs", "fs.list")),
        ('git commit -m "$(cat <<\'EOF\'\nDon\'t panic\nEOF\n)"', facts("git", "git.commit", "commit")),
        ("for f in *.py; do python $f; done", facts("run", "run.interpreter")),
        ("if [ -f x ]; then make test; fi", facts("test", "test.runner")),
    ],
)
def test_classify_command(command: str, expected: dict[str, str]) -> None:
    assert classify_command(command) == expected


SHELLISH = st.lists(
    st.sampled_from(
        [
            "git", "commit", "push", "-C", "-c", "npm", "test", "run", "build", "bash", "sh", "-c", "'", '"', "\\",
            "$(", ")", "(", "`", "&&", "||", "|", "&", ";", "\n", "<<", "EOF", "<<-", ">", "2>&1", "#", " ", "=",
            "FOO=1", "sudo", "env", "timeout", "xargs", "npx", "uv", "python", "-m", "pytest", "docker", "compose",
            "make", "./x.sh", "cargo", "go", "{", "}", "\t", "é", "\ud800",
        ]
    ),
    max_size=40,
).map(" ".join)  # fmt: skip


@settings(max_examples=500)
@given(st.one_of(SHELLISH, st.text(max_size=300)))
def test_classify_command_total(command: str) -> None:
    out = classify_command(command)
    assert out["command_category"] in COMMAND_CATEGORIES
    assert set(out) <= {"command_category", "git_subcommand", "command_subcategory"}
    if "command_subcategory" in out:
        assert out["command_subcategory"] in SUBCATEGORIES
    if "git_subcommand" in out:
        assert out["command_category"] == "git"
    assert all(isinstance(v, str) and v for v in out.values())


def test_classify_command_deep_nesting_is_total() -> None:
    deep = "bash -c " * 200 + "git push"
    assert classify_command(deep)["command_category"] in COMMAND_CATEGORIES
    assert classify_command("$(" * 5000)["command_category"] in COMMAND_CATEGORIES
    assert classify_command('"$(' * 3000)["command_category"] in COMMAND_CATEGORIES


# --------------------------------------------------------------------------
# file_facts


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("src/components/Button.tsx", {"file_ext": "tsx", "file_is_test": False, "file_is_config": False, "file_is_doc": False}),
        ("/repo/tests/unit/x.py", {"file_ext": "py", "file_is_test": True, "file_is_config": False, "file_is_doc": False}),
        ("tests/x.py", {"file_ext": "py", "file_is_test": True, "file_is_config": False, "file_is_doc": False}),
        ("src/__tests__/a.js", {"file_ext": "js", "file_is_test": True, "file_is_config": False, "file_is_doc": False}),
        ("spec/models/user_spec.rb", {"file_ext": "rb", "file_is_test": True, "file_is_config": False, "file_is_doc": False}),
        ("src/test_utils.py", {"file_ext": "py", "file_is_test": True, "file_is_config": False, "file_is_doc": False}),
        ("app/Button.test.tsx", {"file_ext": "tsx", "file_is_test": True, "file_is_config": False, "file_is_doc": False}),
        ("pkg/server_test.go", {"file_ext": "go", "file_is_test": True, "file_is_config": False, "file_is_doc": False}),
        ("src/contest.py", {"file_ext": "py", "file_is_test": False, "file_is_config": False, "file_is_doc": False}),
        ("package.json", {"file_ext": "json", "file_is_test": False, "file_is_config": True, "file_is_doc": False}),
        ("Cargo.lock", {"file_ext": "lock", "file_is_test": False, "file_is_config": True, "file_is_doc": False}),
        ("Dockerfile", {"file_is_test": False, "file_is_config": True, "file_is_doc": False}),
        ("Makefile", {"file_is_test": False, "file_is_config": True, "file_is_doc": False}),
        (".gitignore", {"file_is_test": False, "file_is_config": True, "file_is_doc": False}),
        (".env", {"file_is_test": False, "file_is_config": True, "file_is_doc": False}),
        (".env.local", {"file_ext": "local", "file_is_test": False, "file_is_config": True, "file_is_doc": False}),
        ("vite.config.ts", {"file_ext": "ts", "file_is_test": False, "file_is_config": True, "file_is_doc": False}),
        (".eslintrc.cjs", {"file_ext": "cjs", "file_is_test": False, "file_is_config": True, "file_is_doc": False}),
        (".prettierrc", {"file_is_test": False, "file_is_config": True, "file_is_doc": False}),
        ("README.md", {"file_ext": "md", "file_is_test": False, "file_is_config": False, "file_is_doc": True}),
        ("LICENSE", {"file_is_test": False, "file_is_config": False, "file_is_doc": True}),
        ("docs/guide.RST", {"file_ext": "rst", "file_is_test": False, "file_is_config": False, "file_is_doc": True}),
        ("CHANGELOG", {"file_is_test": False, "file_is_config": False, "file_is_doc": True}),
        ("C:\\repo\\tests\\x.py", {"file_ext": "py", "file_is_test": True, "file_is_config": False, "file_is_doc": False}),
        ("archive.tar.gz", {"file_ext": "gz", "file_is_test": False, "file_is_config": False, "file_is_doc": False}),
        ("noext.", {"file_is_test": False, "file_is_config": False, "file_is_doc": False}),
        ("dir/", {"file_is_test": False, "file_is_config": False, "file_is_doc": False}),
        ("", {"file_is_test": False, "file_is_config": False, "file_is_doc": False}),
    ],
)
def test_file_facts(path: str, expected: dict[str, object]) -> None:
    assert file_facts(path) == expected


@given(st.text(max_size=80))
def test_file_facts_total(path: str) -> None:
    out = file_facts(path)
    assert {"file_is_test", "file_is_config", "file_is_doc"} <= set(out)
    ext = out.get("file_ext")
    assert ext is None or (isinstance(ext, str) and ext and "." not in ext and "/" not in ext and ext == ext.lower())


# --------------------------------------------------------------------------
# edit_line_counts


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("", "", (0, 0)),
        ("a", "", (0, 1)),
        ("", "a", (1, 0)),
        ("a", "b\nc\nd\ne", (4, 1)),
        ("a\n", "b\nc\n", (2, 1)),
        ("\n", "\n\n", (2, 1)),
        ("a\r\nb", "x", (1, 2)),
    ],
)
def test_edit_line_counts(old: str, new: str, expected: tuple[int, int]) -> None:
    assert edit_line_counts(old, new) == expected


@given(st.text(max_size=100), st.text(max_size=100))
def test_edit_line_counts_matches_line_split(old: str, new: str) -> None:
    def lines(s: str) -> int:
        parts = s.split("\n")
        if parts and parts[-1] == "":
            parts.pop()
        return len(parts)

    assert edit_line_counts(old, new) == (lines(new), lines(old))
