"""doctor hf-cache: huggingface_hub's own constants, as the target env's copy computes them (JSON)."""

from __future__ import annotations

import json

import huggingface_hub  # type: ignore[import-not-found, unused-ignore]
import huggingface_hub.constants as c  # type: ignore[import-not-found, unused-ignore]

print(
    json.dumps(
        {
            "version": huggingface_hub.__version__,
            "HF_HOME": c.HF_HOME,
            "HF_HUB_CACHE": c.HF_HUB_CACHE,
            "HF_HUB_OFFLINE": bool(c.HF_HUB_OFFLINE),
        }
    )
)
