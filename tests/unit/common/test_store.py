"""The cache answers by key, namespace, labels and index, and keeps its indexes right across updates."""

from __future__ import annotations

from kubetrain.common.kube.store import INDEX_CONTROLLER_UID, INDEX_JOB_NAME, JOB_NAME_LABEL, Store
from kubetrain.common.reconcile import Request


def pod(
    name: str, *, ns: str = "ns", owner: str | None = None, job: str | None = None, rv: str = "1"
) -> dict:
    meta: dict = {"name": name, "namespace": ns, "resourceVersion": rv, "labels": {}}
    if owner:
        meta["ownerReferences"] = [{"kind": "TFJob", "name": "j", "uid": owner, "controller": True}]
    if job:
        meta["labels"][JOB_NAME_LABEL] = job
    return {"metadata": meta}


def names(objs: list[dict]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


def test_get_list_and_namespaces() -> None:
    store = Store()
    store.upsert(pod("a"))
    store.upsert(pod("b", ns="other"))
    assert store.get("ns", "a") is not None and store.get("ns", "b") is None
    assert names(store.list("ns")) == ["a"]
    assert names(store.list()) == ["a", "b"]
    assert len(store) == 2 and Request("other", "b") in store


def test_controller_uid_index_follows_updates_and_removals() -> None:
    store = Store()
    store.upsert(pod("a", owner="u1"))
    store.upsert(pod("b", owner="u1"))
    store.upsert(pod("c"))
    assert names(store.by_index(INDEX_CONTROLLER_UID, "u1")) == ["a", "b"]
    store.upsert(pod("a", owner="u2", rv="2"))  # re-owned
    assert names(store.by_index(INDEX_CONTROLLER_UID, "u1")) == ["b"]
    assert names(store.by_index(INDEX_CONTROLLER_UID, "u2")) == ["a"]
    old = store.remove("ns", "b")
    assert old is not None and old["metadata"]["name"] == "b"
    assert store.by_index(INDEX_CONTROLLER_UID, "u1") == []
    assert store.remove("ns", "b") is None


def test_job_name_index_is_per_namespace() -> None:
    store = Store()
    store.upsert(pod("a", job="j"))
    store.upsert(pod("b", ns="other", job="j"))
    assert names(store.by_index(INDEX_JOB_NAME, "ns/j")) == ["a"]


def test_custom_index_covers_existing_objects() -> None:
    store = Store()
    store.upsert(pod("a", job="j"))
    store.add_index("by-name-length", lambda o: [str(len(o["metadata"]["name"]))])
    assert names(store.by_index("by-name-length", "1")) == ["a"]


def test_label_selector_on_list() -> None:
    store = Store()
    store.upsert(pod("a", job="j"))
    store.upsert(pod("b", job="k"))
    assert names(store.list("ns", label_selector={JOB_NAME_LABEL: "k"})) == ["b"]


def test_an_update_that_keeps_owner_and_labels_refiles_the_new_state() -> None:
    """Indexes hand out the object as it is now, not the state it was filed with."""
    store = Store()
    store.upsert(pod("a", owner="u1", job="j"))
    store.upsert(pod("a", owner="u1", job="j", rv="2"))
    for index, value in ((INDEX_CONTROLLER_UID, "u1"), (INDEX_JOB_NAME, "ns/j")):
        (found,) = store.by_index(index, value)
        assert found["metadata"]["resourceVersion"] == "2"
    store.upsert(pod("a", owner="u1", job="k", rv="3"))  # relabelled, same owner
    assert store.by_index(INDEX_JOB_NAME, "ns/j") == []
    assert [o["metadata"]["resourceVersion"] for o in store.by_index(INDEX_JOB_NAME, "ns/k")] == ["3"]
    assert [o["metadata"]["resourceVersion"] for o in store.by_index(INDEX_CONTROLLER_UID, "u1")] == ["3"]
