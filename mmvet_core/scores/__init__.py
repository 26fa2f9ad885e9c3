"""Grades into numbers (pure): the official aggregation, bootstrap statistics, official exports and grade files from
anywhere, comparisons of grade sets, charts, reports that fit a terminal. May import inputs and store."""
