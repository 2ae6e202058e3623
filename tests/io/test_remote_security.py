"""HTTP credentials and names against hostile redirects and indexes, on real loopback servers.

Credentials (``token=``, ``headers=``, ``user:pass@``) stay with the URL's origin (scheme, host
and port); https -> http redirects are refused unless allowed; shard names cannot climb out of
the index's directory, percent-encoded or not; no message shows a password or a signature.
"""

from __future__ import annotations

import base64
import json
import socket
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest
from servers import RangeServer, self_signed_cert

from pysafetensors import safe_open
from pysafetensors.errors import InvalidIndex, RemoteError
from pysafetensors.format.index import validate_shard_name
from pysafetensors.io.remote import HTTPSource
from pysafetensors.numpy import save

SECRET_HEADER = {"X-Api-Key": "k-123"}


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return self_signed_cert(tmp_path_factory.mktemp("tls"))


def _sent(server: RangeServer, scheme: str, header: str) -> list[str | None]:
    return [h.get(header) for s, _, h in server.requests_seen if s == scheme]


def test_https_to_http_on_the_same_port_is_refused(blob: bytes, cert: tuple[str, str]) -> None:
    # One port speaks TLS and plain HTTP: the downgrade keeps host and port, only the scheme changes.
    with RangeServer({"plain/m.safetensors": blob}, tls=cert, plain_too=True) as s:
        s.redirects["m.safetensors"] = s.url("plain/m.safetensors", scheme="http")
        with pytest.raises(RemoteError, match="refusing the redirect from https:// to http://") as e:
            HTTPSource(s.url("m.safetensors"), token="s3cret", headers=SECRET_HEADER, verify=cert[0])
        assert "allow_insecure_redirect" in str(e.value)
        assert [scheme for scheme, _, _ in s.requests_seen] == ["https"]  # nothing went out in clear text
        assert _sent(s, "https", "Authorization") == ["Bearer s3cret"]


def test_allowed_downgrade_drops_every_credential(
    blob: bytes, tensors: dict[str, np.ndarray], cert: tuple[str, str]
) -> None:
    with RangeServer({"plain/m.safetensors": blob}, tls=cert, plain_too=True) as s:
        s.redirects["m.safetensors"] = s.url("plain/m.safetensors", scheme="http")
        opts = {"token": "s3cret", "headers": SECRET_HEADER, "verify": cert[0], "allow_insecure_redirect": True}
        with safe_open(s.url("m.safetensors"), "np", storage_options=opts) as f:
            np.testing.assert_array_equal(f.get_slice("big")[200:203], tensors["big"][200:203])
        assert _sent(s, "https", "Authorization") == ["Bearer s3cret"]
        assert _sent(s, "https", "X-Api-Key") == ["k-123"]
        plain = [h for scheme, _, h in s.requests_seen if scheme == "http"]
        assert len(plain) >= 2  # the prefix, then the slice straight to the resolved URL
        assert all("Authorization" not in h and "X-Api-Key" not in h for h in plain)


def test_upgrade_to_https_on_the_same_port_still_drops_credentials(blob: bytes, cert: tuple[str, str]) -> None:
    # http -> https keeps the host and port; the origin still changes (requests strips here too).
    with RangeServer({"tls/m.safetensors": blob}, tls=cert, plain_too=True) as s:
        s.redirects["m.safetensors"] = s.url("tls/m.safetensors", scheme="https")
        with closing(HTTPSource(s.url("m.safetensors", scheme="http"), token="s3cret", verify=cert[0])) as src:
            assert src.size == len(blob)
        assert _sent(s, "http", "Authorization") == ["Bearer s3cret"]
        assert _sent(s, "https", "Authorization") == [None]


def test_custom_headers_and_token_stay_with_their_origin(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    # Same host, another port: another origin.
    with RangeServer({"cdn/m.safetensors": blob}) as cdn, RangeServer({}) as hub:
        hub.redirects["m.safetensors"] = cdn.url("cdn/m.safetensors")
        opts = {"token": "s3cret", "headers": {**SECRET_HEADER, "Cookie": "session=1"}}
        with safe_open(hub.url("m.safetensors"), "np", storage_options=opts) as f:
            np.testing.assert_array_equal(f.get_tensor("big"), tensors["big"])
        assert _sent(hub, "http", "X-Api-Key") == ["k-123"]
        assert cdn.log.requests >= 2
        for _, _, h in cdn.requests_seen:
            assert not {"Authorization", "X-Api-Key", "Cookie"} & set(h), h
            assert h["User-Agent"] == "pysafetensors" and h["Range"].startswith("bytes=")


def test_tls_certificate_is_checked(blob: bytes, cert: tuple[str, str]) -> None:
    with RangeServer({"m.safetensors": blob}, tls=cert) as s:
        with pytest.raises(RemoteError, match="(?i)certificate") as e:
            HTTPSource(s.url("m.safetensors?sig=hidden"), retries=0)
        assert s.url("m.safetensors") in str(e.value) and "hidden" not in str(e.value)
        with closing(HTTPSource(s.url("m.safetensors"), verify=cert[0])) as src:
            assert src.size == len(blob)


def test_user_and_password_in_the_url_are_basic_auth(blob: bytes, tensors: dict[str, np.ndarray]) -> None:
    expected = "Basic " + base64.b64encode(b"alice:p@ss:word").decode()
    with RangeServer({"m.safetensors": blob}, required_headers={"Authorization": expected}) as s:
        url = f"http://alice:p%40ss%3Aword@127.0.0.1:{s.port}/m.safetensors"
        with safe_open(url, "np") as f:
            np.testing.assert_array_equal(f.get_tensor("small"), tensors["small"])
        src = HTTPSource(url)
        assert src.name == s.url("m.safetensors") and "p%40ss" not in repr(vars(src).get("name"))
        src.close()
        with pytest.raises(FileNotFoundError) as e:
            safe_open(f"http://alice:p%40ss%3Aword@127.0.0.1:{s.port}/none.safetensors?sig=x", "np")
        assert "p%40ss" not in str(e.value) and "alice" not in str(e.value) and "sig=x" not in str(e.value)
        with pytest.raises(RemoteError, match="401") as e:
            safe_open(f"http://alice:wrong@127.0.0.1:{s.port}/m.safetensors", "np")
        assert "wrong" not in str(e.value)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_connection_failure_names_the_redacted_url() -> None:
    port = _closed_port()
    with pytest.raises(RemoteError) as e:
        safe_open(f"http://bob:hunter2@127.0.0.1:{port}/m.safetensors?X-Amz-Signature=abc", "np",
                  storage_options={"retries": 1, "backoff": 0.01})
    text = str(e.value)
    assert f"http://127.0.0.1:{port}/m.safetensors" in text and "refused" in text.lower()
    assert "hunter2" not in text and "abc" not in text and "object at 0x" not in text
    assert e.value.__cause__ is None or isinstance(e.value.__cause__, OSError)


# --- shard names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "%2e%2e%2fprivate%2fsecret.safetensors",
        "%2E%2E%5Csecret.safetensors",
        "..%2Fsecret.safetensors",
        "sub%2fshard.safetensors",
        "sub%5cshard.safetensors",
        "%2fetc%2fshard.safetensors",
        "C%3a%5cshard.safetensors",
        "shard%00.safetensors",
    ],
)
def test_percent_encoded_shard_names_are_unsafe(name: str) -> None:
    with pytest.raises(InvalidIndex, match="percent-decoded"):
        validate_shard_name(name)


