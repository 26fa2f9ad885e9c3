"""The benchmark and the files people bring: samples and capabilities, benchmark sources (bundled, folder, zip, hub),
safe archives, results files of every format, images, bounded parsing, folder housekeeping. Imports nothing else of
mmvet_core (the lowest layer)."""
