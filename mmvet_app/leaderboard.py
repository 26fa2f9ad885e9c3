"""The Leaderboard view: the server's published entries with honest rank ranges, filters, a deep link
(``?board=…``), overlaid radars of chosen rows, a read-only entry card with its frozen per-sample grades, CSV and
JSON downloads, the host's hide control, its `gr.api` endpoints, and the publish control of a run card
(`build_publish_control`, placed by the grade view). The rules are `GradingService`'s and
`mmvet_core.board`'s; everything a visitor typed is shown as text (table cells, escaped HTML)."""
from __future__ import annotations

import hashlib
import html
import threading
from dataclasses import dataclass

import gradio as gr

from mmvet_core.board.fields import MAX_DISPLAY_NAME
from mmvet_core.board.rows import LEADING_COLUMNS, RANK_NOTE, SIX, TABLE_COLUMNS, BoardRow, format_rank
from mmvet_core.board.snapshot import KINDS
from mmvet_core.board.filters import SORT_KEYS, BoardFilter, filter_from_query, filter_to_query, rows_csv, rows_json
from mmvet_core.inputs.benchmark import CAPABILITY_ORDER
from mmvet_core.scores.charts import make_radar
from mmvet_core.service import GradingService

from mmvet_app.common import Page, api_errors, base_url, esc, toasts, visitor

ALL = "all"
#: Radars overlay at most this many rows (more is unreadable).
MAX_OVERLAYS = 8
#: Rows the table shows at once: a page of a large board opens and re-sorts fast (the whole board re-rendered
#: in the browser took 2-4 s at 1,000 entries); "Sort by" and the filters act on every row, the downloads hold all.
PAGE_ROWS = 100
#: The view's tab (a ``?board=`` link opens it).
TAB_ID = "leaderboard"
NUMBER_COLUMNS = {"total", "runs", *SIX}
#: The columns a visitor may add to the leading ones (`LEADING_COLUMNS`), in the table's order.
MORE_COLUMNS = [c for c in TABLE_COLUMNS if c not in LEADING_COLUMNS]
SAMPLE_COLUMNS = ["sample", "capabilities", "score per judge run", "mean"]
#: A rank group's heading row in the table (its name cell names the group; the other cells stay empty).
GROUP_MARK = "▸"
GROUP_STYLE = "font-weight:600; background-color:rgba(99,102,241,0.12);"


@dataclass
class LeaderboardView:
    section: gr.Column
    judge: gr.Dropdown
    benchmark: gr.Dropdown
    query: gr.Textbox
    sort: gr.Dropdown
    descending: gr.Checkbox
    references: gr.Checkbox
    table: gr.Dataframe
    page_no: gr.State
    count: gr.Markdown
    link: gr.Textbox
    overlays: gr.Dropdown
    picked: gr.State
    radar_caps: gr.Plot
    radar_ints: gr.Plot
    card: gr.HTML
    samples: gr.Dataframe
    downloads: gr.File
    columns: gr.CheckboxGroup | None = None


# ---- pure helpers (rows in, page values out) ----
def shown_columns(chosen: list[str] | None) -> list[str]:
    """The leading columns, then the ones the visitor chose, in the table's order (unknown names ignored)."""
    extra = set(chosen or [])
    return [c for c in TABLE_COLUMNS if c in LEADING_COLUMNS or c in extra]


def table_cells(rows: list[BoardRow], columns: list[str] | None = None) -> tuple[list[list], list[str | None]]:
    """(the table's rows for `columns`, the key of each row: `overlay_key`, or None for a group heading). Each rank
    group starts with a heading row that names it (judge · endpoint · benchmark), so that two groups are never
    read as one ranking."""
    columns = columns or list(LEADING_COLUMNS)
    at = [TABLE_COLUMNS.index(c) for c in columns]
    name_at = columns.index("name")
    out, keys, group = [], [], None
    for r in rows:
        if r.group != group:
            group = r.group
            size = f" — {r.group_size} ranked together" if r.group_size > 1 and r.rank else ""
            heading = [None if c in NUMBER_COLUMNS else "" for c in columns]
            heading[name_at] = f"{GROUP_MARK} {group}{size}"
            out.append(heading)
            keys.append(None)
        cells = r.cells()
        out.append([("" if cells[i] is None and c not in NUMBER_COLUMNS else cells[i]) for i, c in zip(at, columns)])
        keys.append(overlay_key(r))
    return out, keys


