"""The judge and the one place that calls it: prompts (data) and their filling, the OpenAI-compatible judge and the
offline baseline, the HTTP transport, rate limits (also shared across processes), the grading engine, the Batch API,
budgets, cost estimates, what an endpoint serves. May import inputs, scores and store."""
