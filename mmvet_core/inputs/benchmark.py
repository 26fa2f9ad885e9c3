"""The benchmark: samples, capabilities and capability integrations.

A `Benchmark` is an ordered mapping of sample id -> `Sample`, plus where it came from. Capability names are
always kept in the paper's order (rec, ocr, know, gen, spat, math; then v2's seq), and an integration's name
joins its capability codes in that order (``rec_know_gen``). The official script names integrations by joining
a Python ``set``, so its column names change with the hash seed; ours never do.

Loaders for every source (bundled v1, official folder / zip / metadata JSON, MM-Vet v2, the Hugging Face hub)
live in `mmvet_core.inputs.sources`; this module has no I/O besides the bundled files.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Iterable, Mapping

#: The paper's capability order (Table 2), then MM-Vet v2's extra capability.
CAPABILITY_ORDER: tuple[str, ...] = ("rec", "ocr", "know", "gen", "spat", "math", "seq")
CAPABILITY_LABELS: dict[str, str] = {
    "rec": "Recognition",
    "ocr": "OCR",
    "know": "Knowledge",
    "gen": "Language generation",
    "spat": "Spatial awareness",
    "math": "Math",
    "seq": "Image-text sequence",
}

#: The paper's short column names (Table 2), used on radar axes and in integration labels.
SHORT_LABELS: dict[str, str] = {"rec": "Rec", "ocr": "OCR", "know": "Know", "gen": "Gen", "spat": "Spat",
                                "math": "Math", "seq": "Seq"}


def axis_label(code: str) -> str:
    """A capability or an integration as the paper writes it: ``rec_ocr_spat`` -> ``Rec+OCR+Spat``."""
    return "+".join(SHORT_LABELS.get(part, part) for part in str(code).split("_"))


def find_assets_dir() -> Path:
    """The bundled data (MM-Vet v1 metadata, examples, the paper's scores, the judge check's references): inside the
    package when installed (``pip install``: setup.py ships ``assets/`` as ``mmvet_core/assets/``), else the
    checkout's top-level ``assets/`` (the Space's layout). Found from the package's folder, wherever this module
    sits in it."""
    package = Path(__file__).resolve().parent
    while package.name != "mmvet_core" and package != package.parent:
        package = package.parent
    installed = package / "assets"
    return installed if (installed / "mm-vet.json").is_file() else package.parent / "assets"


ASSETS_DIR = find_assets_dir()
BUNDLED_V1_METADATA = ASSETS_DIR / "mm-vet.json"
BUNDLED_V1_BARD_SET = ASSETS_DIR / "bard_set.json"


#: What a capability code may look like. Codes of an uploaded benchmark become CSV column names, chart labels and
#: filter choices, so anything else (a formula, markup, a path) is refused.
CAPABILITY_CODE = re.compile(r"^[a-z0-9_]{1,40}$")


class BenchmarkError(ValueError):
    """A benchmark (or subset) could not be loaded; the message says what to do."""


def order_capabilities(caps: Iterable[str]) -> tuple[str, ...]:
    """Return the distinct capabilities of `caps` in the paper's order (unknown ones last, alphabetically)."""
    distinct = set(caps)
    known = [c for c in CAPABILITY_ORDER if c in distinct]
    unknown = sorted(distinct - set(CAPABILITY_ORDER))
    return tuple(known + unknown)


def integration_name(caps: Iterable[str]) -> str:
    """Canonical name of a capability integration: codes in the paper's order joined by ``_``.

    >>> integration_name({"gen", "know", "rec"})
    'rec_know_gen'
    >>> integration_name(["math", "spat", "ocr"])
    'ocr_spat_math'
    """
    return "_".join(order_capabilities(caps))


@dataclass(frozen=True)
class Sample:
    """One benchmark question with its ground truth and the capabilities it requires."""

    id: str
    question: str
    answer: str
    capabilities: tuple[str, ...]
    image: str | None = None          # image file name (v1) or None; v2 questions carry theirs inline
    image_source: str | None = None

    @cached_property
    def integration(self) -> str:
        return integration_name(self.capabilities)