def table_value(rows: list[BoardRow], columns: list[str]):
    """The Dataframe's value: a pandas Styler whose group headings are banded (bold, tinted), and the row keys."""
    import pandas as pd

    data, keys = table_cells(rows, columns)
    frame = pd.DataFrame(data, columns=columns)
    styled = frame.style.apply(lambda row: [GROUP_STYLE if keys[row.name] is None else "" for _ in row], axis=1) \
        .format(precision=1, na_rep="")       # the numbers were rounded once (`BoardRow.cells`): shown as they are
    return styled, keys


def datatypes(columns: list[str]) -> list[str]:
    return ["number" if c in NUMBER_COLUMNS else "str" for c in columns]


def overlay_key(row: BoardRow) -> str:
    return f"entry:{row.entry}" if row.entry else f"paper:{row.benchmark}:{row.name}"


def overlay_label(row: BoardRow) -> str:
    return f"{row.name} · {row.judge} · {row.benchmark_label}"


def radars(rows: list[BoardRow]):
    """The capability and integration radars of `rows` overlaid (axes: the capabilities present, in the paper's
    order; the integrations of the first row, then any other's)."""
    if not rows:
        return None, None
    caps = [c for c in CAPABILITY_ORDER if any(r.capabilities.get(c) is not None for r in rows)]
    ints: list[str] = []
    for r in rows:
        ints += [k for k in r.integrations if k not in ints]
    label = lambda r: f"{r.name} ({r.judge})"     # noqa: E731  (make_radar keeps names inert)
    cap_fig = make_radar([(label(r), r.capabilities) for r in rows], caps, "Core capabilities") if caps else None
    int_fig = make_radar([(label(r), r.integrations) for r in rows], ints, "Capability integrations") \
        if ints else None
    return cap_fig, int_fig


def card_html(entry: dict) -> str:
    """The read-only card of an entry (every value escaped; the link is an https URL the service validated)."""
    e = lambda v: html.escape(str(v), quote=True)     # noqa: E731
    row, meta = entry["row"], entry["meta"]
    ci = "" if None in row["ci"] else f" [{row['ci'][0]:.1f}, {row['ci'][1]:.1f}]"
    rank = (f"{format_rank(row['rank'])} of {row['rank_group_size']} ({row['judge']} · {row['benchmark_label']})"
            if row["rank"] else row.get("rank_note") or "—")
    items = [("Total", f"{row['total']:.1f}{ci} (95 % interval over samples)"),
             ("Rank", rank),
             ("Provenance", _provenance_text(row)),
             ("Judge", f"{row['judge']} ({row['judge_kind']}{'' if row.get('verified') else ', claimed'})"),
             ("Benchmark", f"{row['benchmark_label']} · {len(meta.get('sample_ids', []))} samples"),
             ("Judge runs", row["runs"]), ("Graded", row["date"]),
             ("Version", f"{row['version']} (versions: {', '.join(map(str, entry['versions']))})"),
             ("Entry", row["entry"])]
    if row.get("metric_note"):
        items.insert(3, ("Note", row["metric_note"]))
    if meta.get("overrides"):
        items.insert(3, ("Overrides", f"{meta['overrides']} sample(s) graded by hand by the owner"))
    link = (f'<p><a href="{e(row["link"])}" rel="nofollow noopener noreferrer" target="_blank" '
            f'id="board-card-link">{e(row["link"])}</a></p>') if row.get("link") else ""
    if not row.get("verified"):         # said above the facts, not only in a row of them
        link += (f'<p id="board-card-unverified" style="margin:0 0 4px 0;font-weight:600;'
                 f'color:var(--error-text-color, #b91c1c)">⚠ {e(row.get("provenance") or "judge not verified")}'
                 f'</p>')
    dl = "".join(f'<dt style="color:var(--body-text-color-subdued)">{e(k)}</dt><dd style="margin:0">{e(v)}</dd>'
                 for k, v in items)
    return (f'<div class="card" id="board-card" style="border:1px solid var(--border-color-primary);'
            f'border-radius:8px;padding:8px 12px"><h3 id="board-card-name" style="margin:0 0 4px 0">'
            f'{e(row["name"])}</h3>{link}<dl style="display:grid;grid-template-columns:max-content 1fr;'
            f'gap:2px 12px;margin:0;font-size:0.9em">{dl}</dl></div>')


