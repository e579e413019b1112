"""The training-progress endpoint as the operator runs it: checks, coalescing, HTTPS and the CA, wired to
the Manager's shared informers.

`ProgressService(manager, api, kinds, config)` reads jobs and pods from the informers the controllers
already share (no watch of its own), writes statuses and ConfigMaps through `api`, a client with a rate
limit of its own (so a flood of reports never delays a reconcile), and follows the jobs: a new job's
namespace gets the CA ConfigMap, a job that finishes has its waiting report written at once (by the
reconcile that finishes it, with the verdict: `injection.reports`), a deleted job's report and gauges are
dropped. `injection` is what the controllers give new pods.
Tokens are verified with the issuer's keys, read by `fetch` (`KubeApiClient.get_path`; None: no keys, so
every token goes to a TokenReview); `reviews` (default: `api`) sends the TokenReviews of the tokens the keys
cannot settle (a bounded `TokenAuthenticator`, each for the job's own audience), so that answering a report
never waits behind writes.
`writes_per_second` (default: no limit) is the share of `api`'s budget the status writes may take: more
reporting jobs than that many per interval lengthen the interval (`Coalescer.interval`).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from kubetrain.api import JobStatus, KindInfo
from kubetrain.common.errors import NotFound
from kubetrain.common.job.labels import label_key
from kubetrain.common.job.status import is_finished
from kubetrain.common.kube import objects
from kubetrain.common.kube.authn import TokenAuthenticator
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import CONFIGMAPS, PODS, Obj, Resource
from kubetrain.common.kube.store import Store
from kubetrain.common.manager import Manager
from kubetrain.common.progress.coalesce import Coalescer, JobKey
from kubetrain.common.progress.endpoint import Lookup, StatusReports
from kubetrain.common.progress.inject import ProgressInjection, opted_out
from kubetrain.common.progress.review import ProgressAuthenticator
from kubetrain.common.progress.server import ProgressServer
from kubetrain.common.progress.tls import LABEL as CA_LABEL
from kubetrain.common.progress.tls import CaPublisher, ServingPair, load_into, self_signed
from kubetrain.common.progress.tokens import Fetch, IssuerKeys, TokenVerifier

__all__ = ["ProgressConfig", "ProgressService"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProgressConfig:
    host: str
    port: int
    url: str
    """How pods reach the endpoint: `https://kubetrain-operator.kubetrain-system.svc:8443`."""
    audience: str
    interval: float
    hosts: tuple[str, ...]
    """The certificate's names (the Service's DNS names, the URL's host)."""
    max_connections: int = 1024
    """Connections served at once (each reporting pod keeps one open)."""
    idle_timeout: float = 120.0
    """Seconds a kept connection may wait for its next report."""
    home: str = ""
    """The operator's own namespace, where the replicas register their certificates ("": none, outside a
    cluster: the bundle is this process's certificate alone)."""
    per_peer: int = 32
    """Connections from one address at once (a pod reports on one; see docs/progress.md, "Limits")."""


