"""GGUF -> safetensors written to a store URL (issue 19): memory:// and moto's S3 on loopback,
with storage options passed through; byte-identical to a local conversion, all or nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gguf_helpers import llama_gguf, llama_source, mixed_tensors, write_gguf
from s3_servers import MotoS3, Store

from pysafetensors.gguf import GGUFFile
from pysafetensors.gguf.convert import convert_gguf
from pysafetensors.io.sources import MmapSource


@pytest.fixture(scope="module")
def s3() -> Iterator[MotoS3]:
    with MotoS3() as server:
        yield server


@pytest.fixture(params=["s3", "memory"])
def store(request: pytest.FixtureRequest) -> Iterator[Store]:
    yield from Store.for_param(request)


@pytest.mark.parametrize("hf", [False, True])
def test_convert_to_a_url_is_byte_identical_to_a_local_convert(store: Store, hf: bool, tmp_path: Path) -> None:
    g = llama_gguf(tmp_path / "l.gguf", llama_source())
    with GGUFFile(MmapSource(g)) as f:
        local = convert_gguf(f, tmp_path / "local.safetensors", hf=hf, dtype="bf16")
        remote = convert_gguf(f, store.url("out/model.safetensors"), hf=hf, dtype="bf16",
                              storage_options=store.options, durable=True)
    assert store.listing() == ["out/model.safetensors"]
    assert store.get("out/model.safetensors") == (tmp_path / "local.safetensors").read_bytes()
    assert remote.output == store.url("out/model.safetensors")
    assert (remote.tensors, remote.bytes_written, remote.unpermuted) == (local.tensors, local.bytes_written,
                                                                         local.unpermuted)
    assert store.pending() == []


class Interrupted(Exception):
    pass


def test_a_failed_convert_leaves_the_old_object_and_no_upload(store: Store, tmp_path: Path) -> None:
    """Stopped after the first chunk (the progress callback raising, as a Ctrl-C would): the
    object already at the target stays as it was, nothing else appears, no upload is pending."""
    g = write_gguf(tmp_path / "m.gguf", mixed_tensors())
    target = store.url("model.safetensors")
    with GGUFFile(MmapSource(g)) as f:
        convert_gguf(f, target, storage_options=store.options)
        before = store.get("model.safetensors")

        def stop(nbytes: int) -> None:
            raise Interrupted

        with pytest.raises(Interrupted):
            convert_gguf(f, target, dtype="f16", storage_options=store.options, progress=stop)
    assert store.listing() == ["model.safetensors"]
    assert store.get("model.safetensors") == before
    assert store.pending() == []


def test_cli_convert_writes_a_gguf_to_a_url(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI has no storage-options flag: the store's settings come from the environment."""
    from gguf_helpers import run_cli

    if store.s3 is not None:
        for key, value in store.s3.environment().items():
            monkeypatch.setenv(key, value)
    g = write_gguf(tmp_path / "m.gguf", mixed_tensors())
    assert run_cli("convert", g, tmp_path / "local.safetensors")[0] == 0
    code, out, err = run_cli("convert", g, store.url("cli.safetensors"))
    assert code == 0, err
    assert store.url("cli.safetensors") in out
    assert store.get("cli.safetensors") == (tmp_path / "local.safetensors").read_bytes()
