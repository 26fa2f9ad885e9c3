"""`leaderboard publish|show|hide|verify|export|import`: the host's leaderboard (`mmvet_core.board`); whoever runs the
CLI on the database is the host."""
from __future__ import annotations

from pathlib import Path

from .. import __version__
from ..board.backup import export_board, import_board
from ..board.entries import board_rows, rank_groups
from ..board.fields import BoardError
from ..board.rows import RANK_NOTE, describe_entries, paper_rows
from ..board.filters import BoardFilter, filter_rows, rows_json
from ..board.publishing import load_entries, load_entry, publish_view, verify_entry
from ..runs import provenance as prov
from ..runs.lifecycle import load_run_view
from ..store import Store
from ..scores.terminal import fit
from .common import DEFAULT_DB, default_db, say
from .parser import Command, UsageError, option


def cmd_leaderboard(args) -> int:
    """The host's leaderboard commands (whoever runs the CLI on the database is the host)."""
    store = Store(args.db or default_db())
    try:
        if args.board_command == "publish":
            view = load_run_view(store, args.run)
            if view is None:
                raise UsageError(f"no run {args.run!r} in {store.path}")
            entry = publish_view(store, view, name=args.name, link=args.link, owner=view.run.owner,
                                 republish=args.republish, tool_version=__version__)
            say(f"Published {entry.name} as entry {entry.id} (version {entry.version}): total "
                  f"{entry.meta['total']:.1f}, judge {entry.meta['judge']} ({entry.meta['judge_kind']}), "
                  f"{entry.meta['benchmark_label']}; {prov.label(entry.provenance)}")
        elif args.board_command == "show":
            from ..successors.equivalence import entry_estimate
            entries = load_entries(store)
            # each successor entry's estimate as the app computes it (same draws, rounded once)
            rows = board_rows(entries, rank_groups(entries), estimate=lambda e: entry_estimate(store, e)) \
                + (paper_rows() if args.references else [])
            f = BoardFilter(judge=args.judge, benchmark=args.benchmark, query=args.query,
                            references=args.references)
            rows = filter_rows(rows, f)
            if args.json:
                print(rows_json(rows, f))
            else:
                print(describe_entries(rows))
                print("\n" + fit(RANK_NOTE))
        elif args.board_command == "hide":
            if load_entry(store, args.entry) is None:
                raise UsageError(f"no leaderboard entry {args.entry!r}")
            store.update_board_entry(args.entry, hidden=0 if args.show else 1)
            print(f"Entry {args.entry} is {'shown' if args.show else 'hidden'}.")
        elif args.board_command == "verify":
            for entry_id in args.entries:
                entry = verify_entry(store, entry_id, not args.undo)
                print(f"Entry {entry.id} (version {entry.version}): {prov.label(entry.provenance)}.")
        elif args.board_command == "export":
            path = export_board(store, args.dir)
            print(f"wrote {path} and {Path(args.dir) / 'README.md'} (load with datasets.load_dataset({args.dir!r}))")
        elif args.board_command == "import":
            report: list[str] = []
            n = import_board(store, args.dir, trust=args.trust, replace=args.replace, report=report)
            print(f"imported {n} entry versions from {args.dir}" + ("" if args.trust else
                  " (restored unverified: `leaderboard verify ENTRY` ranks one; --trust keeps a backup's own marks)"))
            for line in report:                      # what changed, entry by entry (nothing is replaced silently)
                print(f"  {line}")
    except BoardError as e:
        raise UsageError(str(e)) from e
    finally:
        store.close()
    return 0


#: New ids never start with '-'; an older one that does is given after '--' (else argparse reads it as an option).
ID_AFTER_DASHES = "an entry id; one that starts with '-' goes after the options and '--': hide --show -- ENTRY"

#: Every leaderboard command's last option.
DB = option("--db", default=None, help=f"SQLite database (default {DEFAULT_DB}, or $MMVET_DATA_DIR)")

LEADERBOARD = Command("leaderboard", "the server's leaderboard: publish a run, show, hide, verify, export, import",
                      run=cmd_leaderboard, subcommand_dest="board_command", subcommands=(
    Command("publish", "publish a finished run (a frozen copy of its scores) under a display name", (
        option("run", metavar="RUN", help="the run id (printed by grade: 'Run <id>: ...'); an older id that "
                                          "starts with '-' goes after the options and '--': publish --name N -- RUN"),
        option("--name", required=True, help="display name (plain text, at most 80 characters)"),
        option("--link", default="", help="optional https link (paper, model card)"),
        option("--republish", action="store_true",
               help="the run is on the board already: store its current scores as a new version"),
        DB)),
    Command("show", "the board with ranks (paired bootstrap within each judge and benchmark)", (
        option("--json", action="store_true", help="print JSON: each entry with name, total, ci [lo, hi], "
                                                    "rank [best, worst], judge, benchmark, runs, ..."),
        option("--judge", default="", help="only this judge (a name, or official / successor / baseline)"),
        option("--benchmark", default="", help="only this benchmark (v1, v1-bard, v2, ...)"),
        option("--query", default="", help="only names containing this text"),
        option("--references", action="store_true", help="include the paper's models (unranked)"),
        DB)),
    Command("hide", "hide an entry from the board (host); --show shows it again", (
        option("entry", metavar="ENTRY", help=ID_AFTER_DASHES),
        option("--show", action="store_true", help="show a hidden entry again"),
        DB)),
    Command("verify", "vouch for an entry's judge at its current version (imported grades, an endpoint the "
                      "server does not know): it is ranked; --undo withdraws it", (
        option("entries", metavar="ENTRY", nargs="+", help=ID_AFTER_DASHES),
        option("--undo", action="store_true", help="withdraw the host's verification"),
        DB)),
    Command("export", "write the board (every entry and version) to a folder that "
                      "datasets.load_dataset reads (board.jsonl + README.md card)", (
        option("dir", metavar="DIR"),
        DB)),
    Command("import", "restore entries from an export folder (checked field by field)", (
        option("dir", metavar="DIR"),
        option("--trust", action="store_true", help="the backup is your own: keep its provenance and "
                                                    "verifications (default: restored entries are unverified)"),
        option("--replace", action="store_true", help="replace entries already on this board that the backup "
                                                      "changes (default: refused, with what would change)"),
        DB)),
))
