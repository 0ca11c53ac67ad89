"""What every app's admin shares: big-table paging (counts estimated, keyset pages) and the
read-only admin base."""
