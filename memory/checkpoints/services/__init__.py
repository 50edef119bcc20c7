"""Saving and restoring checkpoints: PostgreSQL is the record, Redis the hot copy of each stream's
latest. One module per topic, the names callers use re-exported here:

- ``checks``: a checkpoint's bounds and the checks of a save's input;
- ``cache``: the Redis copy (its key, the Lua scripts, the copies to drop after an outage);
- ``save``: ``checkpoint_save`` (one call of ``memory_checkpoint_save``, then the copy);
- ``restore``: ``checkpoint_latest`` (Redis first, else PostgreSQL);
- ``writes``: a task's pending writes (``checkpoint_writes_put``);
- ``delete``: an agent's stream deleted (``checkpoints_delete``) and an erasure's rows.

Who may write and read: checkpoints are per agent within a session. A session is shared by the
agents of a multi-agent system (their events carry the same ``session_id``), so each agent has its
own checkpoint stream in it: step order, idempotency keys, the listing, the latest and one step are
all scoped to (session, calling agent). An agent can neither write into nor read another agent's
stream (checkpoints are private state, like the scratchpad); saving into a session another agent
uses starts the caller's own stream and never changes what that agent restores.

Save: one transaction per checkpoint, serialised per (session, agent) by a transaction-level
advisory lock, taken with the checks and the insert in one call of the schema's function
``memory_checkpoint_save`` (one round trip); after the commit (``transaction.on_commit``) the
checkpoint's JSON document goes to Redis under ``{tenant}:ckpt:<session_id>:<agent id>`` (a hash
``{step, body}``) with the tenant's ``checkpoint_cache_ttl_seconds``.

Restore: Redis first (one ``HGET``); on a miss, PostgreSQL, then the copy is re-warmed. When Redis
cannot be reached, saves and restores still work from PostgreSQL and say so (``degraded``); what
a save committed meanwhile leaves in Redis is dropped as ``cache`` says.

Delete: every path that deletes checkpoints (a thread delete, retention and erasure) drops the
copies through ``cache.copies_drop``, which leaves a tombstone the copy's writers read, so a
re-warm or a save's write that started before the delete cannot cache a deleted checkpoint.
"""

from .cache import DEGRADED_HEADER_VALUE, cache_key
from .checks import (
    MAX_CHANNEL_LENGTH,
    MAX_CHANNELS,
    MAX_KEY_LENGTH,
    MAX_METADATA_BYTES,
    MAX_PLAN_BYTES,
    MAX_STATE_BYTES,
    MAX_SUBJECT_LENGTH,
    MAX_TASK_ID_LENGTH,
    MAX_WRITES,
    PRINTABLE_PATTERN,
    Blob,
    check_namespace,
)
from .delete import ThreadDeleted, checkpoints_delete, checkpoints_erase
from .restore import Restored, checkpoint_latest
from .save import SaveResult, checkpoint_save
from .writes import PendingWrite, StoredWrite, WritesResult, checkpoint_writes_put

__all__ = [
    "DEGRADED_HEADER_VALUE",
    "MAX_CHANNELS",
    "MAX_CHANNEL_LENGTH",
    "MAX_KEY_LENGTH",
    "MAX_METADATA_BYTES",
    "MAX_PLAN_BYTES",
    "MAX_STATE_BYTES",
    "MAX_SUBJECT_LENGTH",
    "MAX_TASK_ID_LENGTH",
    "MAX_WRITES",
    "PRINTABLE_PATTERN",
    "Blob",
    "PendingWrite",
    "Restored",
    "SaveResult",
    "StoredWrite",
    "ThreadDeleted",
    "WritesResult",
    "cache_key",
    "check_namespace",
    "checkpoint_latest",
    "checkpoint_save",
    "checkpoint_writes_put",
    "checkpoints_delete",
    "checkpoints_erase",
]
