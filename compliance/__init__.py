"""The compliance officer's console: chain checks and signed anchors of the episodic trail, signed
exports an auditor verifies offline (``verify_export``), session timelines, and the trail of what
people do in the admin. A tenant app above ``memory`` (it reads every layer and records into the
episodic log) and below ``api`` and ``config``."""
