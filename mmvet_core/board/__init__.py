"""The leaderboard: published entries, rank groups, the board's schema and backups, the server's book, names that
cannot impersonate. May import successors and everything below.

Its modules: `entries` (an entry, who is ranked with whom, the ranks), `snapshot` (the frozen copy of a run),
`rows` (the table's rows, reference rows, the estimate column), `fields` (what a visitor types), `filters` (filters,
deep links, downloads), `publishing` (publish, verify, read back), `backup` (export / import), `ranks` (the rank
engine), `book` (the server's board kept ranked), `schema` (stored copies checked), `names` (look-alike names)."""
