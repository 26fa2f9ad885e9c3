"""The host's limits, one facet of the service: who is asking (a salted visitor id), what an upload may weigh and
where it is parsed (`hosting.UploadGate`), where a visitor's endpoint may point, the day's judge budget, and how
much a visitor may keep stored (`keeping.RunKeeper`). The other facets ask here before they act."""
from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Callable

from ..judging.budget import HostBudget, client_address, private_salt, visitor_id
from ..hosting.policy import UploadGate
from ..runs.jobs import JobManager
from ..judging.judge import JudgeSettings, answer_scope, make_judge
from ..hosting.keeping import RunKeeper, StorageRefused
from ..store import Store, StoreError
from ..judging.transport import BlockedDestination, EndpointPolicy, check_endpoint_url
from .records import ServiceError
from .settings import ServiceSettings


def _gradio_cache_dir() -> Path:
    """Where Gradio stores uploads (its ``GRADIO_TEMP_DIR``, else ``<tmp>/gradio``), bounded by the housekeeper."""
    import tempfile
    return Path(os.environ.get("GRADIO_TEMP_DIR") or Path(tempfile.gettempdir()) / "gradio")


class HostLimits:
    """The bounds every visitor's request meets: visitor ids, upload size and parsing, endpoint addresses, the
    judge budget and storage quotas. `on_expire(run_id)` is called for each run the keeper expires."""

    def __init__(self, settings: ServiceSettings, store: Store, jobs: JobManager, work_dir: Path,
                 exports_dir: Path, on_expire: Callable[[str], None]):
        self.settings, self.store, self.jobs = settings, store, jobs
        limits = replace(settings.hosting, upload_mb=settings.max_upload_mb)
        self.gate = UploadGate(limits, work_dir, exports_dir, gradio_cache=_gradio_cache_dir())
        self.gate.housekeeper.run()
        self.budget = HostBudget(store, settings.limits)
        # of visitor ids (never the browser-state secret); replicas on one database share the database's
        self.salt = store.lasting_secret("visitor-salt") if store.backend == "postgresql" else \
            private_salt(settings.data_dir)
        self.keeper = RunKeeper(store, settings.storage, settings.data_dir, on_expire=on_expire)

    def running_ids(self) -> list[str]:
        return self.jobs.running_ids()

    def check_storage(self, visitor: str | None, adding_bytes: int = 0) -> None:
        """Refuse new work when the disk is nearly full or the visitor keeps their quota (`keeping`)."""
        self.keeper.maybe_expire(self.running_ids)
        try:
            self.keeper.check_new_run(visitor, adding_bytes)
        except StorageRefused as e:
            raise ServiceError(str(e)) from None
        except StoreError as e:
            raise ServiceError(f"The server's storage failed: {e}. Nothing was started.") from None

    # ---- who is asking ----
    def visitor(self, peer: str | None, forwarded_for: str | None) -> str:
        """The visitor a host-key call and a run slot are charged to: their IP address, salted and hashed. It is
        the socket's peer, or behind `trusted_proxy_hops` proxies the X-Forwarded-For entry the outermost trusted
        one appended (entries a client writes itself are ignored)."""
        if peer is None and forwarded_for is None:
            return visitor_id("local", self.salt)
        return visitor_id(client_address(peer, forwarded_for, self.settings.trusted_proxy_hops), self.salt)

    def make_judge(self, jset: JudgeSettings, key: str | None, host: bool):
        """The judge of a run: errors redacted (an upstream body may echo a key or an internal page); a visitor's
        endpoint may not reach private addresses unless the host allows it; a visitor's key reads and adds to the
        answers of that key only (`judge.answer_scope`), never the host's, even at the host's endpoint."""
        return make_judge(jset, key, policy=self.endpoint_policy(host), redact=True,
                          cache_scope="" if host else answer_scope(key))

    def endpoint_policy(self, host: bool) -> EndpointPolicy:
        """Where a judge's connections may go: a visitor's endpoint not to private addresses, unless the host
        allows them; the host's own endpoint anywhere."""
        return EndpointPolicy(block_private=not host and not self.settings.allow_private_endpoints)

    # ---- inputs ----
    def check_size(self, path: str) -> None:
        size = Path(path).stat().st_size
        limit = self.settings.max_upload_mb
        if size > limit * 1024 * 1024:
            raise ServiceError(f"{Path(path).name} is {size / 1e6:.1f} MB; the limit here is {limit} MB.")

    def check_visitor_url(self, url: str) -> None:
        """Refuse a visitor's base URL that is not http(s), or that resolves to a private address unless the host
        allows them (the transport checks again at every connection)."""
        try:
            check_endpoint_url(url, block_private=not self.settings.allow_private_endpoints)
        except BlockedDestination as e:
            raise ServiceError(f"Base URL refused: {e}.") from None
