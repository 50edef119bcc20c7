"""Search's fast path keeps its recall and its visibility rules (issue 16).

The vector arm is an HNSW scan under the visibility filter: without pgvector 0.8's iterative scans an
index scan stops at ``ef_search`` rows, so an agent that may see few of the nearest rows (or whose
rows sit behind many dead index entries left by rolled-back inserts, as in this test database)
silently gets fewer than it asked for. The lexical arm reads the BM25 postings the triggers keep.
"""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection, transaction
from django.utils import timezone
from django_tenants.utils import tenant_context

from core.tenancy import maintenance
from memory.embeddings import embed_query, get_embedder, recall_vector
from memory.semantic import selectors
from memory.semantic.models import LexicalPosting, MemoryAccess, MemoryScope, SemanticMemory
from memory.semantic.selectors import MemoryFilters
from memory.semantic.services.duplicates import content_hash
from tenants.models import Tenant
from tests.factories import Caller, contents, make_caller, remember, requires_model, search

pytestmark = requires_model


def _unit(
    rng: np.random.Generator, dims: int, near: np.ndarray | None = None, spread: float = 1.0
) -> np.ndarray:
    v = rng.standard_normal(dims).astype(np.float32)
    if near is not None:
        v = near + spread * v / np.linalg.norm(v)
    return v / np.linalg.norm(v)


def _insert(caller: Caller, vectors: list[np.ndarray], *, scope: str, prefix: str) -> list[SemanticMemory]:
    embedder = get_embedder()
    rows = [
        SemanticMemory(
            agent=caller.agent,
            scope=scope,
            content=f"{prefix} {i}",
            content_hash=content_hash(f"{prefix} {i}"),
            embedding=v,
            embedding_model=embedder.name,
            embedding_dimensions=embedder.dimensions,
        )
        for i, v in enumerate(vectors)
    ]
    SemanticMemory.objects.bulk_create(rows)
    MemoryAccess.objects.bulk_create(MemoryAccess(memory=m) for m in rows)
    return rows


def _vector_candidates(caller: Caller, query: np.ndarray, pool: int) -> set[object]:
    embedder = get_embedder()
    where, params = selectors.visible_filter_sql(
        caller.agent, MemoryFilters(), model=embedder.name, dimensions=embedder.dimensions
    )
    with transaction.atomic():
        selectors.search_prepare("", ef_search=40)
        found = selectors.hybrid_candidates(
            where=where,
            params=params,
            vector=query.tolist(),
            dimensions=embedder.dimensions,
            idf={},
            pool=pool,
        )
    return {c.id for c in found}


def test_filtered_hnsw_scan_finds_every_visible_row_behind_dead_and_hidden_ones(
    scratch_tenant: Tenant,
) -> None:
    """In a tenant of its own: the shared test tenant's index also holds every other test's
    rolled-back rows, and an iterative scan stops at ``hnsw.max_scan_tuples`` (20,000) entries, a
    bound those would reach, as they cannot in a vacuumed production index."""
    alice, bob = make_caller(scratch_tenant, "alice"), make_caller(scratch_tenant, "bob")
    rng = np.random.default_rng(16)
    dims = get_embedder().dimensions
    query = _unit(rng, dims)
    with tenant_context(alice.tenant):
        # dead index entries right around the query: inserted, then rolled back
        with pytest.raises(RuntimeError), transaction.atomic():
            _insert(bob, [_unit(rng, dims, query, 0.3) for _ in range(300)], scope="shared", prefix="dead")
            raise RuntimeError("roll back")
        # live rows nearer the query than alice's that alice may not see
        _insert(
            bob, [_unit(rng, dims, query, 0.4) for _ in range(300)], scope=MemoryScope.PRIVATE, prefix="b"
        )
        mine = _insert(alice, [_unit(rng, dims, query, 1.5) for _ in range(6)], scope="private", prefix="a")
        assert _vector_candidates(alice, query, pool=40) == {m.pk for m in mine}


def test_filtered_hnsw_scan_matches_exact_nearest_neighbours(scratch_tenant: Tenant) -> None:
    """In a tenant of its own, for the reason given above."""
    alice, bob = make_caller(scratch_tenant, "alice"), make_caller(scratch_tenant, "bob")
    rng = np.random.default_rng(7)
    dims = get_embedder().dimensions
    query = _unit(rng, dims)
    with tenant_context(alice.tenant):
        _insert(bob, [_unit(rng, dims, query, 0.8) for _ in range(200)], scope="private", prefix="b")
        _insert(alice, [_unit(rng, dims, query, 0.8) for _ in range(120)], scope="private", prefix="a")
        _insert(bob, [_unit(rng, dims, query, 0.8) for _ in range(80)], scope="shared", prefix="s")
        with transaction.atomic():
            with connection.cursor() as cursor:  # the exact answer: no index
                cursor.execute("SET LOCAL enable_indexscan = off")
            exact = list(
                selectors.memories_visible_to(alice.agent)
                .annotate(d=selectors.cosine_distance(query.tolist(), dims))
                .order_by("d")
                .values_list("pk", flat=True)[:40]
            )
        found = _vector_candidates(alice, query, pool=40)
    recall = len(found & set(exact)) / len(exact)
    assert len(found) == 40 and recall >= 0.95, recall