@dataclass
class Benchmark:
    """An ordered set of samples. `version` is ``"v1"`` or ``"v2"`` and selects the judge prompt."""

    name: str
    version: str
    samples: dict[str, Sample]
    source: str = ""
    images_dir: Path | None = None
    subset_name: str | None = None          # e.g. "bard" when restricted to the Bard set
    bard_set: tuple[str, ...] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.samples)

    @property
    def ids(self) -> list[str]:
        return list(self.samples)

    @property
    def capabilities(self) -> list[str]:
        """Capabilities present in this benchmark, in the paper's order."""
        return list(order_capabilities(c for s in self.samples.values() for c in s.capabilities))

    @property
    def integrations(self) -> list[str]:
        """Capability integrations present, by sample count (descending), ties by first appearance."""
        counts = Counter(s.integration for s in self.samples.values())
        first_seen = {name: i for i, name in reversed(list(enumerate(s.integration for s in self.samples.values())))}
        return sorted(counts, key=lambda name: (-counts[name], first_seen[name]))

    def capability_counts(self) -> dict[str, int]:
        return {c: sum(c in s.capabilities for s in self.samples.values()) for c in self.capabilities}

    def integration_counts(self) -> dict[str, int]:
        counts = Counter(s.integration for s in self.samples.values())
        return {name: counts[name] for name in self.integrations}

    def subset(self, ids: Iterable[str], name: str) -> "Benchmark":
        """Restrict to `ids` (kept in benchmark order). Unknown ids raise `BenchmarkError`."""
        wanted = list(dict.fromkeys(str(i) for i in ids))
        unknown = [i for i in wanted if i not in self.samples]
        if unknown:
            shown = ", ".join(unknown[:10]) + (" ..." if len(unknown) > 10 else "")
            raise BenchmarkError(f"subset '{name}' names {len(unknown)} id(s) not in {self.name}: {shown}")
        keep = set(wanted)
        samples = {k: v for k, v in self.samples.items() if k in keep}
        return replace(self, samples=samples, subset_name=name)

    def image_path(self, sample_id: str) -> Path | None:
        """Local path of a sample's image, when the benchmark came with images and the file exists."""
        sample = self.samples.get(sample_id)
        if self.images_dir is None or sample is None or not sample.image:
            return None
        root = self.images_dir.resolve()
        path = (root / sample.image).resolve()
        # never leave the images folder, whatever name an uploaded metadata file gives
        return path if path.is_relative_to(root) and path.is_file() else None

    def describe(self) -> dict:
        """Small JSON-able description stored with a run (enough to reload it)."""
        return {"name": self.name, "version": self.version, "source": self.source,
                "subset": self.subset_name, "n_samples": len(self)}


def make_samples_from_metadata(metadata: Mapping[str, Mapping]) -> dict[str, Sample]:
    """Build samples from the official metadata mapping ``{"v1_0": {"question", "answer", "capability", ...}}``.

    Raises `BenchmarkError` naming the first malformed entry.
    """
    if not isinstance(metadata, Mapping) or not metadata:
        raise BenchmarkError("benchmark metadata must be a non-empty JSON object of id -> sample")
    samples: dict[str, Sample] = {}
    for sid, entry in metadata.items():
        if not isinstance(entry, Mapping):
            raise BenchmarkError(f"sample {sid!r}: expected an object, got {type(entry).__name__}")
        missing = [k for k in ("question", "answer", "capability") if k not in entry]
        if missing:
            raise BenchmarkError(f"sample {sid!r}: missing field(s) {', '.join(missing)}")
        caps = entry["capability"]
        if isinstance(caps, str):
            caps = [c.strip() for c in caps.split(",") if c.strip()]
        if not isinstance(caps, (list, tuple)) or not caps or not all(isinstance(c, str) for c in caps):
            raise BenchmarkError(f"sample {sid!r}: 'capability' must be a non-empty list of capability codes")
        caps = [c.strip() for c in caps]
        bad = next((c for c in caps if not CAPABILITY_CODE.match(c)), None)
        if bad is not None:
            raise BenchmarkError(f"sample {str(sid)[:80]!r}: capability code {bad[:40]!r} is not allowed; codes are "
                                 "lowercase letters, digits and '_' (like rec, ocr, know, gen, spat, math, seq)")
        samples[str(sid)] = Sample(
            id=str(sid),
            question=str(entry["question"]),
            answer=str(entry["answer"]),
            capabilities=order_capabilities(caps),
            image=entry.get("imagename"),
            image_source=entry.get("imagesource"),
        )
    return samples


def detect_version(samples: Mapping[str, Sample]) -> str:
    """``"v2"`` when ids look like ``v2_N`` or any sample needs ``seq``; else ``"v1"``."""
    first = next(iter(samples), "")
    if first.startswith("v2_") or any("seq" in s.capabilities for s in samples.values()):
        return "v2"
    return "v1"


def load_bundled_v1() -> Benchmark:
    """The real MM-Vet v1 metadata shipped in ``assets/`` (218 samples, CC BY-NC 4.0, Yu et al.)."""
    metadata = json.loads(BUNDLED_V1_METADATA.read_text(encoding="utf-8"))
    bard = tuple(json.loads(BUNDLED_V1_BARD_SET.read_text(encoding="utf-8")))
    return Benchmark(name="mmvet-v1", version="v1", samples=make_samples_from_metadata(metadata),
                     source="bundled", bard_set=bard)
