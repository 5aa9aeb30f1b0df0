"""Secret redaction: rule tables, a regex reference for provider tokens, and properties."""

from __future__ import annotations

import random
import re
import string
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentlog.capture.redact import RULES, redact_text, redact_value

ALNUM = string.ascii_letters + string.digits
UPPER_DIGIT = string.ascii_uppercase + string.digits
B64URL = ALNUM + "-_"


def rand(rng: random.Random, chars: str, n: int) -> str:
    return "".join(rng.choice(chars) for _ in range(n))


# --------------------------------------------------------------------------
# Canaries: one generator per rule. ``secret`` is the part that must vanish.


def canaries(rng: random.Random) -> list[tuple[str, str, str]]:
    """(rule, text to embed, secret part that must not survive)."""
    out: list[tuple[str, str, str]] = []

    def tok(rule: str, value: str) -> None:
        out.append((rule, value, value))

    tok("aws_access_key", rng.choice(["AKIA", "ASIA"]) + rand(rng, UPPER_DIGIT, 16))
    tok("github_token", rng.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + rand(rng, ALNUM, 36))
    tok("github_token", "github_pat_" + rand(rng, ALNUM + "_", 22))
    tok("slack_token", rng.choice(["xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-"]) + rand(rng, ALNUM + "-", 10))
    tok("google_api_key", "AIza" + rand(rng, B64URL, 35))
    tok("stripe_key", rng.choice(["sk_live_", "sk_test_", "rk_live_", "rk_test_"]) + rand(rng, ALNUM, 20))
    tok("anthropic_key", "sk-ant-" + rand(rng, B64URL, 20))
    tok("openai_key", rng.choice(["sk-proj-", "sk-svcacct-", "sk-admin-"]) + rand(rng, B64URL, 20))
    tok("openai_key", "sk-" + rand(rng, ALNUM, 48))
    tok("npm_token", "npm_" + rand(rng, ALNUM, 36))
    tok("supabase_token", "sbp_" + rand(rng, ALNUM, 20))
    tok("vercel_token", "vercel_" + rand(rng, ALNUM, 20))
    tok("gitlab_token", "glpat-" + rand(rng, B64URL, 20))
    tok("huggingface_token", "hf_" + rand(rng, ALNUM, 30))
    tok("sendgrid_key", "SG." + rand(rng, B64URL, 22) + "." + rand(rng, B64URL, 43))
    tok("jwt", "eyJ" + rand(rng, B64URL, 7) + ".eyJ" + rand(rng, B64URL, 7) + "." + rand(rng, B64URL, 10))
    body = "\n".join(rand(rng, ALNUM + "+/", 64) for _ in range(3))
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY", "EC PRIVATE KEY"])
    out.append(("private_key", f"-----BEGIN {label}-----\n{body}\n-----END {label}-----", body))
    # values: letters a-h and digits cannot spell a keyword, and always hold a letter
    value = rng.choice("abcdefgh") + rand(rng, "abcdefgh0123456789ABCDEFGH", 11)
    key = rng.choice(["password", "DB_PASSWORD", "passwd", "Passphrase", "pgpassword"])
    sep = rng.choice(["=", ": ", " = ", ":=", "=>"])
    quote = rng.choice(["", '"', "'"])
    out.append(("password_assignment", f"{key}{sep}{quote}{value}{quote}", value))
    key = rng.choice(["token", "GITHUB_TOKEN", "api_key", "ApiKey", "client_secret", "AWS_SECRET_ACCESS_KEY", "x-access-key"])
    out.append(("secret_assignment", f"{key}{sep}{quote}{value}{quote}", value))
    out.append(("secret_assignment", f'"{key}": "{value}"', value))
    out.append(("password_assignment", f"--password {value}", value))
    out.append(("authorization_header", f"Authorization: {rng.choice(['Bearer', 'Basic', 'token'])} {value}", value))
    out.append(("authorization_header", f"X-Api-Key: {value}", value))
    out.append(("url_credentials", f"https://user:{value}@example.com/x", value))
    return out


CANARY_RULES = {rule for rule, _, _ in canaries(random.Random(0))}


def test_canary_generators_cover_every_rule() -> None:
    assert CANARY_RULES == set(RULES)


@pytest.mark.parametrize("seed", range(40))
def test_each_canary_alone(seed: int) -> None:
    for rule, text, secret in canaries(random.Random(seed)):
        out, counts = redact_text(text)
        assert secret not in out, (rule, text, out)
        assert counts.get(rule, 0) >= 1, (rule, text, out, counts)