def test_lexical_arm_finds_a_rare_word_and_keeps_visibility(alice: Caller, bob: Caller) -> None:
    remember(alice, "The hangar door code is zeppelin-4471.", scope="private")
    remember(bob, "Bob keeps his zeppelin models in the attic.", scope="private")  # never alice's
    forgotten = remember(alice, "The zeppelin tour was moved to Friday.", scope="private").json()
    assert alice.client.delete(f"/api/v1/memories/{forgotten['id']}").status_code == 200
    remember(alice, "Lunch is at noon on weekdays.", scope="shared")
    found = contents(search(alice, "zeppelin", k=5))
    assert found[0] == "The hangar door code is zeppelin-4471."
    assert "Bob keeps his zeppelin models in the attic." not in found
    assert "The zeppelin tour was moved to Friday." not in found
    assert "Bob keeps his zeppelin models in the attic." in contents(search(bob, "zeppelin", k=5))


def test_postings_follow_the_content_on_insert_change_and_delete(alice: Caller) -> None:
    memory_id = remember(alice, "Quarterly budgets are reviewed by Ingrid.").json()["id"]
    with tenant_context(alice.tenant):
        postings = dict(LexicalPosting.objects.filter(memory_id=memory_id).values_list("lexeme", "impact"))
        assert set(postings) == {"quarter", "budget", "review", "ingrid"}
        # one occurrence in a 4-lexeme memory: 2.2 / (1 + 1.2 * (0.7 + 0.3 * 4 / 16))
        assert postings["ingrid"] == pytest.approx(2.2 / (1 + 1.2 * 0.775))
        SemanticMemory.objects.filter(pk=memory_id).update(content="[erased]")  # what erasure does
        assert set(LexicalPosting.objects.filter(memory_id=memory_id).values_list("lexeme", flat=True)) == {
            "eras"
        }
        memory = SemanticMemory.objects.get(pk=memory_id)
        assert memory.lexical is not None and len(memory.lexical.indices()) == 1
        MemoryAccess.objects.filter(pk=memory_id).delete()
        SemanticMemory.objects.filter(pk=memory_id).delete()
        assert not LexicalPosting.objects.filter(memory_id=memory_id).exists()


def test_text_relevance_knows_term_rarity(alice: Caller) -> None:
    # "meeting" is in every memory, "Oslo" in one: the rare word decides the lexical side
    for i in range(12):
        remember(alice, f"Weekly meeting number {i} about the roadmap.", scope="shared")
    remember(alice, "The Oslo meeting got cancelled.", scope="shared")
    with tenant_context(alice.tenant):
        # document frequencies come from the statistics autovacuum keeps; here they are made now, as
        # the tables' owner (a tenant's role may not ANALYZE: PostgreSQL skips it with a warning)
        with maintenance(), connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_semanticmemory")
            cursor.execute("ANALYZE memory_lexicalposting")
        selectors._lexicon.clear()
        idf = selectors.lexeme_idf(["oslo", "meet"])
    try:
        assert idf["oslo"] > 20 * idf["meet"] > 0
        results = search(alice, "Oslo meeting", k=3)
    finally:
        selectors._lexicon.clear()  # the statistics roll back with the test; the cache must not outlive them
    assert results[0]["memory"]["content"] == "The Oslo meeting got cancelled."
    assert results[0]["components"]["text_relevance"] == 1.0
    assert all(r["components"]["text_relevance"] < 0.1 for r in results[1:])


