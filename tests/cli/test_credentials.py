"""Credentials for remote inputs (#31): ``-H/--header``, the Hugging Face token, ``-o`` storage
options.  Headers reach the loopback server that should get them and no other; the token goes to
the Hub's origin only (``HF_ENDPOINT`` makes a loopback server the Hub), never across a redirect
to another origin; secrets never appear in what the CLI prints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from servers import RangeServer

from pysafetensors.cli._options import RemoteOptions, hf_token, is_hf_url

from .conftest import run_cli

TOKEN = "hf_loopbackSECRETtoken123"


@pytest.fixture
def data(sample: Path) -> bytes:
    return sample.read_bytes()


@pytest.fixture
def hub(data: bytes) -> Iterator[RangeServer]:
    with RangeServer({"m.safetensors": data}) as s:
        yield s


@pytest.fixture
def other(data: bytes) -> Iterator[RangeServer]:
    with RangeServer({"m.safetensors": data}) as s:
        yield s


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """No token from this machine's environment or login: each test sets what it means."""
    for var in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_ENDPOINT", "HF_HUB_DISABLE_IMPLICIT_TOKEN",
                "XDG_CACHE_HOME"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    return monkeypatch


def _seen(server: RangeServer, name: str) -> list[str | None]:
    """The value of header ``name`` (any case) in each request ``server`` saw."""
    return [{k.lower(): v for k, v in headers.items()}.get(name.lower()) for *_x, headers in server.requests_seen]


def _auth(server: RangeServer) -> list[str | None]:
    return _seen(server, "Authorization")


@pytest.mark.parametrize("command", [("inspect",), ("validate",), ("id",), ("stats",)], ids=lambda c: c[0])
def test_a_header_is_sent_with_every_request(hub: RangeServer, clean_env: pytest.MonkeyPatch,
                                             command: tuple[str, ...]) -> None:
    r = run_cli(*command, hub.url("m.safetensors"), "-H", "X-Api-Key: k-123456", "-H", "Authorization: Bearer abcdef")
    assert r.code == 0, r.err
    assert hub.requests_seen
    assert set(_seen(hub, "X-Api-Key")) == {"k-123456"}
    assert set(_auth(hub)) == {"Bearer abcdef"}