# Random text around the canaries: printable ASCII, some unicode, separators.
FILLER = st.text(
    st.one_of(
        st.sampled_from(list(string.printable)),
        st.characters(exclude_categories=("Cs",)),
        st.sampled_from(["\ud800", "\udfff", "é", "—", "日"]),
    ),
    max_size=60,
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(before=FILLER, after=FILLER, seed=st.integers(0, 2**32), sep=st.sampled_from([" ", "\n", "(", '"', "=", "\t", ",", "/"]))
def test_canary_never_survives(before: str, after: str, seed: int, sep: str) -> None:
    for rule, text, secret in canaries(random.Random(seed)):
        if rule.endswith(("_assignment", "_header")) or rule == "url_credentials":
            joiner = " " if sep in "=/" else sep  # a key needs a key boundary
        else:
            joiner = sep
        full = before + joiner + text + " " + after
        out, _ = redact_text(full)
        assert secret not in out, (rule, full, out)


# --------------------------------------------------------------------------
# Tables


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("export GITHUB_TOKEN=ghp_" + "a" * 36, "export GITHUB_TOKEN=[REDACTED:github_token]"),
        ("DB_PASSWORD=hunter22 psql", "DB_PASSWORD=[REDACTED:password_assignment] psql"),
        ('{"password": "s3cr3t!!", "user": "bob"}', '{"password": "[REDACTED:password_assignment]", "user": "bob"}'),
        ('{\\"password\\": \\"s3cr3t!!\\"}', '{\\"password\\": \\"[REDACTED:password_assignment]\\"}'),
        ('"password": "a\\"bcdef"', '"password": "[REDACTED:password_assignment]"'),
        ("spring.datasource.password=topsecret", "spring.datasource.password=[REDACTED:password_assignment]"),
        ("mysql --password hunter22 -u root", "mysql --password [REDACTED:password_assignment] -u root"),
        ("mysql --password=hunter22", "mysql --password=[REDACTED:password_assignment]"),
        ("client_secret: abc123def", "client_secret: [REDACTED:secret_assignment]"),
        ("?access_token=abcd1234&page=2", "?access_token=[REDACTED:secret_assignment]&page=2"),
        ("$api_key = 'k-12345678';", "$api_key = '[REDACTED:secret_assignment]';"),
        ('curl -H "Authorization: Bearer abcdef123456" https://x', 'curl -H "Authorization: Bearer [REDACTED:authorization_header]" https://x'),
        ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic [REDACTED:authorization_header]"),
        ("authorization: abcdef123456", "authorization: [REDACTED:authorization_header]"),
        ('"Authorization": "token abcdef123456"', '"Authorization": "token [REDACTED:authorization_header]"'),
        ("X-Api-Key: abcd1234efgh", "X-Api-Key: [REDACTED:authorization_header]"),
        ("git clone https://user:pa55word@github.com/x.git", "git clone https://user:[REDACTED:url_credentials]@github.com/x.git"),
        ("redis://:p@ss@cache:6379", "redis://:[REDACTED:url_credentials]@cache:6379"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIabc\n-----END RSA PRIVATE KEY-----\nafter", "[REDACTED:private_key]\nafter"),
        ("x -----BEGIN OPENSSH PRIVATE KEY-----\nunterminated\nmore", "x [REDACTED:private_key]"),
        ("key AKIAABCDEFGHIJKLMNOP end", "key [REDACTED:aws_access_key] end"),
        ("AKIAABCDEFGHIJKLMNOPghp_" + "b" * 36, "[REDACTED:aws_access_key][REDACTED:github_token]"),
        ("tokenghp_" + "b" * 36, "tokenghp_" + "b" * 36),  # not at a word start
        ("xsk-" + "a" * 48, "xsk-" + "a" * 48),
        ("ghp_" + "a" * 35, "ghp_" + "a" * 35),  # too short
        ("pk_live_" + "a" * 30, "pk_live_" + "a" * 30),  # publishable keys are public
    ],
)
def test_redaction_table(text: str, expected: str) -> None:
    assert redact_text(text)[0] == expected


