"""Writes to procedural memory, one module per topic (callers import the module they need).

Each change a person or an agent makes is recorded by the service that makes it, as a ``decision``
event in the skill's (or tool's) trail session: ``skill:<name>`` / ``tool:<name>``. Who acted: an
agent (``agent=``; the event is the agent's) or a person in the admin (``username=``; the event is
the tenant's system agent's, with ``actor`` ``user:<username>``).

- ``common``: who acts (``Actor``), the trail session of a skill, the input checks every topic shares;
- ``tools``: tool contracts (``tool_save``) and compiling steps against them (``version_compile``);
- ``skills``: a skill's description and its embedding (``skill_create``, ``skill_update``);
- ``proposals``: agents' proposals of new skills and versions (drafts only an operator publishes);
- ``versions``: an operator's drafts, publishing, rolling back and retiring;
- ``runs``: agents' run reports and their erasure.
"""
