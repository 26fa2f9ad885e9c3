"""The leaderboard: published entries, rank groups, the board's schema and backups, the server's book, names that
cannot impersonate. May import successors and everything below."""
