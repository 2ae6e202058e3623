"""``view --export`` writes where every other writer writes (#31): a path, or a store URL through
the same all-or-nothing sink (``memory://`` here, as ``s3://`` would be), never a local directory
named after the URL's scheme; an ``http(s)://`` target is refused before any input is read."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from pysafetensors.cli.main import main
from pysafetensors.numpy import save_file


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.safetensors"
    save_file({"layers.0.w": np.arange(6, dtype=np.float32).reshape(2, 3)}, str(path))
    return path


def test_export_to_a_store_url_lands_in_the_store_not_in_a_local_directory(
        small: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fsspec = pytest.importorskip("fsspec")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "memory:").mkdir()  # a directory named like the scheme must not catch the report
    fs = fsspec.filesystem("memory")
    try:
        code, out, err = _run("view", str(small), "--export", "memory://pst-export/r.html")
        assert code == 0, err
        assert out.startswith("wrote memory://pst-export/r.html: ")
        page = fs.cat_file("/pst-export/r.html").decode("utf-8")
        assert page.lower().startswith("<!doctype html>")
        assert "layers.0.w" in page
    finally:
        if fs.exists("/pst-export"):
            fs.rm("/pst-export", recursive=True)
    assert list((tmp_path / "memory:").rglob("*")) == []
    assert not (tmp_path / "s3:").exists()


def test_export_storage_options_reach_the_store(small: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("fsspec")
    seen: list[object] = []
    from pysafetensors.view import export

    real = export.open_sink

    def spy(path: object, **kw: object) -> object:
        seen.append(kw.get("storage_options"))
        return real(path, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(export, "open_sink", spy)
    code, _out, err = _run("view", str(small), "--export", "memory://pst-export2/r.html", "-o", "auto_mkdir=true")
    assert code == 0, err
    assert seen == [{"auto_mkdir": "true"}]
    import fsspec

    fsspec.filesystem("memory").rm("/pst-export2", recursive=True)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/r.html", "https://example.com/r.html"])
def test_export_to_http_is_refused_clearly(small: Path, url: str) -> None:
    code, out, err = _run("view", str(small), "--export", url)
    assert code == 2 and out == ""
    assert "cannot write to an http(s) URL" in err