def _provenance_text(row: dict) -> str:
    """The card's provenance line: the label, and what the record adds (the judges a file claims, the endpoints
    that answered, the models they said they were)."""
    d = row.get("provenance_detail") or {}
    parts = [row.get("provenance") or "unknown"]
    if d.get("source") == "imported":
        parts.append(f"from {d.get('imported_from') or 'a grade file'}; the file names {d.get('judge') or '?'}")
    elif d.get("served_by"):
        parts.append(f"the endpoint answered as {', '.join(d['served_by'])}")
    return " · ".join(parts)


def sample_cells(entry: dict) -> list[list]:
    out = []
    for s in entry["samples"]:
        graded = [v for v in s["scores"] if v is not None]
        out.append([s["id"], s["capabilities"], ", ".join("—" if v is None else f"{v:g}" for v in s["scores"]),
                    round(sum(graded) / len(graded), 2) if graded else None])
    return out


def board_link(svc: GradingService, f: BoardFilter, base: str | None) -> str:
    root = svc.settings.public_url or base or "http://localhost:7860"
    from urllib.parse import quote
    return f"{root.rstrip('/')}/?board={quote(filter_to_query(f), safe='')}"


def _filter(judge, bench, query, sort, desc, refs) -> BoardFilter:
    return BoardFilter(judge="" if judge in (None, ALL) else judge, benchmark="" if bench in (None, ALL) else bench,
                       query=query or "", sort=sort or "rank", descending=bool(desc),
                       references=bool(refs)).normalised()