def test_view_export_sends_the_header(hub: RangeServer, clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = run_cli("view", hub.url("m.safetensors"), "--export", out, "-H", "X-Api-Key: view-key-1")
    assert r.code == 0, r.err
    assert out.is_file()
    assert set(_seen(hub, "X-Api-Key")) == {"view-key-1"}


def test_hf_token_goes_to_the_hub_origin_only(hub: RangeServer, other: RangeServer,
                                              clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HF_TOKEN", TOKEN)
    clean_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{hub.port}")
    assert run_cli("inspect", hub.url("m.safetensors")).code == 0
    assert run_cli("inspect", other.url("m.safetensors")).code == 0
    assert _auth(hub) and set(_auth(hub)) == {f"Bearer {TOKEN}"}
    assert _auth(other) and set(_auth(other)) == {None}  # another port is another origin


def test_hf_token_file_is_used_when_no_variable(hub: RangeServer, clean_env: pytest.MonkeyPatch,
                                                tmp_path: Path) -> None:
    token_file = tmp_path / "hf-home" / "token"
    token_file.parent.mkdir(parents=True)
    token_file.write_text(TOKEN + "\n")
    clean_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{hub.port}")
    assert hf_token() == TOKEN
    assert run_cli("inspect", hub.url("m.safetensors")).code == 0
    assert set(_auth(hub)) == {f"Bearer {TOKEN}"}


def test_hf_token_never_when_implicit_tokens_are_disabled(hub: RangeServer, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HF_TOKEN", TOKEN)
    clean_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{hub.port}")
    clean_env.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    assert run_cli("inspect", hub.url("m.safetensors")).code == 0
    assert set(_auth(hub)) == {None}


def test_hf_token_is_not_carried_across_a_redirect(data: bytes, other: RangeServer,
                                                   clean_env: pytest.MonkeyPatch) -> None:
    with RangeServer({}, redirects={"m.safetensors": other.url("m.safetensors")}) as hub:
        clean_env.setenv("HF_TOKEN", TOKEN)
        clean_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{hub.port}")
        r = run_cli("inspect", hub.url("m.safetensors"), "-H", "X-Api-Key: redirect-key")
        assert r.code == 0, r.err
        assert f"Bearer {TOKEN}" in _auth(hub)
    assert other.requests_seen and set(_auth(other)) == {None}
    assert set(_seen(other, "X-Api-Key")) == {None}


def test_an_explicit_authorization_header_wins_over_the_token(hub: RangeServer, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HF_TOKEN", TOKEN)
    clean_env.setenv("HF_ENDPOINT", f"http://127.0.0.1:{hub.port}")
    assert run_cli("inspect", hub.url("m.safetensors"), "-H", "authorization: Bearer mine-1234").code == 0
    assert set(_auth(hub)) == {"Bearer mine-1234"}


def test_secrets_are_redacted_in_errors(hub: RangeServer, clean_env: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-header-value"
    # The secret in the (missing) path makes the server's 404 error line carry it.
    r = run_cli("inspect", hub.url(f"missing-{secret}.safetensors"), "-H", f"X-Api-Key: {secret}")
    assert r.code == 2
    assert secret not in r.err and "***" in r.err
    r = run_cli("--debug", "inspect", hub.url(f"missing-{secret}.safetensors"), "-H", f"X-Api-Key: {secret}", "--json")
    assert r.code == 2 and secret not in r.err and secret not in r.out


def test_a_refused_request_says_how_to_send_credentials_from_the_command_line(data: bytes,
                                                                             clean_env: pytest.MonkeyPatch) -> None:
    with RangeServer({"m.safetensors": data}, token="t0k3n") as locked:
        r = run_cli("inspect", locked.url("m.safetensors"))
        assert r.code == 2 and "HTTP 401" in r.err and "-H 'Authorization: Bearer ...'" in r.err
        assert run_cli("inspect", locked.url("m.safetensors"), "-H", "Authorization: Bearer t0k3n").code == 0


def test_a_malformed_header_is_refused_without_echoing_it(sample: Path) -> None:
    r = run_cli("inspect", sample, "-H", "Bearer hf_notshown_1234")
    assert r.code == 2 and "Name: value" in r.err
    assert "hf_notshown_1234" not in r.err


def test_storage_options_nest_and_are_refused_for_http(hub: RangeServer, clean_env: pytest.MonkeyPatch) -> None:
    remote = RemoteOptions(storage_options={"client_kwargs": {"endpoint_url": "http://x"}, "anon": "true"})
    assert remote.for_path("s3://b/k.safetensors") == {"client_kwargs": {"endpoint_url": "http://x"}, "anon": "true"}
    assert remote.for_path("local.safetensors") == {}
    r = run_cli("inspect", hub.url("m.safetensors"), "-o", "anon=true")
    assert r.code == 2 and "-H/--header" in r.err
    assert hub.requests_seen == []


def test_storage_options_reach_an_fsspec_url(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsspec = pytest.importorskip("fsspec")
    fsspec.filesystem("memory").pipe("/pst-cred/m.safetensors", sample.read_bytes())
    seen: list[object] = []
    from pysafetensors.tools import checkpoint

    real = checkpoint.open_checkpoint

    def spy(path: object, storage_options: object = None, **kw: object) -> object:
        seen.append(storage_options)
        return real(path, storage_options, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr("pysafetensors.cli._inputs.open_checkpoint", spy)
    try:
        r = run_cli("inspect", "memory://pst-cred/m.safetensors", "-o", "skip_instance_cache=true", "--json")
        assert r.code == 0, r.err
        assert json.loads(r.out)["tensor_count"] > 0
    finally:
        fsspec.filesystem("memory").rm("/pst-cred", recursive=True)
    assert seen == [{"skip_instance_cache": "true"}]


def test_is_hf_url(clean_env: pytest.MonkeyPatch) -> None:
    assert is_hf_url("https://huggingface.co/org/m/resolve/main/model.safetensors")
    assert is_hf_url("https://hf.co/org/m/resolve/main/model.safetensors")
    assert not is_hf_url("http://huggingface.co/x")  # plain http never gets the token
    assert not is_hf_url("https://huggingface.co.evil.example/x")
    assert not is_hf_url("https://evil.example/huggingface.co")
    clean_env.setenv("HF_ENDPOINT", "https://hub.internal:8443")
    assert is_hf_url("https://hub.internal:8443/x") and not is_hf_url("https://hub.internal/x")


@pytest.mark.parametrize("command", ["inspect", "validate", "convert"])
def test_max_input_size_reaches_the_library(sample: Path, tmp_path: Path, command: str) -> None:
    import os
    import subprocess
    import sys

    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    extra = [str(tmp_path / "out.safetensors")] if command == "convert" else []
    data = sample.read_bytes()
    if command == "convert":  # convert reads pickles and numpy files, not safetensors
        import numpy as np

        np.savez(tmp_path / "in.npz", w=np.arange(100, dtype=np.float32))
        data = (tmp_path / "in.npz").read_bytes()
    assert len(data) > 200
    base = [sys.executable, "-m", "pysafetensors", command, "/dev/stdin", *extra]
    small = subprocess.run([*base, "--max-input-size", "200"], input=data, capture_output=True, env=env,
                           timeout=120, check=False)
    assert small.returncode == 2, small.stderr
    assert b"--max-input-size" in small.stderr
    large = subprocess.run([*base, "--max-input-size", "10MB"], input=data, capture_output=True, env=env,
                           timeout=120, check=False)
    assert large.returncode == 0, large.stderr


def test_max_input_size_takes_decimal_units() -> None:
    r = run_cli("inspect", "x.safetensors", "--max-input-size", "lots")
    assert r.code == 2 and "5GB" in r.err
    from pysafetensors.cli._options import _size

    assert _size("5GB") == 5 * 10**9 and _size("500MB") == 500 * 10**6 and _size("1234") == 1234
