"""Session ids an account chooses, scoped to that account.

Behind the gateway every service shares one namespace of session ids. Were a
caller-chosen id used there as given, `CreateSession{session_id: X}` would
tell any account whether X is taken (and let it squat ids another account
would choose). So a chosen id is never used as given: the session gets the
id `s-` + 32 hex digits of SHA-256 over (account, chosen id), the shape of a
generated id.

- The chosen id is the account's key for the session: creating again with
  it (same folder or workspace) returns the same session, and the session's
  id is the one the reply carries, used in every later call.
- The same string chosen by another account names another session, so
  creating with any id behaves exactly as with a free one, and no reply says
  whether another account uses it. Another account's real id, chosen as a
  key, maps elsewhere too.
- Nothing else changes: no table to keep, no id to translate in replies,
  frames or errors; generated ids are as before.
"""

from __future__ import annotations

import hashlib
import json


def scoped_session_id(account: str, chosen: str) -> str:
    # JSON keeps the pair unambiguous whatever characters an account id holds.
    digest = hashlib.sha256(json.dumps([account, chosen]).encode()).hexdigest()
    return f"s-{digest[:32]}"
