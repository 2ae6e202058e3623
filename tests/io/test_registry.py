"""io/registry.py: scheme routing, pass-through of sources, install hints."""

from __future__ import annotations

import io
import os
import sys

import numpy as np
import pytest

from pysafetensors import safe_open
from pysafetensors.errors import MissingBackend, MissingDependency
from pysafetensors.io import registry
from pysafetensors.io.remote import HTTPOptions
from pysafetensors.io.sources import FileObjectSource, MemorySource, MmapSource, PreadSource
from pysafetensors.numpy import save, save_file


@pytest.mark.parametrize(
    ("obj", "scheme"),
    [("https://x/y", "https"), ("HTTP://x", "http"), ("s3://b/k", "s3"), ("memory://a", "memory"),
     ("hf://org/repo/model.safetensors", "hf"), ("C:\\model.safetensors", None), ("c://x", None),
     ("relative/path", None), (b"https://x", None), ("simplecache::s3://b", "simplecache"), ("a::b", None)],
)
def test_url_scheme(obj: object, scheme: str | None) -> None:
    assert registry.url_scheme(obj) == scheme


def test_local_forms_delegate_to_sources(tmp_path) -> None:
    path = tmp_path / "m.safetensors"
    save_file({"a": np.ones(2, np.float32)}, path)
    assert isinstance(registry.open_source(path), MmapSource)
    assert isinstance(registry.open_source(str(path), "pread"), PreadSource)
    assert isinstance(registry.open_source(path.read_bytes()), MemorySource)
    assert isinstance(registry.open_source(io.BytesIO(path.read_bytes())), FileObjectSource)
    assert isinstance(registry.open_source(path.as_uri()), MmapSource)  # file:// URL
    src = MemorySource(path.read_bytes())
    assert registry.open_source(src) is src  # a ByteSource passes through
    with pytest.raises(TypeError):
        registry.open_source(12)


def test_http_goes_to_httpsource_without_importing_fsspec() -> None:
    assert registry.source_class("https").__name__ == "HTTPSource"
    assert registry.source_class("s3").__name__ == "FsspecSource"


_BLOB = save({"a": np.arange(3, dtype=np.int32)})


class FakeSource(MemorySource):
    """A source for a made-up scheme: every URL serves _BLOB; options arrive as keywords."""

    def __init__(self, url: str, **options: object) -> None:
        super().__init__(_BLOB, name=url)
        self.options = options


def test_custom_scheme_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(registry.REGISTRY, "blob", registry.SchemeEntry("nowhere_pkg:Source", "nowhere_pkg", "blob"))
    with pytest.raises(MissingDependency, match=r"pip install 'pysafetensors\[blob\]'"):
        registry.open_source("blob://x/y.safetensors")
    monkeypatch.setattr(registry, "REGISTRY", dict(registry.REGISTRY))
    registry.register_scheme("FAKE", f"{__name__}:FakeSource")
    src = registry.open_source("fake://anything", storage_options={"token": "t"})
    assert isinstance(src, FakeSource) and src.options == {"token": "t"}
    with safe_open("fake://anything", "np") as f:
        np.testing.assert_array_equal(f.get_tensor("a"), np.arange(3, dtype=np.int32))


def test_missing_fsspec_backend_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fsspec")
    monkeypatch.setitem(sys.modules, "gcsfs", None)
    with pytest.raises(MissingBackend, match="pip install gcsfs") as e:
        safe_open("gs://bucket/model.safetensors", "np")
    assert isinstance(e.value, ImportError)
    assert "pysafetensors[fsspec]" in str(e.value)


def test_missing_local_file_keeps_upstream_wording(tmp_path) -> None:
    missing = os.path.join(tmp_path, "none.safetensors")
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        safe_open(missing, "np")


def test_unknown_http_option_lists_the_known_ones() -> None:
    with pytest.raises(TypeError, match="unknown storage option 'anon' .*known options: headers, token"):
        registry.open_source("http://127.0.0.1:9/m.safetensors", storage_options={"anon": True})


@pytest.mark.parametrize(
    ("options", "error", "words"),
    [
        ({"timeout": "30"}, TypeError, "'timeout' for http(s):// URLs must be a number, got str '30'"),
        ({"retries": 2.5}, TypeError, "'retries' for http(s):// URLs must be a whole number"),
        ({"allow_full_download": "yes"}, TypeError, "'allow_full_download' for http(s):// URLs must be True or False"),
        ({"verify": 1}, TypeError, "'verify' for http(s):// URLs must be True, False or a CA bundle path"),
        ({"headers": {"X-Key": 5}}, TypeError, "'headers' for http(s):// URLs must be a mapping of strings to strings"),
        ({"retries": -1}, ValueError, "'retries' must be at least 0, got -1"),
        ({"timeout": 0}, ValueError, "'timeout' must be over 0, got 0.0"),
        ({"max_workers": 0}, ValueError, "'max_workers' must be at least 1, got 0"),
        ({"min_rate": float("nan")}, ValueError, "'min_rate' must be at least 0, got nan"),
    ],
)
def test_mistyped_http_options_are_named_before_any_request(options: dict, error: type, words: str) -> None:
    # Port 9 (discard) on loopback: nothing is asked of it, the options fail first.
    with pytest.raises(error) as e:
        registry.open_source("http://127.0.0.1:9/m.safetensors", storage_options=options)
    assert words in str(e.value)


def test_a_mistyped_token_is_not_echoed() -> None:
    with pytest.raises(TypeError, match="'token' for http.* must be a string, got bytes") as e:
        HTTPOptions.parse({"token": b"hf_secret"})
    assert "secret" not in str(e.value)


def test_http_options_are_parsed_once_and_frozen(tmp_path) -> None:
    opts = HTTPOptions.parse({"timeout": 5, "retries": np.int64(2), "headers": {"X-A": "1"}}, verify=False)
    assert (opts.timeout, opts.retries, opts.verify) == (5.0, 2, False)
    assert type(opts.timeout) is float and type(opts.retries) is int
    assert HTTPOptions.parse(opts) is opts and HTTPOptions.parse(opts, retries=0).retries == 0
    assert HTTPOptions(verify=tmp_path / "ca.pem").verify == str(tmp_path / "ca.pem")  # a CA bundle path, not True
    with pytest.raises(TypeError):
        opts.headers["X-B"] = "2"  # type: ignore[index]
    with pytest.raises(AttributeError):
        opts.timeout = 1.0  # type: ignore[misc]


def test_fsspec_chained_url(tmp_path) -> None:
    fsspec = pytest.importorskip("fsspec")
    data = save({"a": np.arange(5, dtype=np.int16)})
    fs = fsspec.filesystem("memory")
    fs.pipe("/pst-chain/m.safetensors", data)
    try:
        url = "simplecache::memory://pst-chain/m.safetensors"
        opts = {"simplecache": {"cache_storage": str(tmp_path)}}
        with safe_open(url, "np", storage_options=opts) as f:
            np.testing.assert_array_equal(f.get_tensor("a"), np.arange(5, dtype=np.int16))
    finally:
        fs.rm("/pst-chain", recursive=True)
