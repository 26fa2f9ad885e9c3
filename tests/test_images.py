"""Images are shown re-encoded, never as the uploaded bytes (issue 9, row 1)."""
from __future__ import annotations

from PIL import Image

from mmvet_core.inputs.images import MAX_SIDE, load_display_image


def test_a_real_image_is_decoded_and_bounded(tmp_path):
    Image.new("RGB", (4000, 1000), "red").save(tmp_path / "a.jpg")
    im = load_display_image(tmp_path / "a.jpg")
    assert im.mode == "RGB" and max(im.size) == MAX_SIDE and im.getpixel((5, 5))[0] > 200


def test_markup_under_an_image_name_is_not_an_image(tmp_path):
    for name, data in (("x.png", b"<html><script>alert(1)</script></html>"),
                       ("y.svg", b"<svg xmlns='http://www.w3.org/2000/svg' onload='alert(1)'/>"),
                       ("z.gif", b"GIF89a<script>alert(1)</script>")):
        (tmp_path / name).write_bytes(data)
        assert load_display_image(tmp_path / name) is None, name
    assert load_display_image(None) is None and load_display_image(tmp_path / "missing.png") is None


def test_a_decompression_bomb_is_refused(tmp_path):
    Image.new("1", (10_000, 10_000)).save(tmp_path / "bomb.png")     # 100 M pixels in a few KB
    assert load_display_image(tmp_path / "bomb.png") is None