@pytest.mark.parametrize(
    "text",
    [
        "password=args.password",
        "password = os.environ['DB_PASSWORD']",
        "api_key=get_api_key()",
        "token=None api_key=${KEY} secret=<your-secret> password=$PASS",
        "password: ********",
        "password=[REDACTED:password_assignment]",
        "password: str",
        "token: Optional[str] = None",
        "password: string;",
        'password="{password}"',
        "password={{ vault_password }}",
        "password=abc",
        "max_tokens=4096 tokenizer=x password_hash=abc12345 token_type=bearer",
        "max_token=4096",
        "postgres://app:$PGPASS@db/x",
        "postgres://app@db/x",
        "pwd=/home/user -p hunter22",
        "Authorization: Bearer $TOKEN",
        "if password == self.password:",
        "Secret::new(x)",
        "The password: see docs",
        "const apiKey = process.env.API_KEY;",
        "const token = await getToken();",
        "self.api_key = api_key",
        '"token": token,',
    ],
)
def test_not_secrets(text: str) -> None:
    out, counts = redact_text(text)
    assert out is text and counts == {}, out


def test_counts_per_rule() -> None:
    text = "a=1 password=hunter22 token=abcdef12 AKIAABCDEFGHIJKLMNOP AKIAABCDEFGHIJKLMNOQ"
    out, counts = redact_text(text)
    assert counts == {"password_assignment": 1, "secret_assignment": 1, "aws_access_key": 2}
    assert out.count("[REDACTED:") == 4


def test_overlap_keeps_the_specific_rule() -> None:
    out, counts = redact_text('token="ghp_' + "c" * 36 + '"')
    assert out == 'token="[REDACTED:github_token]"'
    assert counts == {"github_token": 1}


def test_non_ascii_and_surrogates_pass_through() -> None:
    text = "Größe \ud800 日本 password=geheim123 \udfff ✓"
    out, counts = redact_text(text)
    assert out == "Größe \ud800 日本 password=[REDACTED:password_assignment] \udfff ✓"
    assert counts == {"password_assignment": 1}


def test_same_object_when_nothing_matched() -> None:
    text = "nothing to see here, just words: and some = signs"
    assert redact_text(text)[0] is text


# --------------------------------------------------------------------------
# Reference matcher for provider tokens (regex, tests only)

_B = r"(?<![A-Za-z0-9_])"
REFERENCE = re.compile(
    _B
    + r"(?:"
    + r"|".join(
        [
            r"(?:AKIA|ASIA)[A-Z0-9]{16}",
            r"gh[pousr]_[A-Za-z0-9]{36}",
            r"github_pat_[A-Za-z0-9_]{22}",
            r"xox[bpars]-[A-Za-z0-9-]{10}",
            r"AIza[A-Za-z0-9_-]{35}",
            r"[sr]k_(?:live|test)_[A-Za-z0-9]{20}",
            r"sk-ant-[A-Za-z0-9_-]{20}",
            r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20}",
            r"sk-[A-Za-z0-9]{48}",
            r"npm_[A-Za-z0-9]{36}",
            r"sbp_[A-Za-z0-9]{20}",
            r"vercel_[A-Za-z0-9]{20}",
            r"glpat-[A-Za-z0-9_-]{20}",
            r"hf_[A-Za-z0-9]{30}",
            r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16}",
            r"eyJ[A-Za-z0-9_-]{7,}\.eyJ[A-Za-z0-9_-]{7,}\.[A-Za-z0-9_-]{10}",
            r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----",
        ]
    )
    + r")"
)

# Fragments that make collisions between rules likely.
FRAGMENTS = st.sampled_from(
    [
        "AKIA", "ASIA", "ghp_", "gho_", "github_pat_", "xoxb-", "AIza", "sk_live_", "rk_test_", "sk-", "sk-ant-",
        "sk-proj-", "npm_", "sbp_", "vercel_", "glpat-", "hf_", "SG.", "eyJ", ".eyJ", "-----BEGIN ", "PRIVATE KEY-----",
        "-----END ", "://", "@", ":", "=", "==", ":=", "=>", '"', "'", "\\", "`", " ", "\n", "\t", "--", "-", "_", ".",
        "password", "PASSWORD", "passwd", "token", "Token", "secret", "api_key", "api-key", "X-Api-Key",
        "Authorization", "Bearer ", "user", "$", "${X}", "<x>", "[REDACTED:jwt]", "(", ")", "[", "]", "{", "}", ",", ";",
        "&", "*", "\ud800", "é", "日", "0", "9",
        "ABCDEFGHIJKLMNOP", "abcdefghijklmnopqrstuvwxyz0123456789", "Zz09Zz09Zz09Zz09Zz09",
        "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0",
    ]
)  # fmt: skip
TRICKY = st.lists(FRAGMENTS, max_size=40).map("".join)


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(TRICKY)
def test_no_reference_token_survives(text: str) -> None:
    out, _ = redact_text(text)
    left = REFERENCE.search(out)
    assert left is None, (text, out, left)


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(TRICKY, st.text(max_size=200)))
def test_idempotent(text: str) -> None:
    once, _ = redact_text(text)
    twice, counts = redact_text(once)
    assert twice == once, (text, once, twice)
    assert counts == {}


