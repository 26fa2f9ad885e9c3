"""Safe extraction of untrusted zip uploads: every refusal is an ArchiveError and nothing lands outside dest."""
from __future__ import annotations

import os
import stat
import struct
import zipfile
from pathlib import Path

import pytest

from mmvet_core.inputs import archive
from mmvet_core.inputs.archive import ArchiveError, ArchiveLimits, check_zip, safe_extract_zip


def make_zip(path: Path, entries: list[tuple[str | zipfile.ZipInfo, bytes]], *,
             compression: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", compression) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return path


def patch_central_directory(path: Path, name: str, *, flag_bits: int | None = None,
                            file_size: int | None = None) -> None:
    """Rewrite one central-directory record in place (what a hostile archive can declare)."""
    data = bytearray(path.read_bytes())
    pos = 0
    while (pos := data.find(b"PK\x01\x02", pos)) != -1:
        name_len = struct.unpack_from("<H", data, pos + 28)[0]
        if data[pos + 46:pos + 46 + name_len].decode() == name:
            if flag_bits is not None:
                struct.pack_into("<H", data, pos + 8, flag_bits)
            if file_size is not None:
                struct.pack_into("<I", data, pos + 24, file_size)
            path.write_bytes(bytes(data))
            return
        pos += 4
    raise AssertionError(f"{name} not in central directory")


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.fixture
def upload_dir(tmp_path: Path) -> Path:
    """A folder holding only the archive; `dest` goes next to it, so strays would show up here."""
    d = tmp_path / "upload"
    d.mkdir()
    return d


def assert_nothing_written(upload_dir: Path, archive_name: str) -> None:
    assert files_under(upload_dir) == {archive_name}, "extraction left files behind or wrote outside dest"
    assert not (upload_dir.parent / "evil.txt").exists()


def test_extracts_official_layout(upload_dir: Path):
    zpath = make_zip(upload_dir / "mm-vet.zip", [
        ("mm-vet/", b""), ("mm-vet/mm-vet.json", b"{}"), ("mm-vet/images/v1_0.png", b"\x89PNG fake")])
    dest = safe_extract_zip(zpath, upload_dir / "dest")
    assert dest == (upload_dir / "dest").resolve()
    assert files_under(dest) == {"mm-vet", "mm-vet/mm-vet.json", "mm-vet/images", "mm-vet/images/v1_0.png"}
    assert (dest / "mm-vet/images/v1_0.png").read_bytes() == b"\x89PNG fake"
    assert [i.filename for i in check_zip(zpath)] == ["mm-vet/", "mm-vet/mm-vet.json", "mm-vet/images/v1_0.png"]


def _symlink_entry() -> zipfile.ZipInfo:
    info = zipfile.ZipInfo("mm-vet/link")
    info.create_system = 3
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info


@pytest.mark.parametrize("entry, message", [
    pytest.param("../evil.txt", "path traversal", id="dotdot"),
    pytest.param("mm-vet/../../evil.txt", "path traversal", id="nested-dotdot"),
    pytest.param("..\\evil.txt", "path traversal", id="windows-dotdot"),
    pytest.param("/tmp/evil.txt", "absolute path", id="absolute"),
    pytest.param("C:/evil.txt", "drive letter", id="drive-letter"),
    pytest.param(_symlink_entry(), "symbolic link", id="symlink"),
])
def test_refuses_unsafe_entries(upload_dir: Path, entry, message):
    zpath = make_zip(upload_dir / "bad.zip", [("mm-vet/mm-vet.json", b"{}"), (entry, b"/etc/passwd")])
    with pytest.raises(ArchiveError, match=message):
        check_zip(zpath)
    with pytest.raises(ArchiveError, match=message):
        safe_extract_zip(zpath, upload_dir / "dest")
    assert_nothing_written(upload_dir, "bad.zip")


def test_refuses_encrypted_entry(upload_dir: Path):
    zpath = make_zip(upload_dir / "enc.zip", [("secret.txt", b"data")])
    patch_central_directory(zpath, "secret.txt", flag_bits=0x1)
    with pytest.raises(ArchiveError, match="encrypted"):
        safe_extract_zip(zpath, upload_dir / "dest")
    assert_nothing_written(upload_dir, "enc.zip")


def test_refuses_too_many_entries(upload_dir: Path):
    zpath = make_zip(upload_dir / "many.zip", [(f"f{i}.txt", b"x") for i in range(6)])
    with pytest.raises(ArchiveError, match=r"6 entries; at most 5"):
        safe_extract_zip(zpath, upload_dir / "dest", ArchiveLimits(max_entries=5))
    assert_nothing_written(upload_dir, "many.zip")


def test_refuses_oversized_total_declared_size(upload_dir: Path):
    zpath = make_zip(upload_dir / "big.zip", [("a.bin", os.urandom(600)), ("b.bin", os.urandom(600))])
    with pytest.raises(ArchiveError, match="declares 1.2 KB of content, more than the allowed 1.0 KB"):
        safe_extract_zip(zpath, upload_dir / "dest", ArchiveLimits(max_total_uncompressed=1000))
    assert_nothing_written(upload_dir, "big.zip")


def test_refuses_huge_declared_size_with_default_limits(upload_dir: Path):
    zpath = make_zip(upload_dir / "huge.zip", [("a.bin", os.urandom(100))], compression=zipfile.ZIP_STORED)
    patch_central_directory(zpath, "a.bin", file_size=3_000_000_000)  # 3 GB declared, over the 2 GB default
    with pytest.raises(ArchiveError, match="declares 3.0 GB of content, more than the allowed 2.0 GB"):
        safe_extract_zip(zpath, upload_dir / "dest")
    assert_nothing_written(upload_dir, "huge.zip")


def test_refuses_zip_bomb_entry(upload_dir: Path):
    zpath = make_zip(upload_dir / "bomb.zip", [("zeros.bin", bytes(3_000_000))])   # compresses ~1000x
    with pytest.raises(ArchiveError, match="zip bomb"):
        safe_extract_zip(zpath, upload_dir / "dest")
    assert_nothing_written(upload_dir, "bomb.zip")


def test_small_compressible_entries_are_not_bombs(upload_dir: Path):
    zpath = make_zip(upload_dir / "ok.zip", [("zeros.bin", bytes(500_000))])     # under the 1 MB threshold
    dest = safe_extract_zip(zpath, upload_dir / "dest")
    assert (dest / "zeros.bin").stat().st_size == 500_000


def test_lying_declared_size_is_caught_and_cleaned_up(upload_dir: Path):
    zpath = make_zip(upload_dir / "lie.zip", [("ok.txt", b"fine"), ("z.txt", os.urandom(5000))])
    patch_central_directory(zpath, "z.txt", file_size=100)
    with pytest.raises(ArchiveError, match="corrupt"):
        safe_extract_zip(zpath, upload_dir / "dest")
    assert_nothing_written(upload_dir, "lie.zip")


def test_real_bytes_are_counted_even_if_the_precheck_is_fooled(upload_dir: Path, monkeypatch):
    # Simulate declared sizes that passed the check but were wrong: only the byte counter can stop this.
    zpath = make_zip(upload_dir / "sneaky.zip", [("a.bin", os.urandom(4000)), ("b.bin", os.urandom(4000))])
    monkeypatch.setattr(archive, "check_zip", lambda path, limits: zipfile.ZipFile(path).infolist())
    with pytest.raises(ArchiveError, match="extraction stopped"):
        safe_extract_zip(zpath, upload_dir / "dest", ArchiveLimits(max_total_uncompressed=5000))
    assert_nothing_written(upload_dir, "sneaky.zip")


def test_failure_in_existing_dest_removes_only_what_it_wrote(upload_dir: Path, monkeypatch):
    dest = upload_dir / "dest"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    zpath = make_zip(upload_dir / "sneaky.zip", [("sub/a.bin", os.urandom(4000)), ("sub/b.bin", os.urandom(4000))])
    monkeypatch.setattr(archive, "check_zip", lambda path, limits: zipfile.ZipFile(path).infolist())
    with pytest.raises(ArchiveError):
        safe_extract_zip(zpath, dest, ArchiveLimits(max_total_uncompressed=5000))
    assert files_under(upload_dir) == {"sneaky.zip", "dest", "dest/keep.txt"}


def test_never_overwrites_or_follows_existing_links(upload_dir: Path):
    outside = upload_dir.parent / "outside"
    outside.mkdir()
    dest = upload_dir / "dest"
    dest.mkdir()
    (dest / "images").symlink_to(outside, target_is_directory=True)
    zpath = make_zip(upload_dir / "x.zip", [("images/evil.txt", b"x")])
    with pytest.raises(ArchiveError, match="outside the destination"):
        safe_extract_zip(zpath, dest)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("content", [b"not a zip at all", b"", b"PK\x03\x04truncated"],
                         ids=["text", "empty", "truncated"])
def test_refuses_non_zip(upload_dir: Path, content: bytes):
    path = upload_dir / "mm-vet.zip"
    path.write_bytes(content)
    with pytest.raises(ArchiveError, match="not a valid zip archive"):
        check_zip(path)
    with pytest.raises(ArchiveError, match="not a valid zip archive"):
        safe_extract_zip(path, upload_dir / "dest")
    assert_nothing_written(upload_dir, "mm-vet.zip")


def test_missing_archive(tmp_path: Path):
    with pytest.raises(ArchiveError, match="not found"):
        check_zip(tmp_path / "nope.zip")


def test_duplicate_entries_refused(upload_dir: Path):
    with pytest.warns(UserWarning):  # zipfile warns about the duplicate name when writing
        zpath = make_zip(upload_dir / "dup.zip", [("a.txt", b"1"), ("a.txt", b"2")])
    with pytest.raises(ArchiveError, match="more than once"):
        safe_extract_zip(zpath, upload_dir / "dest")
    assert_nothing_written(upload_dir, "dup.zip")
