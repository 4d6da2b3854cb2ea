"""What the Ray child scripts share (collective.py, ray_local.py): JSON arguments in, one JSON
object out whatever happens, and a Ray that is always shut down.

The children run as scripts in the target env, where verl_setup may not be importable: they
import this file as a sibling (a script's folder is first on its sys.path). Standard library only.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

Body = Callable[[dict[str, Any], dict[str, Any]], None]


def failure(exc: BaseException) -> str:
    """An exception as one short line of the report."""
    return f"{type(exc).__name__}: {str(exc).strip()[:800]}"


def run(body: Body) -> None:
    """body(args, out), args from the command line's JSON; what it raises becomes out["error"] (a
    missing module by name); Ray is shut down if it was started; out is printed as JSON."""
    args = json.loads(sys.argv[1])
    out: dict[str, Any] = {}
    try:
        body(args, out)
    except ImportError as exc:
        out["error"] = f"cannot import {exc.name}: {exc}"
    except Exception as exc:  # a Ray or placement failure is the finding
        out["error"] = failure(exc)
    finally:
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()
    sys.stdout.write(json.dumps(out))
    sys.stdout.flush()
