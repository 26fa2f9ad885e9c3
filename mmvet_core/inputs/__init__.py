"""The benchmark and the files people bring: samples and capabilities, benchmark sources (bundled, folder, zip, hub),
safe archives, results files of every format, images, bounded parsing, folder housekeeping. Imports nothing else of
mmvet_core (the lowest layer).

Benchmark sources: `sources` (`load_benchmark`: what a spec names, `LoadLimits`), `official` (the official folder,
zip and metadata JSON), `hub` (Hugging Face datasets), `tables` (hub rows, parquet, records: where every loader
ends), `subsets` (the Bard set, subset files)."""
