"""After gpt-4-0613: the judge check against official grades, the per-grade calibration, the official-equivalent
estimate, the successor table, checks that travel between hosts (checkshare). May import runs and everything below
it."""