def page_of(rows: list, page: object) -> tuple[list, int, str]:
    """(the rows of page `page` (clamped to the pages there are), that page's number, what the count line says).

    >>> page_of(list(range(250)), 9)[1:]
    (3, 'Rows 201–250 of 250 (page 3 of 3). The column headers sort this page; *Sort by* and the filters act on every row; the downloads hold them all.')
    >>> page_of([1, 2], 1)[1:]
    (1, '2 rows.')
    """
    n_pages = max(1, -(-len(rows) // PAGE_ROWS))
    try:
        number = min(max(1, int(page or 1)), n_pages)
    except (TypeError, ValueError):
        number = 1
    start = (number - 1) * PAGE_ROWS
    shown = rows[start:start + PAGE_ROWS]
    if n_pages == 1:
        return shown, number, f"{len(rows)} row{'s' if len(rows) != 1 else ''}."
    return shown, number, (f"Rows {start + 1}–{start + len(shown)} of {len(rows)} (page {number} of {n_pages}). "
                           "The column headers sort this page; *Sort by* and the filters act on every row; the "
                           "downloads hold them all.")


def filter_choices(rows: list[BoardRow]) -> tuple[list, list]:
    judges = [ALL, *KINDS] + sorted({r.judge for r in rows if not r.reference})
    benches = [ALL] + sorted({r.benchmark for r in rows})
    return judges, benches


# ---- the API ----
def register_leaderboard_api(svc: GradingService) -> None:
    """`leaderboard` (the table the view shows), `leaderboard_entry`, `publish`, `rename_entry`, `unpublish`,
    `hide_entry`, `verify_entry`: the same service calls as the page."""

    @api_errors
    def leaderboard(board: str = "", judge: str = "", benchmark: str = "", query: str = "", sort: str = "rank",
                    descending: bool = False, references: bool = True, offset: int = 0, limit: int = 100) -> dict:
        """One page of the leaderboard as the view shows it: {filter, rank_note, count, offset, limit,
        next_offset, entries: [{entry, name, judge, judge_kind, provenance ("imported, judge not verified",
        "graded here (api.openai.com)", ...), verified, rank_note, benchmark, runs, total, ci [lo, hi],
        rank [best, worst], capabilities, integrations, date, ...}]}. `board` is a deep link's filter text
        (``judge=official&benchmark=v1``); else the named filters. `count` rows match; `entries` are rows
        `offset`.. of them, at most `limit` (1 to 500); pass `next_offset` back as `offset` for the next page
        (null after the last)."""
        filters = board if board else {"judge": judge, "benchmark": benchmark, "query": query, "sort": sort,
                                       "descending": descending, "references": references}
        return svc.board.leaderboard_json(filters, offset=offset, limit=limit)

    @api_errors
    def leaderboard_entry(entry_id: str) -> dict:
        """One entry: its row, frozen metadata and frozen per-sample scores (read-only)."""
        return svc.board.board_entry(entry_id)

    @api_errors
    def publish(run_id: str, name: str, link: str = "", owner_tok: str = "", republish: bool = False,
                request: gr.Request = None) -> dict:
        """Publish your finished run under a display name (republish: a new version of its entry)."""
        return svc.board.publish(run_id, name, link, owner_tok, visitor=visitor(svc, request), republish=republish)

    @api_errors
    def rename_entry(entry_id: str, name: str, link: str = "", owner_tok: str = "", request: gr.Request = None) -> str:
        """Rename your entry (and set or clear its link)."""
        return svc.board.rename_entry(entry_id, owner_tok, name, link, visitor=visitor(svc, request))

    @api_errors
    def unpublish(entry_id: str, owner_tok: str = "", request: gr.Request = None) -> str:
        """Take your entry off the board."""
        return svc.board.unpublish(entry_id, owner_tok, visitor=visitor(svc, request))

    @api_errors
    def hide_entry(entry_id: str, secret: str = "", hidden: bool = True, request: gr.Request = None) -> str:
        """The host hides (or shows) an entry; needs the host secret."""
        return svc.board.hide_entry(entry_id, secret, hidden, visitor=visitor(svc, request))

    @api_errors
    def verify_entry(entry_id: str, secret: str = "", verified: bool = True, request: gr.Request = None) -> str:
        """The host vouches for an entry's judge (or withdraws that); needs the host secret."""
        return svc.board.verify_entry(entry_id, secret, verified, visitor=visitor(svc, request))

    for fn in (leaderboard, leaderboard_entry, publish, rename_entry, unpublish, hide_entry, verify_entry):
        gr.api(fn, api_name=fn.__name__)


# ---- the view ----
def build_leaderboard(demo: gr.Blocks, page: Page, tab: gr.Tab | None = None) -> LeaderboardView:
    """Lay out the Leaderboard tab's content, wire its handlers (filled when the tab is opened; a `?board=` link
    opens the tab with its filters) and register its `gr.api` endpoints (`register_leaderboard_api`)."""
    svc = page.svc
    register_leaderboard_api(svc)
    with gr.Column(elem_id="leaderboard-section") as section:
        with gr.Row():
            judge = gr.Dropdown(choices=[ALL, *KINDS], value=ALL, label="Judge", elem_id="board-judge",
                                allow_custom_value=True, scale=2)
            bench = gr.Dropdown(choices=[ALL], value=ALL, label="Benchmark", elem_id="board-benchmark",
                                allow_custom_value=True, scale=2)
            query = gr.Textbox(label="Name contains", elem_id="board-query", scale=2, max_lines=1)
            sort = gr.Dropdown(choices=list(SORT_KEYS), value="rank", label="Sort by", elem_id="board-sort",
                               scale=1)
            desc = gr.Checkbox(label="Descending", value=False, elem_id="board-desc", scale=1)
            refs = gr.Checkbox(label="Paper's models", value=True, elem_id="board-refs", scale=1)
        table = gr.Dataframe(headers=list(LEADING_COLUMNS), datatype=datatypes(list(LEADING_COLUMNS)),
                             interactive=False, type="array", label="Leaderboard", show_label=False,
                             elem_id="board-table", max_height=560, show_search="filter", pinned_columns=2,
                             wrap=True, column_widths=["80px", "22%", "70px", "120px", "26%", "16%"])
        with gr.Accordion("More columns", open=False, elem_id="board-columns-section"):
            columns = gr.CheckboxGroup(MORE_COLUMNS, value=[], show_label=False, elem_id="board-columns")
        page_no = gr.State(1)
        row_keys = gr.State([])         # the key of each row shown (None: a group heading), for a click
        with gr.Row(equal_height=True):
            count = gr.Markdown("", elem_id="board-count")
            prev_btn = gr.Button("◀ Previous", size="sm", elem_id="board-prev", scale=0)
            next_btn = gr.Button("Next ▶", size="sm", elem_id="board-next", scale=0)
        gr.Markdown(RANK_NOTE + " Each rank group starts with a tinted heading row naming its judge, endpoint and "
                    "benchmark: entries are ranked only within it.", elem_id="board-note")
        gr.Markdown("Entries graded by the **same judge on the same benchmark and samples** are ranked against "
                    "each other with paired bootstrap tests; other judges and benchmarks are never ranked together. "
                    "Only entries whose judge is **verified** are ranked: graded on this server, or vouched for by "
                    "the host. Grades imported from a file, or graded on a visitor's own endpoint, are listed with "
                    "their *provenance* (\"imported, judge not verified\") and no rank. The paper's models are "
                    "reference rows (the official metric as published). A successor judge's entry shows its "
                    "official-equivalent **estimate** (what gpt-4-0613 would have given, from the judge's check; "
                    "never the official metric) or why it has none. Click rows to overlay their radars and open "
                    "their card.", elem_id="board-help")
        with gr.Row():
            link = gr.Textbox(label="Link to this view (with its filters)", interactive=False, elem_id="board-link",
                              buttons=["copy"], scale=4)
            dl_btn = gr.Button("CSV + JSON", size="sm", elem_id="board-download-button", scale=0)
        downloads = gr.File(label="Downloads", file_count="multiple", interactive=False, visible=False,
                            elem_id="board-downloads")
        overlays = gr.Dropdown(choices=[], value=[], multiselect=True, max_choices=MAX_OVERLAYS,
                               label="Radars of (click rows to add)", elem_id="board-overlays")
        # the rows whose radars are overlaid, kept on the server: a click adds its row to what every earlier click
        # left (read when the click is handled, not when it was made), so quick clicks are all kept
        picked = gr.State([])
        clicks = gr.State({"made": 0})     # the card shows the last click, whichever answers last
        with gr.Row():
            radar_caps = gr.Plot(show_label=False, elem_id="board-radar-caps")
            radar_ints = gr.Plot(show_label=False, elem_id="board-radar-ints")
        card = gr.HTML("", elem_id="board-card-box")
        samples = gr.Dataframe(headers=SAMPLE_COLUMNS, interactive=False, type="array", visible=False,
                               label="Frozen per-sample grades (read-only)", elem_id="board-samples", max_height=360)
        if svc.settings.host_secret:
            with gr.Accordion("Host: hide or verify an entry", open=False, elem_id="board-host"):
                with gr.Row():
                    host_entry = gr.Textbox(label="Entry id", elem_id="board-host-entry", max_lines=1)
                    host_secret = gr.Textbox(label="Host secret", type="password", elem_id="board-host-secret",
                                             max_lines=1)
                    hide_btn = gr.Button("Hide", size="sm", elem_id="board-hide")
                    show_btn = gr.Button("Show again", size="sm", elem_id="board-show")
                    verify_btn = gr.Button("Verify judge", size="sm", elem_id="board-verify")
                    unverify_btn = gr.Button("Withdraw verification", size="sm", elem_id="board-unverify")
    view = LeaderboardView(section, judge, bench, query, sort, desc, refs, table, page_no, count, link, overlays,
                           picked, radar_caps, radar_ints, card, samples, downloads, columns)
    pick_locks = [threading.Lock() for _ in range(64)]   # one session's picks change its list one at a time

    def lock_of(request: gr.Request | None) -> threading.Lock:
        key = getattr(request, "session_hash", None) or ""
        return pick_locks[int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % len(pick_locks)]
    filters = [judge, bench, query, sort, desc, refs]

    def refresh(judge_v, bench_v, query_v, sort_v, desc_v, refs_v, chosen, page, cols, request: gr.Request):
        f = _filter(judge_v, bench_v, query_v, sort_v, desc_v, refs_v)
        every = svc.board.board_rows()
        rows, number, count_text = page_of(svc.board.leaderboard(f), page)
        judges, benches = filter_choices(every)
        keys = {overlay_key(r): r for r in every}
        choices = [(overlay_label(r), overlay_key(r)) for r in rows]
        with lock_of(request):                     # rows taken off the board leave the overlays
            chosen[:] = [c for c in chosen if c in keys]
            kept = list(chosen)
        choices += [(overlay_label(keys[c]), c) for c in kept if c not in {k for _, k in choices}]
        cols_shown = shown_columns(cols)
        value, keys = table_value(rows, cols_shown)
        return (gr.Dataframe(value=value, headers=cols_shown, datatype=datatypes(cols_shown)), keys,
                board_link(svc, f, base_url(request)),
                gr.Dropdown(choices=judges), gr.Dropdown(choices=benches),
                gr.Dropdown(choices=choices, value=kept), number, count_text)

    def first_page(judge_v, bench_v, query_v, sort_v, desc_v, refs_v, chosen, cols, request: gr.Request):
        return refresh(judge_v, bench_v, query_v, sort_v, desc_v, refs_v, chosen, 1, cols, request)

    def turn(step: int):
        def go(judge_v, bench_v, query_v, sort_v, desc_v, refs_v, chosen, page, cols, request: gr.Request):
            return refresh(judge_v, bench_v, query_v, sort_v, desc_v, refs_v, chosen, (page or 1) + step, cols,
                           request)
        return go

    refresh_outputs = [table, row_keys, link, judge, bench, overlays, page_no, count]
    # .input (a visitor's change), not .change: values set by the load handler must not re-run it
    gr.on([judge.input, bench.input, sort.input, desc.input, refs.input, query.submit], first_page,
          [*filters, picked, columns], refresh_outputs, api_visibility="private", show_progress="minimal")
    for btn, step in ((prev_btn, -1), (next_btn, 1)):
        btn.click(turn(step), [*filters, picked, page_no, columns], refresh_outputs, api_visibility="private",
                  show_progress="minimal")
    columns.input(refresh, [*filters, picked, page_no, columns], refresh_outputs, api_visibility="private",
                  show_progress="minimal")

    def on_load(request: gr.Request):
        params = dict(request.query_params) if request else {}
        if "board" not in params:          # filled when opened: a page load does not carry the whole board
            return tuple(gr.skip() for _ in range(1 + len(filters) + len(refresh_outputs)))
        f = filter_from_query(params.get("board"))
        out = refresh(f.judge or ALL, f.benchmark or ALL, f.query, f.sort, f.descending, f.references, [], 1, [],
                      request)      # (a page just opened has picked nothing)
        return (gr.Tabs(selected=TAB_ID) if page.tabs is not None else gr.skip(),
                gr.Dropdown(value=f.judge or ALL), gr.Dropdown(value=f.benchmark or ALL),
                f.query, f.sort, f.descending, f.references, *out)

    # (no progress shown: this runs on every page load, most of them without ?board=)
    demo.load(on_load, None, [page.tabs if page.tabs is not None else section, *filters, *refresh_outputs],
              api_visibility="private", show_progress="hidden")
    if tab is not None:
        tab.select(refresh, [*filters, picked, page_no, columns], refresh_outputs, api_visibility="private",
                   show_progress="minimal")

    def overlay_radars(chosen):
        keys = {overlay_key(r): r for r in svc.board.board_rows()}
        return radars([keys[c] for c in chosen or [] if c in keys])

    overlays.change(overlay_radars, overlays, [radar_caps, radar_ints], api_visibility="private",
                    show_progress="hidden")

    @toasts(2)
    def pick(chosen, seen, shown_keys, evt: gr.SelectData, request: gr.Request):
        """A clicked row joins the session's overlays (`picked`, changed in place: a click handled while an
        earlier one is still running adds to it rather than to what the page showed when it was made) and opens
        its card, unless a later click's card is shown already. A group heading opens nothing."""
        row = evt.row_value or []
        keys = {overlay_key(r): r for r in svc.board.board_rows()}
        index = evt.index[0] if isinstance(evt.index, (list, tuple)) and evt.index else None
        match = shown_keys[index] if isinstance(index, int) and 0 <= index < len(shown_keys or []) else None
        # the table's headers sort rows in the browser: the clicked row's own cells (name, total) must agree
        if match is not None and (match not in keys or len(row) < 3 or keys[match].name != row[1]):
            match = next((k for k, r in keys.items() if len(row) > 2 and r.name == row[1]
                          and r.total == row[2]), None)
        if match is None:
            return gr.skip(), gr.skip()
        entry_id = keys[match].entry
        with lock_of(request):
            if match and match not in chosen and len(chosen) < MAX_OVERLAYS:
                chosen.append(match)
            seen["made"] = mine = seen["made"] + 1
        entry = svc.board.board_entry(entry_id) if entry_id else None
        with lock_of(request):
            # only the latest click writes the card: two answers that finish together can reach the page in
            # either order (Gradio post-processes them on separate threads), so an older one must not write at all
            if mine < seen["made"]:
                return gr.skip(), gr.skip()
        if entry is None:
            return gr.HTML(""), gr.Dataframe(visible=False)
        return card_html(entry), gr.Dataframe(value=sample_cells(entry), visible=True)

    def show_picks(chosen, request: gr.Request):
        with lock_of(request):
            return gr.Dropdown(value=list(chosen))

    def edit_picks(value, chosen, request: gr.Request):
        """The visitor removed (or chose) overlays in the dropdown itself: that is the session's list now."""
        with lock_of(request):
            chosen[:] = [v for v in value or [] if isinstance(v, str)][:MAX_OVERLAYS]

    # every click is handled ("multiple": none is dropped while another runs); after each, the dropdown shows the
    # list as it is then ("always_last": a show asked while one runs waits and reads the list afresh)
    table.select(pick, [picked, clicks, row_keys], [card, samples], api_visibility="private",
                 trigger_mode="multiple") \
        .then(show_picks, picked, overlays, api_visibility="private", show_progress="hidden",
              trigger_mode="always_last")
    overlays.input(edit_picks, [overlays, picked], None, api_visibility="private", show_progress="hidden")

    def download(*args):
        f = _filter(*args)
        rows = svc.board.leaderboard(f)
        csv_text, json_text = rows_csv(rows), rows_json(rows, f)
        # one folder per distinct table (the exports folder's housekeeping bounds them by age and size)
        digest = hashlib.sha256((csv_text + json_text).encode("utf-8")).hexdigest()[:16]
        out = svc.exports_dir / f"leaderboard-{digest}"
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / "mmvet-leaderboard.csv", out / "mmvet-leaderboard.json"]
        for path, text in zip(paths, (csv_text, json_text)):
            path.write_text(text, encoding="utf-8")
        return gr.File(value=[str(p) for p in paths], visible=True)

    dl_btn.click(download, filters, downloads, api_visibility="private")

    if svc.settings.host_secret:
        def host_action(name: str, flag: bool):
            @toasts(len(refresh_outputs))
            def act(entry_id, secret, judge_v, bench_v, query_v, sort_v, desc_v, refs_v, chosen, page_no_v, cols,
                    request: gr.Request):
                control = getattr(svc.board, name)           # (looked up per call: a test can hold it)
                gr.Info(esc(control((entry_id or "").strip(), secret, flag, visitor=visitor(svc, request))))
                return refresh(judge_v, bench_v, query_v, sort_v, desc_v, refs_v, chosen, page_no_v, cols, request)
            return act

        # the action and the table it changed in one event, host actions one at a time ("board-host"), and every
        # click handled ("multiple"; Gradio's default drops a click made while the previous one still runs): the
        # host verifying two entries in quick succession sees both verified, the last table answered last
        for btn, fn in ((hide_btn, host_action("hide_entry", True)),
                        (show_btn, host_action("hide_entry", False)),
                        (verify_btn, host_action("verify_entry", True)),
                        (unverify_btn, host_action("verify_entry", False))):
            btn.click(fn, [host_entry, host_secret, *filters, picked, page_no, columns], refresh_outputs,
                      api_visibility="private", trigger_mode="multiple", concurrency_id="board-host",
                      concurrency_limit=1, show_progress="minimal")
    return view


# ---- the publish control of a run card ----
@dataclass
class PublishControl:
    box: gr.Column
    state: gr.Markdown
    name: gr.Textbox
    link: gr.Textbox


def publish_state(svc: GradingService, run_id: str, owner: str) -> tuple[bool, str, str, str]:
    """(visible, what the control says, name, link) for the owner's open run."""
    perms = svc.runs.permissions(run_id, owner)
    if not perms.owner:
        return False, "", "", ""
    entry = svc.board.entry_of_run(run_id, owner)
    if entry is None:
        return True, "Not on the leaderboard.", "", ""
    where = ("hidden by the host" if entry["hidden"] else
             "on the leaderboard" if entry["published"] else "unpublished")
    stale = " · the run changed since: republish to update the board" if entry["stale"] else ""
    trust = "" if entry.get("verified", True) else \
        f" · {entry.get('provenance')}: listed without a rank until the host verifies it"
    return (True, f"Entry `{entry['entry']}`, version {entry['version']}: {where}{stale}{trust}.", entry["name"],
            entry["link"])


def build_publish_control(page: Page) -> PublishControl:
    """The owner's publish / republish / rename / unpublish control (hidden for anyone else); lay it out inside
    the run card's column. Wired to the open run (``page.run_state``) and the owner token."""
    svc = page.svc
    with gr.Column(visible=False, elem_id="publish-control", variant="panel") as box:
        state = gr.Markdown("", elem_id="publish-state")
        with gr.Row():
            name = gr.Textbox(label="Display name on the leaderboard", max_lines=1, elem_id="publish-name",
                              max_length=MAX_DISPLAY_NAME, scale=3)
            link = gr.Textbox(label="Link (optional, https://…)", max_lines=1, elem_id="publish-link", scale=3)
        with gr.Row():
            pub = gr.Button("Publish", size="sm", variant="primary", elem_id="publish-button")
            repub = gr.Button("Republish (new version)", size="sm", elem_id="republish-button")
            ren = gr.Button("Rename", size="sm", elem_id="publish-rename")
            unpub = gr.Button("Unpublish", size="sm", elem_id="unpublish-button")
    control = PublishControl(box, state, name, link)

    def show(run_id, owner_tok):
        visible, text, n, u = publish_state(svc, run_id, owner_tok)
        if not visible:
            return gr.Column(visible=False), "", gr.skip(), gr.skip()
        return gr.Column(visible=True), text, n or gr.skip(), u or gr.skip()

    outputs = [box, state, name, link]
    for trigger in (page.run_state.change, page.owner.change):
        trigger(show, [page.run_state, page.owner], outputs, api_visibility="private", show_progress="hidden")

    def act(kind):
        @toasts(4)
        def handler(run_id, owner_tok, n, u, request: gr.Request):
            if kind in ("publish", "republish"):
                row = svc.board.publish(run_id, n, u, owner_tok, visitor=visitor(svc, request),
                                  republish=kind == "republish")
                rank = f"rank {format_rank(row['rank'])}" if row["rank"] else row["rank_note"] or "not ranked"
                gr.Info(esc(f"Published as {row['name']} (version {row['version']}): {rank}."))
            else:
                entry = svc.board.entry_of_run(run_id, owner_tok)
                if entry is None:
                    gr.Warning("This run is not on the leaderboard yet: publish it first.")
                    return show(run_id, owner_tok)
                who = visitor(svc, request)
                message = svc.board.rename_entry(entry["entry"], owner_tok, n, u, visitor=who) if kind == "rename" \
                    else svc.board.unpublish(entry["entry"], owner_tok, visitor=who)
                gr.Info(esc(message))
            return show(run_id, owner_tok)
        return handler

    for btn, kind in ((pub, "publish"), (repub, "republish"), (ren, "rename"), (unpub, "unpublish")):
        btn.click(act(kind), [page.run_state, page.owner, name, link], outputs, api_visibility="private")
    return control
