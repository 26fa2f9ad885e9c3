"""The host's limits (`mmvet_core.service.limits`): who a request is charged to, how large an upload may be,
where a visitor's endpoint may point. (Budgets: test_budget; storage quotas and expiry: test_keeping.)"""
from __future__ import annotations

import pytest

from mmvet_core.service import GradingService, ServiceError, ServiceSettings


@pytest.fixture
def limits(tmp_path):
    svc = GradingService(ServiceSettings(data_dir=tmp_path / "data", max_upload_mb=1, trusted_proxy_hops=1))
    yield svc.limits
    svc.jobs.shutdown()
    svc.store.close()


def test_a_visitor_is_the_address_the_trusted_proxy_saw_salted(limits):
    alice = limits.visitor("10.0.0.5", "1.2.3.4")
    assert alice == limits.visitor("10.0.0.9", "6.6.6.6, 1.2.3.4")     # what the client wrote itself is ignored
    assert alice != limits.visitor("10.0.0.5", "1.2.3.5") and "1.2.3.4" not in alice
    assert limits.visitor(None, None) == limits.visitor(None, None) != alice      # a call from inside the server


def test_an_upload_over_the_limit_is_refused_by_name(limits, tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (1024 * 1024 + 1))
    with pytest.raises(ServiceError, match=r"big.json is 1.0 MB; the limit here is 1 MB"):
        limits.check_size(str(big))
    big.write_bytes(b" " * (1024 * 1024))
    limits.check_size(str(big))


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/v1", "http://127.0.0.1:9/v1",
                                 "http://169.254.169.254/latest"])
def test_a_visitors_endpoint_may_not_be_local_or_private(limits, url):
    with pytest.raises(ServiceError, match="Base URL refused"):
        limits.check_visitor_url(url)
    assert limits.endpoint_policy(host=True).block_private is False          # the host's own endpoint is trusted
    assert limits.endpoint_policy(host=False).block_private is True