@settings(max_examples=300)
@given(st.text(st.characters(exclude_categories=()), max_size=300))
def test_never_raises(text: str) -> None:
    out, counts = redact_text(text)
    assert isinstance(out, str)
    assert all(isinstance(k, str) and v > 0 for k, v in counts.items())


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FRAGMENTS, max_size=60).map("".join))
def test_counts_match_markers(text: str) -> None:
    assume("[REDACTED:" not in text)
    out, counts = redact_text(text)
    assert out.count("[REDACTED:") == sum(counts.values())
    assert set(counts) <= set(RULES)


# Text with no anchor byte at all (no _ - K S z J @ = :) cannot hold a secret.
NO_TRIGGERS = st.text(st.characters(exclude_characters="_-KSzJ@=:", exclude_categories=()), max_size=400)


@settings(max_examples=300)
@given(NO_TRIGGERS)
def test_trigger_free_text_is_returned_as_is(text: str) -> None:
    out, counts = redact_text(text)
    assert out is text
    assert counts == {}


def test_large_texts_paths_agree() -> None:
    """Dense anchors switch to per-prefix scans; results match the sparse path."""
    rng = random.Random(5)
    secrets = [c[1] for c in canaries(rng)]
    dense = ("a_b-c=d:e SKzJ " * 20000)  # every anchor is common
    sparse = "lorem ipsum dolor sit amet " * 12000
    for filler in (dense, sparse):
        parts = []
        for i, s in enumerate(secrets):
            parts.append(filler[: 7000 + i])
            parts.append(" " + s + " ")
        text = "".join(parts) + filler
        out, counts = redact_text(text)
        for s in secrets:
            body = s.split("\n")[1] if s.startswith("-----BEGIN") else s
            assert body not in out or body in filler
        assert sum(counts.values()) >= len(secrets)
        assert redact_text(out)[0] == out


def test_one_megabyte_without_triggers_is_cheap() -> None:
    text = ("the quick brown fox jumps over the lazy dog, " * 23000)[:1_000_000]
    best = min(_timed(redact_text, text) for _ in range(3))
    assert best < 0.05  # ~0.3 ms on the reference machine; generous for CI noise


def _timed(fn: object, arg: str) -> float:
    start = time.perf_counter()
    fn(arg)  # type: ignore[operator]
    return time.perf_counter() - start


# --------------------------------------------------------------------------
# redact_value


def test_redact_value_walks_and_copies_only_changed_paths() -> None:
    untouched = {"a": [1, 2, {"b": "plain"}], "n": None}
    value = {
        "tool_input": {"command": "export GITHUB_TOKEN=ghp_" + "z" * 36, "cwd": "/x"},
        "list": ["ok", ("t", "password=hunter22")],
        "same": untouched,
        "num": 5,
    }
    out, counts = redact_value(value)
    assert isinstance(out, dict)
    assert out is not value
    assert out["tool_input"]["command"] == "export GITHUB_TOKEN=[REDACTED:github_token]"
    assert out["tool_input"]["cwd"] == "/x"
    assert out["list"][1] == ("t", "password=[REDACTED:password_assignment]")
    assert out["same"] is untouched
    assert counts == {"github_token": 1, "password_assignment": 1}
    # the input is not modified
    assert value["tool_input"]["command"].endswith("z" * 36)  # type: ignore[index]


def test_redact_value_identity_and_keys() -> None:
    clean = {"a_perfectly_fine_key": "fine", "x": ["a", "b"]}
    out, counts = redact_value(clean)
    assert out is clean and counts == {}
    value = {"password=hunter22": "fine", "x": ["a", "b"]}  # a secret as a key is redacted too
    out, counts = redact_value(value)
    assert out == {"password=[REDACTED:password_assignment]": "fine", "x": ["a", "b"]}
    assert counts == {"password_assignment": 1}
    assert redact_value("AKIAABCDEFGHIJKLMNOP")[0] == "[REDACTED:aws_access_key]"
    assert redact_value(42) == (42, {})


