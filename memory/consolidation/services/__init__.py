"""The consolidation jobs, one module per topic (callers import the module they need): the forgetting
curve (archiving), promotion of memories to facts, and the episodic summary tree.

Every job runs in the current tenant as one ``ConsolidationRun`` of bounded batches, each batch one
transaction that also commits the run's cursor and counts: a worker killed mid-run loses at most
its current batch, and the next start of the job (the requeued message, or the next schedule)
resumes the run from its cursor. Runs of one job in one tenant never overlap (a session advisory
lock, released when the worker's connection closes, even on a kill). Every change is recorded in
the trail by ``decision_record`` with ``actor`` ``job:consolidation``: one decision per batch of
archived memories and per batch of summaries (session ``consolidation``), one per batch of
promotions and session (in the memories' session, else ``consolidation``). Nothing comes back:
forgotten memories are never archived, restored, promoted or rewritten, and a promotion never
re-asserts a retracted fact.

- ``runs``: a job's run (its lock, cursor, counts and end) and the trail's actor and session;
- ``forgetting``: archiving by the forgetting curve (``forgetting_pass``);
- ``promotion``: memories promoted to facts (``promotion_pass``);
- ``summaries``: the episodic summary tree (``tree_extend``, ``summaries_pass``);
- ``schedule``: one pass of the three when due (``consolidate``);
- ``lifecycle``: the data lifecycle's hooks (``compliance.lifecycle`` calls them; it records why).
"""
