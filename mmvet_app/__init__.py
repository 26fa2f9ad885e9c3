"""The page, one module per view over `mmvet_core.service.GradingService` (app.py composes them).

- `common`      the page's session (owner token, open run), the header, and the helpers every view uses:
                `toasts`, `esc`, the visitor / base-URL / file-path helpers, the service's input records
- `widgets`     what a run looks like: run card HTML, radar figures and overlays, progress, sample filters
- `api`         the named `gr.api` endpoints scripts call (registered first: they keep their plain names)
- `grade`       the results file, what was found, settings, Grade/Stop/Resume, progress, score, run card, radars
- `judge_check` the "check this judge first" section (inside the grade view's setup column)
- `samples`     the samples table, its filters, one sample's detail, the override
- `my_runs`     the visitor's runs, reopen, rename, delete
- `grade_file`  open a grade file without any judge call
- `compare`     runs and grade files compared
- `leaderboard` the server's leaderboard (filters, ranks, radars, entry cards, downloads, its API) and the
                run card's publish control

A view module has `build_<view>(page, ...)`, which lays out its components (in page order) and returns them as a
small dataclass, and, when it has handlers that need other views' components, `wire_<view>(page, ...)`, which
registers them; the other views' components are passed in explicitly (no module-level state).
"""
