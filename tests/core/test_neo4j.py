"""The Neo4j that ``./engram test`` starts (or ``NEO4J_URI`` names) answers over Bolt, and the
shared driver in ``core.neo4j`` follows the settings."""

from __future__ import annotations

import uuid

from django.test import override_settings

from core.neo4j import get_driver


def test_node_round_trip_scoped_by_tenant(neo4j_driver) -> None:  # type: ignore[no-untyped-def]
    tenant, other = f"t_{uuid.uuid4().hex[:12]}", f"t_{uuid.uuid4().hex[:12]}"
    key = uuid.uuid4().hex
    name = "Zoë 東京 🚀"
    try:
        records, _, _ = neo4j_driver.execute_query(
            "CREATE (n:EngramProbe {tenant: $tenant, key: $key, name: $name}) RETURN n.key AS key",
            parameters_={"tenant": tenant, "key": key, "name": name},
        )
        assert [r["key"] for r in records] == [key]

        records, _, _ = neo4j_driver.execute_query(
            "MATCH (n:EngramProbe {tenant: $tenant, key: $key}) RETURN n.name AS name, n.tenant AS tenant",
            parameters_={"tenant": tenant, "key": key},
        )
        assert [(r["name"], r["tenant"]) for r in records] == [(name, tenant)]

        # another tenant's filter does not see it
        records, _, _ = neo4j_driver.execute_query(
            "MATCH (n:EngramProbe {tenant: $tenant}) RETURN count(n) AS n",
            parameters_={"tenant": other},
        )
        assert records[0]["n"] == 0
    finally:
        neo4j_driver.execute_query(
            "MATCH (n:EngramProbe {tenant: $tenant}) DETACH DELETE n",
            parameters_={"tenant": tenant},
        )
    records, _, _ = neo4j_driver.execute_query(
        "MATCH (n:EngramProbe {tenant: $tenant}) RETURN count(n) AS n",
        parameters_={"tenant": tenant},
    )
    assert records[0]["n"] == 0


def test_server_is_neo4j_5_or_newer(neo4j_driver) -> None:  # type: ignore[no-untyped-def]
    records, _, _ = neo4j_driver.execute_query(
        "CALL dbms.components() YIELD name, versions RETURN name, versions[0] AS version"
    )
    versions = {r["name"]: r["version"] for r in records}
    assert int(versions["Neo4j Kernel"].split(".")[0]) >= 5


def test_get_driver_follows_settings() -> None:
    with override_settings(NEO4J_URI=""):
        assert get_driver() is None
    with override_settings(NEO4J_URI="bolt://127.0.0.1:1", NEO4J_USER="", NEO4J_PASSWORD=""):
        first = get_driver()
        assert first is not None
        assert get_driver() is first  # one per process
