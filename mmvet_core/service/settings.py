"""The service's settings: one object read once from the environment (or built by a test), at the edge. Core code
takes the values it needs as parameters and never reads the environment itself."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..hosting.agent_judges import parse_agent_judges
from ..hosting.clients import SessionLimits
from ..judging.budget import BudgetLimits
from ..hosting.policy import HostingLimits
from ..judging.judge import DEFAULT_JUDGE_MODEL, JudgeSettings
from ..hosting.keeping import StorageLimits
from ..hosting.requestlimit import RequestLimits
from ..store import DATABASE_URL_VAR


def _default_data_dir() -> Path:
    data = Path("/data")
    if data.is_dir() and os.access(data, os.W_OK):
        return data / "mmvet-grader"
    return Path("data")


def _int_env(env, name: str, default: int) -> int:
    try:
        return int(env.get(name, default))
    except ValueError:
        return default


@dataclass
class ServiceSettings:
    data_dir: Path = field(default_factory=_default_data_dir)
    host_key: str | None = None
    host_provider: str = "openai"
    host_base_url: str | None = None
    host_api_version: str | None = None
    judge_model: str = DEFAULT_JUDGE_MODEL
    max_upload_mb: int = 50
    run_concurrency: int = 256             # ceiling per run: the account's limiter finds the judge's pace
    max_active_runs: int = 64
    max_runs_per_visitor: int = 2          # running at once, per visitor (0: no limit)
    max_runs_per_job: int = 5
    limits: BudgetLimits = field(default_factory=BudgetLimits)
    public_url: str | None = None
    hosting: HostingLimits = field(default_factory=HostingLimits)   # uploads, parsing, folders (MMVET_* variables)
    storage: StorageLimits = field(default_factory=StorageLimits)   # quotas, expiry, free-disk floor (keeping.py)
    requests: RequestLimits = field(default_factory=RequestLimits)  # API requests per client (requestlimit.py)
    sessions: SessionLimits = field(default_factory=SessionLimits)  # gone clients, kept sessions (clients.py)
    trusted_proxy_hops: int = 0            # proxies in front of the app that append to X-Forwarded-For
    allow_private_endpoints: bool = False  # let visitors' endpoints be loopback / private addresses
    call_deadline: float = 120.0           # seconds per judge call, retries included
    batch_poll: float = 30.0               # seconds between two looks at a Batch API job
    host_secret: str | None = None         # MMVET_HOST_SECRET: unlocks the host's leaderboard controls (hide)
    publish_per_hour: int = 10             # leaderboard publishes (and republishes) per visitor and hour
    mcp_server: bool = True                # MMVET_MCP=0 turns the MCP server (agents' tools, mmvet_app/mcp.py) off
    agent_judges: tuple[str, ...] = ()     # MMVET_AGENT_JUDGES: server judges an agent may pick (agent_judges.py)
    server_judges: tuple[str, ...] = ()    # MMVET_SERVER_JUDGES: server judges the page offers visitors (names)
    database_url: str | None = None        # MMVET_DATABASE_URL: PostgreSQL; None: data_dir/mmvet-grader.db
    workers: str = "in-process"            # MMVET_WORKERS: "external": grading workers grade (workers.py)
    lease_seconds: float = 10.0            # MMVET_LEASE_SECONDS: a dead grader's run moves on after this

    @classmethod
    def from_env(cls, env=None) -> "ServiceSettings":
        env = os.environ if env is None else env
        azure = bool(env.get("AZURE_OPENAI_API_KEY") and env.get("AZURE_OPENAI_ENDPOINT"))
        space_host = (env.get("SPACE_HOST") or "").split(",")[0].strip()
        return cls(
            data_dir=Path(env["MMVET_DATA_DIR"]) if env.get("MMVET_DATA_DIR") else _default_data_dir(),
            host_key=env.get("AZURE_OPENAI_API_KEY") if azure else (env.get("OPENAI_API_KEY") or None),
            host_provider="azure" if azure else "openai",
            host_base_url=env.get("AZURE_OPENAI_ENDPOINT") if azure else (env.get("OPENAI_BASE_URL") or None),
            host_api_version=env.get("OPENAI_API_VERSION"),
            judge_model=env.get("MMVET_JUDGE_MODEL", DEFAULT_JUDGE_MODEL),
            max_upload_mb=_int_env(env, "MMVET_MAX_UPLOAD_MB", 50),
            run_concurrency=_int_env(env, "MMVET_RUN_CONCURRENCY", 256),
            max_active_runs=_int_env(env, "MMVET_MAX_ACTIVE_RUNS", 64),
            max_runs_per_visitor=_int_env(env, "MMVET_MAX_RUNS_PER_VISITOR", 2),
            limits=BudgetLimits(per_visitor_daily=_int_env(env, "MMVET_BUDGET_PER_VISITOR", 2000),
                                global_daily=_int_env(env, "MMVET_BUDGET_GLOBAL", 20000),
                                tokens_per_visitor_daily=_int_env(env, "MMVET_TOKENS_PER_VISITOR", 1_500_000),
                                tokens_global_daily=_int_env(env, "MMVET_TOKENS_GLOBAL", 15_000_000),
                                max_prediction_chars=_int_env(env, "MMVET_MAX_PREDICTION_CHARS", 8000)),
            public_url=env.get("MMVET_PUBLIC_URL") or (f"https://{space_host}" if space_host else None),
            hosting=HostingLimits.from_env(env),
            storage=StorageLimits.from_env(env),
            requests=RequestLimits.from_env(env),
            sessions=SessionLimits.from_env(env),
            # on Spaces the app sits behind Hugging Face's proxy, which appends the client's address
            trusted_proxy_hops=_int_env(env, "MMVET_TRUSTED_PROXY_HOPS", 1 if env.get("SPACE_ID") else 0),
            allow_private_endpoints=env.get("MMVET_ALLOW_PRIVATE_ENDPOINTS", "").strip().lower()
            in ("1", "true", "yes"),
            call_deadline=float(_int_env(env, "MMVET_CALL_DEADLINE", 120)),
            batch_poll=float(_int_env(env, "MMVET_BATCH_POLL", 30)),
            host_secret=env.get("MMVET_HOST_SECRET") or None,
            publish_per_hour=_int_env(env, "MMVET_PUBLISH_PER_HOUR", 10),
            mcp_server=env.get("MMVET_MCP", "1").strip().lower() not in ("0", "false", "no", "off"),
            agent_judges=parse_agent_judges(env.get("MMVET_AGENT_JUDGES")),
            server_judges=tuple(n for n in parse_agent_judges(env.get("MMVET_SERVER_JUDGES")) if n != "*"),
            database_url=env.get(DATABASE_URL_VAR, "").strip() or None,
            workers=env.get("MMVET_WORKERS", "").strip().lower() or "in-process",
            lease_seconds=float(env.get("MMVET_LEASE_SECONDS", "") or 10.0),
        )

    def host_settings(self) -> JudgeSettings:
        return JudgeSettings(model=self.judge_model, provider=self.host_provider, base_url=self.host_base_url,
                             api_version=self.host_api_version, deadline=self.call_deadline)
