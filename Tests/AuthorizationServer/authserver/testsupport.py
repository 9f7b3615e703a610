"""The request log and the fault-injection controls behind the /test/ endpoints.

The log is a JSON-lines file in the state directory, so it survives `scripts/auth-server restart`.
The controls live in memory: a restart resets them.

Controls are global, or scoped to one user (`"username": "…"` in the control request) so tests that
run in parallel can each use a user of their own (POST /test/users) and never see each other's faults.
"""

import hashlib
import json
import threading
import time

from django.conf import settings

CONTROL_KEYS = (
    "token_delay_ms", "token_delay_before_ms", "api_delay_ms", "drop_next_token_response", "token_status",
    "revoke_status",
)
# Controls that replace the endpoint's answer with an error of that status, without processing the request.
STATUS_KEYS = ("token_status", "revoke_status")

_lock = threading.Lock()
_global_controls = {}
_user_controls = {}
_sequence = 0


def _log_path():
    return settings.STATE_DIR / "requests.jsonl"


def set_controls(values, username=None):
    """Merges `values` into the global controls, or into `username`'s."""
    unknown = [key for key in values if key not in CONTROL_KEYS]
    if unknown:
        raise ValueError(f"unknown control keys: {', '.join(sorted(unknown))}")
    for key, value in values.items():
        if key == "drop_next_token_response":
            if not isinstance(value, bool):
                raise ValueError("drop_next_token_response must be true or false")
        elif key in STATUS_KEYS:
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 500 <= value <= 599):
                raise ValueError(f"{key} must be a status in 500…599, or null to answer normally")
        elif not isinstance(value, int) or isinstance(value, bool) or value < 0 or value > 600_000:
            raise ValueError(f"{key} must be an integer number of milliseconds in 0…600000")
    with _lock:
        target = _user_controls.setdefault(username, {}) if username else _global_controls
        target.update(values)


def reset_controls():
    with _lock:
        _global_controls.clear()
        _user_controls.clear()


def controls_snapshot():
    with _lock:
        return {"global": dict(_global_controls), "users": {k: dict(v) for k, v in _user_controls.items()}}


def control_value(key, username):
    """The control in force for a request made as `username`: the user's own, else the global one."""
    with _lock:
        scoped = _user_controls.get(username, {}) if username else {}
        if key in scoped:
            return scoped[key]
        return _global_controls.get(key)


def take_drop(username):
    """Consumes a pending `drop_next_token_response` for `username` (its own first, else the global)."""
    with _lock:
        scoped = _user_controls.get(username) if username else None
        if scoped and scoped.get("drop_next_token_response"):
            scoped["drop_next_token_response"] = False
            return True
        if not (scoped and "drop_next_token_response" in scoped) and _global_controls.get("drop_next_token_response"):
            _global_controls["drop_next_token_response"] = False
            return True
        return False


def next_sequence():
    global _sequence
    with _lock:
        if _sequence == 0:
            # Continue the numbering of a log kept across a restart.
            try:
                with open(_log_path(), encoding="utf-8") as file:
                    _sequence = max((json.loads(line)["seq"] for line in file if line.strip()), default=0)
            except FileNotFoundError:
                pass
        _sequence += 1
        return _sequence


def append_log(entry):
    line = json.dumps(entry, sort_keys=True) + "\n"
    with _lock:
        with open(_log_path(), "a", encoding="utf-8") as file:
            file.write(line)


def read_log(username=None, path_prefix=None):
    with _lock:
        try:
            with open(_log_path(), encoding="utf-8") as file:
                entries = [json.loads(line) for line in file if line.strip()]
        except FileNotFoundError:
            entries = []
    if username:
        entries = [entry for entry in entries if entry.get("username") == username]
    if path_prefix:
        entries = [entry for entry in entries if entry["path"].startswith(path_prefix)]
    return entries


def clear_log(username=None):
    with _lock:
        if username:
            try:
                with open(_log_path(), encoding="utf-8") as file:
                    kept = [line for line in file if line.strip() and json.loads(line).get("username") != username]
            except FileNotFoundError:
                kept = []
        else:
            kept = []
        with open(_log_path(), "w", encoding="utf-8") as file:
            file.writelines(kept)


def checksum(token):
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def now():
    return time.time()
