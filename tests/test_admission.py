"""Admission control as n8n meets it: one address, many concurrent requests. Below capacity nothing
is refused; past it, refusals are 429 with Retry-After and never 5xx; rate limits count per
credential; failed authentication is slowed down."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import make_settings
from worker.service.admission import Admission, Overloaded
from worker.serve.app import create_app
from worker.config import Settings
from worker.runtime import Runtime

ROUTE = "/webhook/arc-retrieval"


def test_slots_queue_and_refusals():
    admission = Admission(max_concurrent=1, max_queue=1, queue_timeout=0.3)
    release = threading.Event()
    entered = threading.Event()

    def hold():
        with admission.slot():
            entered.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    entered.wait(5)
    waiter_result: list[str] = []

    def wait_for_slot():
        try:
            with admission.slot():
                waiter_result.append("ran")
        except Overloaded:
            waiter_result.append("refused")

    waiter = threading.Thread(target=wait_for_slot)
    waiter.start()
    deadline = time.monotonic() + 2
    while admission.waiting < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(Overloaded) as refused:  # one running, one waiting: the third is refused at once
        with admission.slot():
            pass
    assert refused.value.retry_after == 1
    waiter.join(2)
    assert waiter_result == ["refused"], "a wait longer than queue_timeout ends in a refusal"
    release.set()
    holder.join(2)
    with admission.slot():  # free again
        pass


def test_defaults_fit_n8n():
    settings = Settings.from_env({})
    limits = settings.limits
    assert limits.rate_limit >= 200 and limits.max_concurrent >= 8 and limits.max_queue >= 8


def default_app(sample_runtime, tmp_path, **overrides) -> object:
    # The shipped defaults (conftest's make_settings switches the rate limit off for other tests).
    settings = Settings.from_env({}, data_dir=tmp_path, database_url=sample_runtime.db.url, **overrides)
    return create_app(runtime=Runtime(settings, sample_runtime.db, sample_runtime.embedder))


def test_eight_concurrent_clients_from_one_address_are_never_refused(sample_runtime, tmp_path):
    client = default_app(sample_runtime, tmp_path).test_client()
    questions = ["What is the maximum fence height?", "Can I put solar panels on my roof?",
                 "How big can a shed be?", "Which paint colours are approved?"]

    def one(i: int) -> int:
        return client.post(ROUTE, json={"query": questions[i % 4]}).status_code

    with ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(one, range(200)))
    assert codes.count(200) == 200, {c: codes.count(c) for c in set(codes)}


class SlowRetriever:
    """The real retriever, 0.2 s slower: capacity is easy to exceed on purpose."""

    def __init__(self, inner):
        self.inner = inner
        self.search_cache = inner.search_cache

    def answer(self, request, request_id=None):
        time.sleep(0.2)
        return self.inner.answer(request, request_id=request_id)

    def ask(self, options, request_id=None):
        time.sleep(0.2)
        return self.inner.ask(options, request_id=request_id)


def test_past_capacity_refusals_are_429_with_retry_after(sample_runtime, tmp_path):
    from worker.service.build import build_retriever

    settings = make_settings(tmp_path, sample_runtime.db.url, max_concurrent=2, max_queue=2, queue_timeout=5)
    runtime = Runtime(settings, sample_runtime.db, sample_runtime.embedder)
    client = create_app(runtime=runtime, retriever=SlowRetriever(build_retriever(runtime))).test_client()

    def one(_: int):
        response = client.post(ROUTE, json={"query": "What is the maximum fence height?"})
        return response.status_code, response.headers.get("Retry-After"), response.get_json()

    with ThreadPoolExecutor(16) as pool:  # 4x what the worker admits
        results = list(pool.map(one, range(32)))
    codes = [code for code, _, _ in results]
    assert not [c for c in codes if c >= 500], codes
    assert codes.count(200) >= 4 and codes.count(429) >= 1
    for code, retry_after, body in results:
        if code == 429:
            assert retry_after == "1" and body["error"] == "rate_limited" and "capacity" in body["message"]


def test_rate_limit_counts_per_credential_not_per_address(sample_runtime, tmp_path):
    client = default_app(sample_runtime, tmp_path, api_token="secret-token-0123456789abcdef", rate_limit=1).test_client()
    headers = {"X-ARC-Token": "secret-token-0123456789abcdef"}
    body = {"query": "What is the maximum fence height?"}
    codes = [client.post(ROUTE, json=body, headers=headers,
                         environ_base={"REMOTE_ADDR": f"10.0.0.{i}"}).status_code for i in range(3)]
    assert codes == [200, 200, 429], "one credential from three addresses shares one allowance (burst 2)"

    open_client = default_app(sample_runtime, tmp_path, rate_limit=1).test_client()
    codes = [open_client.post(ROUTE, json=body, environ_base={"REMOTE_ADDR": f"10.0.1.{i}"}).status_code
             for i in range(3)]
    assert codes == [200, 200, 200], "without a credential each address has its own allowance"


def test_failed_authentication_is_slowed_down(sample_runtime, tmp_path):
    client = default_app(sample_runtime, tmp_path, api_token="secret-token-0123456789abcdef",
                         auth_failures_per_minute=5).test_client()
    body = {"query": "What is the maximum fence height?"}
    attacker = {"REMOTE_ADDR": "203.0.113.9"}
    codes = [client.post(ROUTE, json=body, headers={"X-ARC-Token": f"guess-{i}"}, environ_base=attacker).status_code
             for i in range(8)]
    assert codes[:5] == [401] * 5 and codes[5:] == [429] * 3
    # the right token from the same address (a NAT, n8n's host) is never locked out
    rightful = client.post(ROUTE, json=body, headers={"X-ARC-Token": "secret-token-0123456789abcdef"},
                           environ_base=attacker)
    assert rightful.status_code == 200
    again = client.post(ROUTE, json=body, headers={"X-ARC-Token": "guess-9"}, environ_base=attacker)
    assert again.status_code == 429 and int(again.headers["Retry-After"]) >= 1, "wrong guesses still wait"
    other = client.post(ROUTE, json=body, headers={"X-ARC-Token": "secret-token-0123456789abcdef"},
                        environ_base={"REMOTE_ADDR": "198.51.100.7"})
    assert other.status_code == 200
