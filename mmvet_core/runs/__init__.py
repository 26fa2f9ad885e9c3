"""A run's life: create, view, export, import (lifecycle); how its grades came to exist (provenance: graded here or
imported, at which endpoints); grade sets from runs; background jobs, grading workers and their queue (taskqueue);
what the app shows of a run (views). May import inputs, store, scores, judging."""
