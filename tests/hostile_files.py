"""Files a hostile visitor uploads (issues 9 and 20), shared by the tests and the bench/ scripts."""
from __future__ import annotations

import zipfile
from pathlib import Path

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"


def write_raw_xlsx(path: Path, rows: int, *, declare: int | None = None, answer: str = "x") -> Path:
    """A valid .xlsx (pandas/openpyxl read it) whose one sheet holds a header and `rows` rows of (index,
    prediction), written as raw XML in streamed chunks: 1 M rows compress to a few MB (the audit's 1.5 MB
    workbook held 11 M). `declare` sets the row count its ``<dimension>`` claims (default: the truth)."""
    declared = (rows if declare is None else declare) + 1
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        _write_parts(zf)
        with zf.open("xl/worksheets/sheet1.xml", "w") as fh:
            fh.write(f'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="{_MAIN}"><dimension ref="A1:B'
                     f'{declared}"/><sheetData><row r="1"><c r="A1" t="inlineStr"><is><t>index</t></is></c>'
                     '<c r="B1" t="inlineStr"><is><t>prediction</t></is></c></row>'.encode())
            for start in range(2, rows + 2, 10_000):
                fh.write("".join(f'<row r="{r}"><c r="A{r}"><v>{r - 2}</v></c><c r="B{r}" t="inlineStr"><is><t>'
                                 f"{answer}</t></is></c></row>" for r in range(start, min(start + 10_000, rows + 2))
                                 ).encode())
            fh.write(b"</sheetData></worksheet>")
    return path


def write_wide_xlsx(path: Path, cells: int, rows: int = 2, *, declare: bool = False) -> Path:
    """The audit's 53 KB workbook (issue 20): a header row of (index, prediction) and then `rows` - 1 rows holding
    `cells` cells in all (``<c><v>1</v></c>`` without references, as openpyxl writes none either: each is
    a new column). Passed a row count, it took 170 s and 2.9 GB to parse. `declare` gives it a truthful
    ``<dimension>``; without one only the cells themselves say how wide it is."""
    per_row = max(1, cells // max(1, rows - 1))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        _write_parts(zf)
        with zf.open("xl/worksheets/sheet1.xml", "w") as fh:
            dim = f'<dimension ref="A1:XFD{rows}"/>' if declare else ""
            fh.write(f'<?xml version="1.0" encoding="UTF-8"?><worksheet xmlns="{_MAIN}">{dim}<sheetData>'
                     '<row r="1"><c r="A1" t="inlineStr"><is><t>index</t></is></c><c r="B1" t="inlineStr"><is>'
                     '<t>prediction</t></is></c></row>'.encode())
            cell = b"<c><v>1</v></c>"
            for r in range(2, rows + 1):
                fh.write(f'<row r="{r}">'.encode())
                for _ in range(0, per_row, 10_000):
                    fh.write(cell * min(10_000, per_row))
                fh.write(b"</row>")
            fh.write(b"</sheetData></worksheet>")
    return path


def _write_parts(zf: zipfile.ZipFile) -> None:
    """The parts of a one-sheet workbook other than the sheet."""
    zf.writestr("[Content_Types].xml",
                '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/'
                '2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-'
                'package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
                '<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-'
                'officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" '
                'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
                "</Types>")
    zf.writestr("_rels/.rels", f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_PKG}">'
                f'<Relationship Id="rId1" Type="{_REL}/officeDocument" Target="xl/workbook.xml"/>'
                "</Relationships>")
    zf.writestr("xl/workbook.xml", f'<?xml version="1.0" encoding="UTF-8"?><workbook xmlns="{_MAIN}" '
                f'xmlns:r="{_REL}"><sheets><sheet name="Sheet1" sheetId="1" r:id="rId1"/></sheets></workbook>')
    zf.writestr("xl/_rels/workbook.xml.rels", f'<?xml version="1.0" encoding="UTF-8"?><Relationships '
                f'xmlns="{_PKG}"><Relationship Id="rId1" Type="{_REL}/worksheet" Target="worksheets/sheet1.xml"/>'
                "</Relationships>")


def write_zero_bomb(path: Path, metadata: Path, entries: int, size: int = 1_000_000) -> Path:
    """The audit's archive: the official metadata plus `entries` entries of `size` zero bytes (1,990 x 1 MB
    compress to 2.2 MB)."""
    zeros = bytes(size)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        zf.write(metadata, "mm-vet/mm-vet.json")
        for i in range(entries):
            zf.writestr(f"mm-vet/pad/{i:05d}.bin", zeros)
    return path
