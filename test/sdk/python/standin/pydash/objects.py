"""get, omit and set_ of the test-only pydash stand-in (see __init__)."""

import copy


def _path(path):
    if isinstance(path, (list, tuple)):
        return list(path)
    return str(path).split(".") if path != "" else []


def _step(obj, key):
    if isinstance(obj, dict):
        return obj[key]
    if isinstance(obj, (list, tuple)):
        return obj[int(key)]
    return getattr(obj, key)


def get(obj, path, default=None):
    cur = obj
    for key in _path(path):
        try:
            cur = _step(cur, key)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError):
            return default
    return cur


def set_(obj, path, value):
    keys = _path(path)
    cur = obj
    for key in keys[:-1]:
        if isinstance(cur, dict):
            cur = cur.setdefault(key, {})
        else:
            if getattr(cur, key, None) is None:
                setattr(cur, key, {})
            cur = getattr(cur, key)
    if isinstance(cur, dict):
        cur[keys[-1]] = value
    else:
        setattr(cur, keys[-1], value)
    return obj


def omit(obj, *paths):
    out = copy.deepcopy(obj)
    for p in paths:
        for one in (p if isinstance(p, (list, tuple)) else [p]):
            keys = _path(one)
            cur = out
            for key in keys[:-1]:
                cur = cur.get(key) if isinstance(cur, dict) else None
                if cur is None:
                    break
            if isinstance(cur, dict):
                cur.pop(keys[-1], None)
    return out