def test_redact_value_deep_nesting_does_not_raise() -> None:
    value: object = "password=hunter22"
    for _ in range(5000):
        value = [value]
    out, counts = redact_value(value)  # below the depth limit: serialised and redacted, or dropped
    assert counts and "hunter22" not in repr(out)
    shallow: object = "nothing secret here"
    for _ in range(600):
        shallow = [shallow]
    assert redact_value(shallow)[0] is shallow  # nothing to hide below the limit: kept as it is


def _with_slack(slack: int, text: str) -> str:
    from agentlog.capture import redact as module

    saved = module._SLACK
    module._SLACK = slack
    try:
        return redact_text(text)[0]
    finally:
        module._SLACK = saved


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(TRICKY)
def test_anchor_and_fallback_scans_agree(text: str) -> None:
    """Anchor visits and per-prefix scans (taken when anchors are common) find the same spans."""
    assert _with_slack(-1, text) == _with_slack(10**9, text)


def test_markdown_code_span_is_not_a_value() -> None:
    text = "The generic `password=`/entropy rules are not implemented. Use password=`cat pw.txt` here."
    assert redact_text(text)[0] is text


def test_secrets_used_as_keys_or_nested_below_the_depth_limit_are_redacted() -> None:
    """Issue 27, finding 19: a secret as a JSON object key, or nested deeper than 200 levels,
    was stored as it came; now neither the event's content nor its raw payload keeps it."""
    import json

    from agentlog.capture.hook import build

    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    deep: dict[str, object] = {}
    cur = deep
    for _ in range(260):
        cur["k"] = {}
        cur = cur["k"]  # type: ignore[assignment]
    cur["s"] = "export GITHUB_TOKEN=" + token
    payload = {"session_id": "s-keys", "hook_event_name": "PostToolUse", "tool_name": "mcp__x__y",
               "tool_use_id": "t1", "cwd": "/nonexistent",
               "tool_input": {"headers": {token: "1", "AKIAIOSFODNN7EXAMPLE": "2", "ok": "3"}},
               "tool_response": {"nested": deep}}
    data = json.dumps(payload).encode()
    event = build("claude-code", data, len(data), [], environ={}).event
    text = json.dumps(event)
    assert token not in text and "AKIAIOSFODNN7EXAMPLE" not in text
    assert event["attrs"]["redactions"] >= 3
    headers = event["content"]["tool_input"]["headers"]
    assert len(headers) == 3 and headers.get("ok") == "3"  # keys that redact alike stay apart


# --------------------------------------------------------------------------
# The short-text gates: a family (or the assignments) is skipped when the text holds none
# of the literals every one of its matches contains. The gate must never skip a scan that
# would find something.


def _ungated(text: str) -> tuple[str, dict[str, int]]:
    """``redact_text`` with every family and the assignments scanned (no literal gate)."""
    from agentlog.capture import redact as module

    saved = module._holds_any
    module._holds_any = lambda b, literals: True
    try:
        return redact_text(text)
    finally:
        module._holds_any = saved


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(TRICKY, st.text(max_size=300)))
def test_literal_gates_never_hide_a_match(text: str) -> None:
    from agentlog.capture import redact as module

    b = text.encode("utf-8", "surrogatepass")
    for (anchor, hit, needles, weight, lookback), literals in zip(module._FAMILIES, (f[5] for f in module._SHORT_FAMILIES)):
        spans: list[tuple[int, int, int, str]] = []
        module._scan_family(b, anchor, hit, needles, weight, lookback, spans)
        if spans:  # the family finds something: the gate lets it scan
            assert module._holds_any(b, literals), (text, chr(anchor), spans)
    spans = []
    module._scan_assignments(b, spans)
    if spans:
        assert module._holds_any(b.lower(), module._KEYWORDS), (text, spans)
    assert redact_text(text) == _ungated(text)


def test_memo_shares_work_between_equal_strings_and_keeps_identity() -> None:
    from agentlog.capture.redact import redact_into

    secret = "ghp_" + "a" * 36
    a = {"x": "echo " + secret, "y": "plain text, nothing here"}
    b = {"x": "echo " + secret, "y": "plain text, nothing here", "z": ["echo " + secret]}
    attrs: dict[str, object] = {}
    ca, cb = redact_into(attrs, a, b)
    assert ca == {"x": "echo [REDACTED:github_token]", "y": "plain text, nothing here"}
    assert cb["y"] is b["y"] and cb["z"] == ["echo [REDACTED:github_token]"]  # type: ignore[index]
    assert attrs["redacted"] == {"github_token": 3}