class ProgressService:
    """The endpoint, run by `run()` as a Manager runnable; `port` once started."""

    def __init__(
        self,
        manager: Manager,
        api: ApiClient,
        kinds: Sequence[KindInfo],
        config: ProgressConfig,
        *,
        registry: CollectorRegistry | None = None,
        reviews: ApiClient | None = None,
        fetch: Fetch | None = None,
        writes_per_second: float | None = None,
    ) -> None:
        self._config, self._clock = config, manager.clock
        self.coalescer = Coalescer(
            api,
            interval=config.interval,
            writes_per_second=writes_per_second,
            clock=manager.clock,
            registry=registry,
        )
        self.injection = ProgressInjection(
            base_url=config.url,
            audience=config.audience,
            reports=self.coalescer.final_reports,
            publish=self._publish_to,
        )
        self.keys = IssuerKeys(fetch or _no_keys, clock=manager.clock)
        self.authenticator = ProgressAuthenticator(
            TokenVerifier(self.keys, clock=manager.clock),
            TokenAuthenticator(reviews or api, clock=manager.clock),
        )
        jobs = {info: manager.informer(_resource(info)) for info in kinds}
        # the controllers' own pods informers (one per label key, shared by the kinds: see `Manager`)
        pods = list(dict.fromkeys(_pods_of(manager, info) for info in kinds))
        reports = StatusReports(
            self.authenticator,
            audience=config.audience,
            jobs=lambda info: jobs[info].store.get if info in jobs else _nothing,
            pods=_first_of(pods),
            coalescer=self.coalescer,
            registry=registry,
        )
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.publisher = CaPublisher(api, b"", name=self.injection.ca_config_map, home=config.home)
        copies = manager.labelled_informer(CONFIGMAPS, key=CA_LABEL, value="true")
        copies.add_handler(_CaCopies(self))
        self.server = ProgressServer(
            reports,
            ssl_context=self._context,
            idle_timeout=config.idle_timeout,
            max_connections=config.max_connections,
            per_peer=config.per_peer,
        )
        self._namespaces: asyncio.Queue[str] = asyncio.Queue()
        for info, informer in jobs.items():
            informer.add_handler(_JobEvents(self, info))

    @property
    def port(self) -> int:
        return self.server.port

    async def run(self) -> None:
        pair = await self._renew()  # the first certificate, before the listener opens
        await self.server.start(self._config.host, self._config.port)
        log.info("progress endpoint on port %d, reached by pods at %s", self.port, self._config.url)
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.coalescer.run())
                group.create_task(self.keys.run())
                group.create_task(self._publish())
                group.create_task(self._rotate(pair))
        finally:
            await self.server.stop()

    def ca_changed(self, config_map: Obj, *, deleted: bool = False) -> None:
        """A CA ConfigMap changed or went: written again when it no longer holds the bundle."""
        namespace = objects.namespace(config_map)
        if objects.name(config_map) != self.publisher.name:
            return
        if self.publisher.changed(namespace, None if deleted else config_map):
            log.info("progress CA %s/%s changed or deleted: writing it again", namespace, self.publisher.name)
            self._namespaces.put_nowait(namespace)

    def job_seen(self, job: Obj) -> None:
        namespace = objects.namespace(job)
        if namespace not in self.publisher.namespaces and not opted_out(objects.annotations(job)):
            self._namespaces.put_nowait(namespace)

    async def _publish_to(self, namespace: str) -> None:
        """Before a job's first pods (`ProgressInjection.prepare`): the namespace's CA copy, once."""
        await self.publisher.ensure(namespace)

    async def _publish(self) -> None:
        while True:
            await self.publisher.ensure(await self._namespaces.get())

    async def _rotate(self, pair: ServingPair) -> None:
        while True:
            await self._clock.sleep(pair.renew_in(datetime.datetime.now(datetime.UTC)))
            pair = await self._renew()
            log.info("progress endpoint: new serving certificate, valid until %s", pair.not_after)

    async def _renew(self) -> ServingPair:
        """A new pair (made by a child process), served to new connections and published in place of the
        previous one."""
        pair = await self_signed(self._config.hosts)
        load_into(self._context, pair)
        await self.publisher.rotate(pair.cert_pem)
        return pair


class _JobEvents:
    """A job informer's events, for the service: CA publication, flush on finish, forget on delete."""

    def __init__(self, service: ProgressService, info: KindInfo) -> None:
        self._service, self._info = service, info

    def _key(self, job: Obj) -> JobKey:
        return JobKey(self._info, objects.namespace(job), objects.name(job))

    def on_add(self, obj: Obj) -> None:
        self._service.job_seen(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._service.job_seen(new)
        if _finished(new) and not _finished(old):
            self._service.coalescer.flush(self._key(new))

    def on_delete(self, obj: Obj) -> None:
        self._service.coalescer.forget(self._key(obj))


class _CaCopies:
    """The CA ConfigMaps' informer events: one changed or deleted is written again."""

    def __init__(self, service: ProgressService) -> None:
        self._service = service

    def on_add(self, obj: Obj) -> None:
        self._service.ca_changed(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._service.ca_changed(new)

    def on_delete(self, obj: Obj) -> None:
        self._service.ca_changed(obj, deleted=True)


def _finished(job: Obj) -> bool:
    return is_finished(JobStatus.model_validate(job.get("status") or {}))


def _resource(info: KindInfo) -> Resource:
    return Resource(info.group, info.version, info.plural, info.kind)


def _pods_of(manager: Manager, info: KindInfo) -> Store:
    key = label_key("operator-name", info.label_prefix)
    return manager.labelled_informer(PODS, key=key, value=info.operator_name).store


def _nothing(namespace: str, name: str) -> Obj | None:
    return None


async def _no_keys(path: str) -> Obj:
    raise NotFound(f"{path}: no client to read the issuer's keys with")


def _first_of(stores: Sequence[Store]) -> Lookup:
    def lookup(namespace: str, name: str) -> Obj | None:
        return next((obj for store in stores if (obj := store.get(namespace, name)) is not None), None)

    return lookup