def test_each_tenant_ranks_by_its_own_word_statistics(alice: Caller, mallory: Caller) -> None:
    # the statistics are cached per tenant: "meeting" is everywhere in alpha and rare in beta, "Oslo"
    # the other way round, so a search in beta weighed by alpha's statistics (read first, and cached)
    # would rank beta's memories the wrong way round
    for i in range(12):
        remember(alice, f"Weekly meeting number {i} about the roadmap.", scope="shared")
        remember(mallory, f"Oslo office note number {i} about the lease.", scope="shared")
    remember(alice, "The Oslo meeting got cancelled.", scope="shared")
    remember(mallory, "The board meeting got cancelled.", scope="shared")
    for tenant in (alice.tenant, mallory.tenant):
        with tenant_context(tenant), maintenance(), connection.cursor() as cursor:
            cursor.execute("ANALYZE memory_semanticmemory")
            cursor.execute("ANALYZE memory_lexicalposting")
    selectors._lexicon.clear()
    try:
        in_alpha = search(alice, "Oslo meeting", k=20)
        in_beta = search(mallory, "Oslo meeting", k=20)
        with tenant_context(mallory.tenant):
            beta_idf = selectors.lexeme_idf(["oslo", "meet"])
    finally:
        selectors._lexicon.clear()  # the statistics roll back with the test; the cache must not outlive them
    assert in_alpha[0]["memory"]["content"] == "The Oslo meeting got cancelled."
    assert in_alpha[0]["components"]["text_relevance"] == 1.0
    relevance = {r["memory"]["content"]: r["components"]["text_relevance"] for r in in_beta}
    assert relevance.pop("The board meeting got cancelled.") == 1.0, relevance
    assert relevance and all(value < 0.1 for value in relevance.values()), relevance
    assert beta_idf["meet"] > 10 * beta_idf["oslo"] > 0


def test_one_round_trip_search_sets_its_hnsw_options_for_itself_alone(scratch_tenant: Tenant) -> None:
    # outside any transaction (autocommit, as a request runs): the options travel with the statement,
    # are in force for it (an iterative scan finds every visible row behind hidden nearer ones) and
    # are gone after it
    owner, other = make_caller(scratch_tenant, "owner"), make_caller(scratch_tenant, "other")
    rng = np.random.default_rng(3)
    dims = get_embedder().dimensions
    query = _unit(rng, dims)
    with tenant_context(scratch_tenant):
        assert not connection.in_atomic_block
        _insert(other, [_unit(rng, dims, query, 0.4) for _ in range(300)], scope="private", prefix="o")
        mine = _insert(owner, [_unit(rng, dims, query, 1.5) for _ in range(6)], scope="private", prefix="m")
        embedder = get_embedder()
        where, params = selectors.visible_filter_sql(
            owner.agent, MemoryFilters(), model=embedder.name, dimensions=dims
        )
        found = selectors.hybrid_search(
            where=where,
            params=params,
            vector=query.tolist(),
            dimensions=dims,
            idf={},
            pool=40,
            weights=selectors.ScoreWeights(1.0, 0.0, 0.0, 0.01),
            now=timezone.now(),
            limit=None,
            ef_search=40,
        )
        assert {r.memory.pk for r in found} == {m.pk for m in mine}
        assert all(r.memory.agent.name == "owner" and r.memory.access is not None for r in found)
        scores = [r.score for r in found]
        assert scores == sorted(scores, reverse=True)
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('hnsw.iterative_scan', true)")
            assert cursor.fetchone()[0] in (None, "", "off")


def test_a_query_the_best_memory_covers_in_part_gives_the_lexical_side_that_part(alice: Caller) -> None:
    # a short question whose words a memory holds keeps the whole lexical share; a long query whose
    # words the best memory meets only in part (one of six here) gives it about that part, so the
    # dense side decides (docs/explanation/retrieval.md, step 4)
    remember(alice, "The Oslo meeting got cancelled.", scope="shared")
    remember(alice, "Weekly roadmap review with the whole team.", scope="shared")
    covered = search(alice, "Oslo meeting", k=1)[0]
    assert covered["components"]["text_relevance"] == 1.0
    long = search(alice, "Oslo weather, train tickets, a museum visit and fjord cruises", k=1)[0]
    assert long["memory"]["content"] == "The Oslo meeting got cancelled."
    assert 0.05 < long["components"]["text_relevance"] < 0.5, long["components"]


def test_a_dialogue_is_searched_with_its_last_turn_weighing_as_much_as_the_whole() -> None:
    one_line = "What did Caroline research?"
    assert recall_vector(one_line) == embed_query(one_line)  # a one-line query: embedded once, as is
    dialogue = '<BOD>\n<Bart>: "I watched a video about the universe."\n<Assistant>: "Which part?"\n'
    dialogue += '<Bart>: "Black holes, I did not understand them."\n'
    whole = np.asarray(embed_query(dialogue))
    last = np.asarray(embed_query('<Bart>: "Black holes, I did not understand them."'))
    expected = (whole + last) / np.linalg.norm(whole + last)
    got = np.asarray(recall_vector(dialogue))
    assert np.allclose(got, expected, atol=1e-6)
    assert abs(float(np.linalg.norm(got)) - 1.0) < 1e-6
