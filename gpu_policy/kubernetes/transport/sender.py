"""Sending requests through the real `kubernetes` client, each bounded, retried and worded the
same way (docs/kubernetes.md, "Being kind to the API server"; docs/security.md).

Every answer is read bounded (bounded.py: a total deadline, a size cap after decompression,
bounded JSON nesting); `429` and `5xx` are retried after `Retry-After` or with jittered
doubling backoff (gpu_policy.backoff) within a deadline; a LIST is paginated (`limit`,
following `continue`; a `410 Gone` on a continue token restarts it once) and takes at most
`max_pages` pages within `list_deadline_s`, whose tokens must advance and whose pages must
bring items (`max_empty_pages`); a round sends at most `max_requests_per_round` requests.
Nothing but gpu-policy's own errors leaves this module.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Callable, Iterator

from gpu_policy.backoff import Backoff
from gpu_policy.errors import ClusterAccessDenied, ClusterError, ClusterUnavailable
from gpu_policy.kubernetes.settings import KubernetesSettings
from gpu_policy.kubernetes.transport.answers import (Answer, ApiStats, WatchExpired, answer_of, cause,
                                                     watch_event)
from gpu_policy.kubernetes.transport.bounded import BodyRefused, BoundedBody, bounded_pool, parse_json


class Sender:
    """Sends the calls of the official client's typed API classes (`call(**kwargs)`, which
    takes ``_preload_content`` and ``_request_timeout``): one request, a paginated LIST, a WATCH."""

    def __init__(self, api_client, where: str, settings: KubernetesSettings,
                 sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
                 jitter: Callable[[], float] = random.random):
        self.where = where
        self.settings = settings
        self.stats = ApiStats()
        #: raises to stop a write from being sent again (429, 5xx): the planning lease's fence
        #: (`KubernetesCluster`), so no retry goes out once another planner may have taken over
        self.fence: Callable[[], None] | None = None
        self._sleep = sleep
        self._monotonic = monotonic
        self._jitter = jitter
        self._pool = bounded_pool(api_client)
        self._round_began = 0
        self._counting = threading.Lock()  # writes go out side by side (kubernetes.write.inflight)

    def begin_round(self) -> None:
        """Start counting a new round's requests against `max_requests_per_round`."""
        self._round_began = self.stats.calls

    def requests_left(self) -> int:
        """The requests this round may still send (`max_requests_per_round`)."""
        return self.settings.max_requests_per_round - (self.stats.calls - self._round_began)

    def backoff(self, deadline_s: float, sleep: Callable[[float], None] | None = None,
                monotonic: Callable[[], float] | None = None) -> Backoff:
        """The waits between the attempts of one request (or eviction), within `deadline_s`,
        on this client's clock unless given another."""
        s = self.settings
        return Backoff(s.backoff_s, jitter=s.backoff_jitter, floor_s=s.retry_floor_s, deadline_s=deadline_s,
                       sleep=sleep or self._sleep, monotonic=monotonic or self._monotonic, draw=self._jitter)

    def _request(self, what: str, call: Callable[..., Any], accept: set[int] = frozenset(),
                 deadline_s: float | None = None, fenced: bool = False) -> Answer:
        """Send one request, retrying 429, 5xx and unreachable within the deadline
        (`deadline_s`, else the settings'); a `fenced` one (a write under the planning lease)
        passes the `fence` before each retry, as the first attempt's caller did before it."""
        s = self.settings
        deadline_s = s.deadline_s if deadline_s is None else deadline_s
        backoff = self.backoff(deadline_s)
        attempts = 0
        while True:
            if self.requests_left() <= 0:
                raise ClusterUnavailable(f"{self.where}: {what}: this round already sent {s.max_requests_per_round} "
                                         "requests (max_requests_per_round); the rest waits for the next round")
            if attempts and fenced and self.fence is not None:
                self.fence()
            attempts += 1
            answer, problem, asked = self._attempt(what, call, accept, backoff.deadline)
            if answer is not None:
                return answer
            if not backoff.pause(asked):
                raise ClusterUnavailable(f"{self.where}: {what}: the API server {problem}; gave up after "
                                         f"{attempts} attempt{'s' if attempts > 1 else ''} within {deadline_s:g} s")

    def _attempt(self, what: str, call: Callable[..., Any], accept: set[int],
                 deadline: float) -> tuple[Answer | None, str, float | None]:
        """One attempt: (the answer, "", None), or (None, what went wrong, the wait the server
        asked for) when it is worth another; a refusal not worth one is raised."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        s = self.settings
        with self._counting:
            self.stats.calls += 1
        window = max(min(s.timeout_s, deadline - self._monotonic()), 0.001)
        self._pool.within(time.monotonic() + window, s.max_response_bytes)
        try:
            response = call(_preload_content=False, _request_timeout=(window, window))
            data = response.data
        except BodyRefused as e:
            raise ClusterUnavailable(f"{self.where}: {what}: {e.reason}") from None
        except ApiException as e:
            answer = answer_of(e, s)
            if answer.status in accept:
                return answer, "", None
            if answer.status in (401, 403):
                raise self._denied(what, answer) from None
            said = f"answered {answer.status}{': ' + answer.message if answer.message else ''}"
            if answer.status != 429 and answer.status < 500:
                raise ClusterError(f"{self.where}: {what}: the API server {said}") from None
            return None, said, answer.retry_after
        except HTTPError as e:
            return None, f"is unreachable ({cause(e)})", None
        with self._counting:
            self.stats.bytes += len(data)
        try:
            body = parse_json(data)
        except BodyRefused as e:
            raise ClusterUnavailable(f"{self.where}: {what}: {e.reason}") from None
        return Answer(response.status, body if isinstance(body, dict) else {}), "", None

    def _list(self, what: str, call: Callable[..., Any], missing_ok: bool = False) -> list[dict] | None:
        """Every item of a paginated LIST; a 410 on a continue token restarts it once."""
        return self._list_versioned(what, call, missing_ok)[0]

    def _list_versioned(self, what: str, call: Callable[..., Any],
                        missing_ok: bool = False) -> tuple[list[dict] | None, str]:
        """`_list`, and the list's resourceVersion (where a WATCH of it starts); None for a
        kind the cluster does not serve (404) when `missing_ok`."""
        s = self.settings
        items: list[dict] = []
        token, restarted, seen, empty = None, False, set(), 0
        ends = self._monotonic() + s.list_deadline_s
        while True:
            left = self._page_allowed(what, len(seen), ends)
            page = {"limit": s.page_size, **({"_continue": token} if token else {})}
            accept = {410} if token else ({404} if missing_ok else set())
            answer = self._request(what, lambda **kw: call(**page, **kw), accept=accept,
                                   deadline_s=min(s.deadline_s, left))
            if answer.status == 404:
                return None, ""
            if answer.status == 410:
                if restarted:
                    raise ClusterUnavailable(f"{self.where}: {what}: the continue token expired twice (410 Gone); "
                                             "the list changes faster than it can be read")
                items, token, restarted, seen, empty = [], None, True, set(), 0
                continue
            got, token, version = self._page(what, answer.body)
            items.extend(got)
            self.stats.objects += len(got)
            empty = 0 if got else empty + 1
            if not token:
                return items, version
            if not isinstance(token, str) or token in seen:
                raise ClusterUnavailable(f"{self.where}: {what}: the API server's continue token does not advance "
                                         f"(page {len(seen) + 1} gave one it gave before or no string)")
            if empty >= s.max_empty_pages:
                raise ClusterUnavailable(f"{self.where}: {what}: {empty} pages in a row had no items yet a continue "
                                         "token (max_empty_pages); the API server's list makes no progress")
            seen.add(token)

    def _page_allowed(self, what: str, pages: int, ends: float) -> float:
        """The seconds left for the next page of a LIST that has read `pages` and must end at
        `ends`; a list past `max_pages` or its deadline is cut off."""
        s = self.settings
        if pages >= s.max_pages:
            raise ClusterUnavailable(f"{self.where}: {what}: the list has more than {s.max_pages} pages "
                                     "(max_pages); is the API server handing out continue tokens forever?")
        left = ends - self._monotonic()
        if left <= 0:
            raise ClusterUnavailable(f"{self.where}: {what}: the list took longer than {s.list_deadline_s:g} s "
                                     f"(list_deadline_s) and was cut off after {pages + 1} pages")
        return left

    def _page(self, what: str, body: dict) -> tuple[list, Any, str]:
        """(items, continue token, resourceVersion) of one LIST page (the token as it came)."""
        got = body.get("items")
        if not isinstance(got, list):
            raise ClusterUnavailable(f"{self.where}: {what}: the answer has no list of items")
        metadata = body.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        token, version = metadata.get("continue"), metadata.get("resourceVersion")
        return got, token, version if isinstance(version, str) else ""

    def _watch(self, what: str, call: Callable[..., Any], resource_version: str,
               timeout_s: float) -> Iterator[tuple[str, dict]]:
        """One WATCH: the official client builds and sends the request (`watch=True`, raw
        stream); its events are read through the bounded reader, each line under the size
        cap and parsed with bounded nesting, the stream within `timeout_s` plus the request
        timeout (the API server ends it at `timeout_s`)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        with self._counting:
            self.stats.calls += 1
        window = self.settings.timeout_s
        try:
            response = call(watch=True, resource_version=resource_version, allow_watch_bookmarks=True,
                            timeout_seconds=max(1, int(timeout_s)), _preload_content=False,
                            _request_timeout=(window, timeout_s + window))
        except ApiException as e:
            answer = answer_of(e, self.settings)
            if answer.status == 410:
                raise WatchExpired(f"{self.where}: {what}: {answer.message or '410 Gone'}") from None
            if answer.status in (401, 403):
                raise self._denied(what, answer) from None
            raise ClusterUnavailable(f"{self.where}: {what}: the API server answered {answer.status}"
                                     f"{': ' + answer.message if answer.message else ''}", answer.retry_after) from None
        except (HTTPError, OSError) as e:
            raise ClusterUnavailable(f"{self.where}: {what}: the API server is unreachable ({cause(e)})") from None
        body = BoundedBody(response, time.monotonic() + timeout_s + window, self.settings.max_response_bytes)
        try:
            for line in body.lines():
                with self._counting:
                    self.stats.bytes += len(line)
                yield watch_event(what, self.where, parse_json(line))
        except BodyRefused as e:
            raise ClusterUnavailable(f"{self.where}: {what}: {e.reason}") from None
        except (HTTPError, OSError) as e:
            raise ClusterUnavailable(f"{self.where}: {what}: the stream broke ({cause(e)})") from None
        finally:
            response.release_conn()

    def _admitted(self, what: str, answer: Answer) -> Answer:
        """A 403 that RBAC gave (not the webhook) is ClusterAccessDenied, as for every request."""
        if answer.status == 403 and not answer.admission_denied:
            raise self._denied(what, answer)
        return answer

    def _denied(self, what: str, answer: Answer) -> ClusterAccessDenied:
        return ClusterAccessDenied(f"{self.where}: {what}: refused ({answer.status}): {answer.message}; "
                                   "grant the permissions in deploy/ (docs/kubernetes.md)")
