"""The launch lint's Hydra child: compose verl's config with the launch's overrides, using the
Hydra and OmegaConf installed in the target env, and say what Hydra said (JSON on stdout).

argv: CONFIG_DIR CONFIG_NAME OVERRIDES_JSON. Runs in the target interpreter: Hydra from that env,
else nothing (standard library otherwise).
"""

from __future__ import annotations

import json
import sys

config_dir, name, overrides = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
try:
    import hydra  # type: ignore[import-not-found, unused-ignore]
    from hydra import compose, initialize_config_dir  # type: ignore[import-not-found, unused-ignore]
except Exception as exc:
    print(json.dumps({"ok": None, "error": type(exc).__name__, "message": str(exc)[:400]}))
    sys.exit(0)
try:
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        compose(config_name=name, overrides=overrides)
    print(json.dumps({"ok": True, "hydra": hydra.__version__}))
except Exception as exc:
    print(
        json.dumps(
            {
                "ok": False,
                "hydra": hydra.__version__,
                "error": type(exc).__name__,
                "message": str(exc)[:2000],
            }
        )
    )
