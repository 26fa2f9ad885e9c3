"""What a grading run will cost before anything is spent (pure).

Tokens are estimated from characters (about 4 per token for English text; the few-shot prompt dominates).
The call count is the minimum (one call per sample and run); unparsable answers add up to five retries each.
Prices are list prices in USD per million tokens, as published by OpenAI; unknown models get no price. The Batch
API (`grade --batch`) costs half. A judge OpenAI has shut down (``retired_judges.json``: the official ``gpt-4-0613``
and ``gpt-4`` since 2026-10-23) keeps its last list price only for endpoints that still serve it (a proxy, a
dedicated deployment), and the summary says it is shut down.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..inputs.benchmark import Benchmark
from .prompt import render_prompt

#: USD per 1M (input, output) tokens, OpenAI list prices (checked 2026-12; for the shut-down official judges, the
#: last price before their shutdown on 2026-10-23).
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4-0613": (30.0, 60.0),     # shut down by OpenAI 2026-10-23
    "gpt-4": (30.0, 60.0),          # shut down by OpenAI 2026-10-23
    "gpt-4-turbo": (10.0, 30.0),
    "gpt-4-1106-preview": (10.0, 30.0),
    "gpt-4o": (2.5, 10.0),
    "gpt-4o-mini": (0.15, 0.6),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.4, 1.6),
}
CHARS_PER_TOKEN = 4.0
#: The Batch API's price relative to live calls (OpenAI: 50% off).
BATCH_DISCOUNT = 0.5


@dataclass
class Estimate:
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None

    @property
    def batch_cost_usd(self) -> float | None:
        """The same calls through the OpenAI Batch API (half the list price, answers within 24 h)."""
        return None if self.cost_usd is None else self.cost_usd * BATCH_DISCOUNT

    def summary(self, model: str) -> str:
        from .endpoints import retirement_of

        retired = retirement_of(model)
        if retired is not None:        # (short: it sits right above Grade)
            cost = (f"{model} was shut down by {retired.provider} on {retired.shutdown_date.isoformat()}: nothing "
                    f"is called unless your endpoint still serves it"
                    + (f" (there ≈ ${self.cost_usd:.2f}, ≈ ${self.batch_cost_usd:.2f} with the Batch API)"
                       if self.cost_usd is not None else ""))
        else:
            cost = (f"≈ ${self.cost_usd:.2f} with {model} (≈ ${self.batch_cost_usd:.2f} with the Batch API, "
                    f"answers within 24 h)" if self.cost_usd is not None else f"cost unknown for {model}")
        return (f"{self.calls} judge calls (at least; unparsable answers add retries) · "
                f"≈ {self.prompt_tokens:,} prompt tokens · {cost}")


def estimate_cost(benchmark: Benchmark, predictions: dict[str, str], n_runs: int, model: str,
                  max_tokens: int = 3) -> Estimate:
    chars = sum(len(render_prompt(benchmark.version, s.question, s.answer, predictions.get(s.id, "")))
                for s in benchmark.samples.values())
    calls = len(benchmark) * n_runs
    prompt_tokens = int(chars / CHARS_PER_TOKEN) * n_runs
    completion_tokens = calls * max_tokens
    price = PRICES.get(model)
    cost = None if price is None else (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6
    return Estimate(calls, prompt_tokens, completion_tokens, cost)