def _index(*names: str) -> bytes:
    return json.dumps({"metadata": {"total_size": 4}, "weight_map": {f"t{i}": n for i, n in enumerate(names)}}).encode()


def test_percent_encoded_traversal_never_reaches_the_server(blob: bytes) -> None:
    files = {
        "repo/model.safetensors.index.json": _index("%2e%2e%2fprivate%2fsecret.safetensors"),
        "private/secret.safetensors": blob,
    }
    with RangeServer(files) as s:
        with pytest.raises(InvalidIndex, match="unsafe shard name"):
            safe_open(s.url("repo/model.safetensors.index.json"), "np")
        assert all("private" not in path for _, path, _ in s.requests_seen)


def test_shard_urls_quote_the_name() -> None:
    # "%41" is part of the file's name, not an escape: the server must get the literal name.
    literal = save({"t0": np.array([1], np.int32)})
    decoy = save({"t0": np.array([2], np.int32)})
    files = {
        "repo/model.safetensors.index.json": _index("shard%41 b.safetensors"),
        "repo/shard%41 b.safetensors": literal,
        "repo/shardA b.safetensors": decoy,
    }
    with RangeServer(files) as s, safe_open(s.url("repo/model.safetensors.index.json"), "np") as f:
        assert f.get_tensor("t0").tolist() == [1]
        assert any(path == "/repo/shard%2541%20b.safetensors" for _, path, _ in s.requests_seen)


def test_fsspec_chain_names_are_redacted(tmp_path: Path) -> None:
    pytest.importorskip("fsspec")
    url = "zip://m.safetensors::memory://user:hunter2@pst-zip/missing.zip?sig=abc"
    with pytest.raises(FileNotFoundError) as e:
        safe_open(url, "np")
    assert str(e.value) == "No such file or directory: zip://m.safetensors::memory://pst-zip/missing.zip"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://u:p@h.example/a/m.safetensors?X-Amz-Signature=s#frag", "https://h.example/a/m.safetensors"),
        ("http://[::1]:8080/m.safetensors?sig=s", "http://[::1]:8080/m.safetensors"),
        ("zip://m.safetensors::s3://key:secret@bucket/a.zip?v=1", "zip://m.safetensors::s3://bucket/a.zip"),
        ("simplecache::memory://user:pw@x/m.safetensors", "simplecache::memory://x/m.safetensors"),
        ("http://u:pw@127.0.0.1:notaport/m.safetensors?sig=s", "http://127.0.0.1:notaport/m.safetensors"),
        ("http://u:pw@[::1/m.safetensors?sig=s", "http://[::1/m.safetensors"),
        ("/local/dir/m.safetensors", "/local/dir/m.safetensors"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    from pysafetensors.io.redact import redact_text, redact_url

    assert redact_url(url) == shown
    assert redact_text(f"failed: {url}: boom") == f"failed: {shown}: boom"


def test_invalid_url_is_a_remote_error() -> None:
    with pytest.raises(RemoteError, match=r"http://\[::1/m.safetensors: not a valid URL") as e:
        HTTPSource("http://u:pw@[::1/m.safetensors?sig=s")
    assert "pw" not in str(e.value) and "sig" not in str(e.value)


def test_proxy_from_the_environment_is_used(
    blob: bytes, tensors: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server answers as a forward proxy would (absolute-form targets), for a host that does not exist.
    with RangeServer({"m.safetensors": blob}) as proxy:
        for var in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("http_proxy", proxy.url(""))
        with safe_open("http://models.example.invalid/m.safetensors", "np") as f:
            np.testing.assert_array_equal(f.get_tensor("small"), tensors["small"])
        assert proxy.proxied and all(t == "http://models.example.invalid/m.safetensors" for t in proxy.proxied)
